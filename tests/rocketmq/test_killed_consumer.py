"""Faults: a consumer process of a clustering group is killed (kill -9) with a batch under way. Its queues move to
the member left (the broker drops the dead connection's client and tells the group), which starts each of them at
the offset the dead one had committed: everything is consumed, and what comes again is exactly what the dead
consumer had not committed. Against Apache RocketMQ here, against the embedded broker in
tests/broker/rocketmq/test_killed_consumer.py."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

from fastmq.rocketmq import ConsumeStatus, Message, Producer, PushConsumer
from tests.support.rocketmq import call, create_topics, unique
from tests.support.waiting import wait_for

QUEUE_MESSAGES = 25           # per queue, 4 queues
FINISHED_BY_VICTIM = 12       # then the victim's listener blocks
QUERY_CONSUMER_OFFSET = 14
REPOSITORY = Path(__file__).resolve().parents[2]


def committed(broker: str, group: str, topic: str, queue_id: int) -> int:
    answer = call(broker, QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id})
    return int(answer.ext_fields["offset"]) if answer.code == 0 else -1


def finished_by_victim(log: Path) -> dict[int, set[int]]:
    offsets: dict[int, set[int]] = defaultdict(set)
    for line in log.read_text().splitlines():
        if line != "STARTED":
            queue_id, offset = line.split()
            offsets[int(queue_id)].add(int(offset))
    return offsets


def queue_ids(consumer: PushConsumer, topic: str) -> set[int]:
    """The queues of topic the consumer holds (besides those of its group's %RETRY% topic)."""
    return {queue.queue_id for queue in consumer.assignment() if queue.topic == topic}


class Survivor:
    """The listener of the member that lives: every (queueId, offset) it consumed, in order."""

    def __init__(self) -> None:
        self.consumed: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def __call__(self, messages):
        with self.lock:
            self.consumed.extend((m.queue_id, m.queue_offset) for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    def offsets(self, queue_id: int) -> list[int]:
        with self.lock:
            return sorted(offset for q, offset in self.consumed if q == queue_id)


def test_killed_consumer_queues_move_and_only_uncommitted_messages_come_again(rocketmq_server, tmp_path):
    namesrv, broker = rocketmq_server.namesrv_addr, rocketmq_server.broker_addr
    topic, group = unique("killed-consumer"), unique("killed-consumer-group")
    create_topics(broker, namesrv, topic)
    log = tmp_path / "victim.log"
    log.touch()
    victim = subprocess.Popen([sys.executable, "-m", "tests.rocketmq.killed_consumer", namesrv, topic, group,
                               str(log), str(FINISHED_BY_VICTIM)],
                              cwd=REPOSITORY, env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    survivor = Survivor()
    consumer = PushConsumer(group, namesrv, listener=survivor, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        wait_for(lambda: "STARTED" in log.read_text(), timeout=30, message="the victim consumer did not start")
        consumer.subscribe(topic)
        consumer.start()
        wait_for(lambda: len(queue_ids(consumer, topic)) == 2, timeout=30, interval=0.05,
                 message=lambda: f"the group did not split the 4 queues: ours {consumer.assignment()}")
        mine = queue_ids(consumer, topic)
        theirs = sorted({0, 1, 2, 3} - mine)
        with Producer("killed-consumer-producer", namesrv) as producer:
            for i in range(4 * QUEUE_MESSAGES):
                producer.send(Message(topic, b"m%d" % i))
        # the victim finishes some messages and hangs on the rest; its 5-second auto-commit writes, for each of
        # its queues, the oldest offset it had not finished
        wait_for(lambda: sum(map(len, finished_by_victim(log).values())) == FINISHED_BY_VICTIM, timeout=30,
                 message="the victim did not consume")
        finished = finished_by_victim(log)

        def not_finished(queue_id: int) -> int:
            return min(set(range(QUEUE_MESSAGES + 1)) - finished[queue_id])

        wait_for(lambda: all(committed(broker, group, topic, q) == not_finished(q) for q in theirs), timeout=15,
                 interval=0.2, message=lambda: f"victim commits {[committed(broker, group, topic, q) for q in theirs]}"
                                               f", finished {dict(finished)}")
        at_kill = {q: committed(broker, group, topic, q) for q in theirs}
        assert sum(QUEUE_MESSAGES - offset for offset in at_kill.values()) > 0   # the kill leaves work undone
        victim.kill()
        victim.wait(10)
        wait_for(lambda: len(queue_ids(consumer, topic)) == 4, timeout=30, interval=0.05,
                 message="the survivor did not take the dead consumer's queues")
        expected = {q: list(range(at_kill[q] if q in at_kill else 0, QUEUE_MESSAGES)) for q in range(4)}
        wait_for(lambda: all(survivor.offsets(q) == expected[q] for q in range(4)), timeout=30, interval=0.05,
                 message=lambda: f"survivor consumed {[survivor.offsets(q) for q in range(4)]}, "
                                 f"expected {expected}")
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        consumer.close()
    # nothing lost: what the victim finished before its commit plus what the survivor consumed is every message
    for q in theirs:
        assert set(range(at_kill[q])) <= finished[q]
