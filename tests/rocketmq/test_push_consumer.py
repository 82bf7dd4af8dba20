"""fastmq/rocketmq/push_consumer.py against Apache RocketMQ: listeners, retries through %RETRY% into %DLQ%,
orderly consumption under broker locks, a group whose member leaves."""
from __future__ import annotations

import threading

from fastmq.rocketmq import ConsumeStatus, Message, PullConsumer, PushConsumer
from tests.support.rocketmq import unique
from tests.support.waiting import wait_for




class Recorder:
    """A listener that records what it saw and fails the bodies it is told to."""

    def __init__(self, fail: set[bytes] = frozenset()) -> None:
        self.fail = fail
        self.seen: list = []
        self.lock = threading.Lock()

    def __call__(self, messages):
        with self.lock:
            self.seen.extend(messages)
        return ConsumeStatus.RECONSUME_LATER if messages[0].body in self.fail else ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.seen]


def test_failed_messages_are_retried_then_dead_lettered(rocketmq_server, producer):
    topic, group = unique("push"), unique("push-group")
    for i in range(6):
        producer.send(Message(topic, b"m%d" % i, tags="T"))
    recorder = Recorder(fail={b"m3"})
    consumer = PushConsumer(group, rocketmq_server.namesrv_addr, listener=recorder, max_reconsume_times=1,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        consumer.subscribe(topic, "T")
        consumer.start()
        wait_for(lambda: recorder.bodies().count(b"m3") == 2 and len(recorder.bodies()) == 7, timeout=30,
                 message=lambda: f"seen {recorder.bodies()}")
    finally:
        consumer.close()
    retried = [m for m in recorder.seen if m.body == b"m3"]
    assert [m.reconsume_times for m in retried] == [0, 1]
    assert retried[1].topic == f"%RETRY%{group}" and retried[1].real_topic == topic
    assert retried[1].msg_id == retried[0].msg_id
    with PullConsumer(unique("dlq-reader"), rocketmq_server.namesrv_addr,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as reader:
        reader.subscribe(f"%DLQ%{group}")
        dead: list = []
        wait_for(lambda: dead.extend(reader.poll(0.3)) or dead, timeout=20)
    assert [m.body for m in dead] == [b"m3"] and dead[0].tags == "T"


def test_orderly_consumption_keeps_each_queues_order(rocketmq_server, producer):
    topic, group = unique("orderly"), unique("orderly-group")
    keys = ["a", "b", "c"]
    for i in range(10):
        for key in keys:
            producer.send_orderly(Message(topic, f"{key}-{i}".encode()), key)
    recorder = Recorder(fail=set())
    failed_once = threading.Event()

    def listener(messages):
        if messages[0].body == b"b-4" and not failed_once.is_set():
            failed_once.set()              # one local retry: the queue waits, the order stays
            return ConsumeStatus.RECONSUME_LATER
        return recorder(messages)

    consumer = PushConsumer(group, rocketmq_server.namesrv_addr, listener=listener, orderly=True,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        consumer.subscribe(topic)
        consumer.start()
        wait_for(lambda: len(recorder.bodies()) == 30, timeout=30, message=lambda: f"seen {recorder.bodies()}")
    finally:
        consumer.close()
    for key in keys:
        assert [b for b in recorder.bodies() if b.startswith(key.encode())] == [f"{key}-{i}".encode()
                                                                                for i in range(10)]


def test_queues_of_a_member_that_leaves_move_to_the_others(rocketmq_server, producer):
    topic, group = unique("members"), unique("members-group")
    producer.send(Message(topic, b"create"))
    recorders = [Recorder(), Recorder()]
    consumers = [PushConsumer(group, rocketmq_server.namesrv_addr, listener=r,
                              consume_from_where="CONSUME_FROM_FIRST_OFFSET") for r in recorders]
    try:
        for consumer in consumers:
            consumer.subscribe(topic)
            consumer.start()
        wait_for(lambda: all(len([q for q in c.assignment() if q.topic == topic]) == 2 for c in consumers),
                 timeout=30, message=lambda: f"assignments {[c.assignment() for c in consumers]}")
        first = [producer.send(Message(topic, b"one-%d" % i)) for i in range(20)]
        # at least once: a message consumed just before its queue moved to the member that joined may come again
        wait_for(lambda: len({b for r in recorders for b in r.bodies()}) == 21, timeout=30,
                 message=lambda: f"consumed {[r.bodies() for r in recorders]}")
        assert all(r.bodies() for r in recorders)
        consumers[0].close()
        wait_for(lambda: len([q for q in consumers[1].assignment() if q.topic == topic]) == 4, timeout=40,
                 message=lambda: f"assignment {consumers[1].assignment()}")
        [producer.send(Message(topic, b"two-%d" % i)) for i in range(20)]
        wait_for(lambda: sum(b.startswith(b"two-") for b in recorders[1].bodies()) == 20, timeout=30)
        everything = recorders[0].bodies() + recorders[1].bodies()
        assert sorted(set(everything)) == sorted({b"create"} | {b"one-%d" % i for i in range(20)}
                                                 | {b"two-%d" % i for i in range(20)})
        assert len(first) == 20
    finally:
        for consumer in consumers:
            consumer.close()


def test_a_queue_whose_first_pull_is_answered_before_its_start_returns_is_consumed(rocketmq_server, producer):
    """The client's loop thread may deliver a queue's first pull before the consumer's worker, which started that
    fetch, has gone on: its messages are consumed (the push consumer made the queue's process queue only after
    starting the fetch, and a delivery that came first found none: dropped, while the fetch moved past it)."""
    topic, group = unique("early"), unique("early-group")
    sent = producer.send(Message(topic, b"early"))
    recorder = Recorder()
    consumer = PushConsumer(group, rocketmq_server.namesrv_addr, listener=recorder,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    delivered = threading.Event()
    deliver, assign = consumer.fetcher.deliver, consumer.fetcher.assign

    def deliver_and_tell(queue, epoch, messages, next_offset):
        deliver(queue, epoch, messages, next_offset)
        if queue == sent.message_queue and messages:
            delivered.set()

    def assign_and_wait_for_the_answer(queue, offset, epoch):     # the worker's side of the interleaving
        assign(queue, offset, epoch)
        if queue == sent.message_queue:
            delivered.wait(30)

    consumer.fetcher.deliver, consumer.fetcher.assign = deliver_and_tell, assign_and_wait_for_the_answer
    try:
        consumer.subscribe(topic)
        consumer.start()
        wait_for(delivered.is_set, timeout=30, message="the queue's first pull was never answered")
        wait_for(lambda: recorder.bodies() == [b"early"], timeout=10,
                 message=lambda: f"consumed {recorder.bodies()} of the message pulled first")
    finally:
        consumer.close()
