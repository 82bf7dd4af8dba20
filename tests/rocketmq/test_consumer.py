"""fastmq/rocketmq/consumer.py (PullConsumer) against Apache RocketMQ: tags, seek, commits, rebalancing,
broadcasting, where a new group starts."""
from __future__ import annotations

import json
import threading
import time
import pytest

from fastmq.rocketmq import Message, RocketMQError
from fastmq.rocketmq.client import ClientInstance
from fastmq.rocketmq.consumer import PullConsumer
from fastmq.rocketmq.offsets import RemoteOffsetStore
from fastmq.rocketmq.protocol import RequestCode
from fastmq.rocketmq.subscription import Subscription, allocate_averagely
from fastmq.rocketmq.route import MessageQueue
from tests.support.rocketmq import call, unique
from tests.support.waiting import wait_for

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200


@pytest.fixture(scope="module")
def filled_topic(producer):
    """20 messages over the 4 queues, tags TagA / TagB / TagC in turn."""
    topic = unique("consume")
    for i in range(20):
        producer.send(Message(topic, b"m%02d" % i, tags=("TagA", "TagB", "TagC")[i % 3]))
    return topic


def poll_until(consumer: PullConsumer, count: int, timeout: float = 30.0) -> list:
    got: list = []
    wait_for(lambda: got.extend(consumer.poll(0.3)) or len(got) >= count, timeout=timeout,
             message=lambda: f"{len(got)} of {count} messages")
    return got


def test_tag_expressions_filter(rocketmq_server, filled_topic):
    with PullConsumer(unique("tags"), rocketmq_server.namesrv_addr,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
        consumer.subscribe(filled_topic, "TagA || TagC")
        got = poll_until(consumer, 13)
        assert sorted(m.body for m in got) == [b"m%02d" % i for i in range(20) if i % 3 != 1]
        assert consumer.poll(0.5) == []


def test_commit_seek_and_resume_where_the_group_left(rocketmq_server, filled_topic):
    group = unique("resume")
    with PullConsumer(group, rocketmq_server.namesrv_addr, auto_commit=False,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
        consumer.subscribe(filled_topic)
        wait_for(lambda: len(consumer.assignment()) == 4, timeout=20)
        got = poll_until(consumer, 20)
        queue = got[0].queue_id
        mq = next(q for q in consumer.assignment() if q.queue_id == queue)
        consumer.seek(mq, 1)
        again = poll_until(consumer, 1)
        assert {m.queue_id for m in again} == {queue} and min(m.queue_offset for m in again) == 1
        assert consumer.position(mq) == 5
        consumer.commit({q: 3 for q in consumer.assignment()})
        assert consumer.committed(mq) == 3
        with pytest.raises(RocketMQError, match="not assigned"):
            consumer.seek(MessageQueue(filled_topic, "broker-a", 99), 0)
    with PullConsumer(group, rocketmq_server.namesrv_addr) as second:
        second.subscribe(filled_topic)
        rest = poll_until(second, 8)
        assert sorted(m.queue_offset for m in rest) == [3, 3, 3, 3, 4, 4, 4, 4]


class CountedEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return super().wait(timeout)


def test_every_commit_sends_every_offset(rocketmq_server, filled_topic):
    """An offset committed before goes again: the broker may have lost it while answering SUCCESS (a 5.x broker
    loses all but one of a topic's first commits handled at once), and only a commit that sends it mends that."""
    with PullConsumer(unique("again"), rocketmq_server.namesrv_addr, auto_commit=False) as consumer:
        queues = consumer.fetch_queues(filled_topic)
        consumer.assign(queues)
        consumer.commit({q: 3 for q in queues})
        assert [consumer.committed(q) for q in queues] == [3, 3, 3, 3]
        lost = queues[2]        # as if lost: another client writes the broker's offset of one queue
        answer = call(rocketmq_server.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": consumer.group, "topic": filled_topic, "queueId": lost.queue_id, "commitOffset": 1})
        assert answer.code == 0 and consumer.committed(lost) == 1
        consumer.commit({q: 3 for q in queues})
        assert [consumer.committed(q) for q in queues] == [3, 3, 3, 3]


def test_first_commits_of_new_groups_all_stay(rocketmq_server, filled_topic):
    """A group's first commit of a topic goes alone, before the others: sent at once, 5% of new groups lost offsets
    the broker had answered SUCCESS (its table of the group made twice over, the later replacing the earlier)."""
    instance = ClientInstance(rocketmq_server.namesrv_addr)
    try:
        queues = list(instance.route(filled_topic).read_queues)
        lost = {}
        for _ in range(200):
            group = unique("first")
            made = instance.remoting.call(rocketmq_server.broker_addr, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                                          body=json.dumps({"groupName": group}).encode())
            assert made.code == 0, made.remark
            store = RemoteOffsetStore(instance, group)
            store.commit({q: 2 for q in queues})
            offsets = [store.read(q) for q in queues]
            if offsets != [2] * len(queues):
                lost[group] = offsets
        assert not lost
    finally:
        instance.close()


def test_a_consumer_without_auto_commit_waits_instead_of_spinning(rocketmq_server, monkeypatch):
    """The worker's commit deadline passed once and was never moved on without auto_commit: it waited 0 s in a loop."""
    monkeypatch.setattr("fastmq.rocketmq.consumer.AUTO_COMMIT_INTERVAL", 0.05)
    with PullConsumer(unique("idle"), rocketmq_server.namesrv_addr, auto_commit=False) as consumer:
        consumer._wake = counted = CountedEvent()
        counted.set()
        time.sleep(0.5)     # ten of the shortened commit intervals pass
        assert counted.waits < 20


def test_assigned_queues_and_consume_from_last(rocketmq_server, producer):
    topic = unique("last")
    earlier = [producer.send(Message(topic, b"earlier-%d" % i)) for i in range(8)]
    with PullConsumer(unique("assigned"), rocketmq_server.namesrv_addr,
                      consume_from_where="CONSUME_FROM_LAST_OFFSET") as consumer:
        queues = consumer.fetch_queues(topic)
        assert sorted(q.queue_id for q in queues) == [0, 1, 2, 3]
        consumer.assign(queues[:1])
        with pytest.raises(RocketMQError, match="do not mix"):
            consumer.subscribe(topic)
        start = consumer.position(queues[0])
        assert start == 1 + max(r.queue_offset for r in earlier if r.message_queue == queues[0])
        sent = producer.send(Message(topic, b"fresh"), queue=queues[0])
        [msg] = poll_until(consumer, 1)
        assert msg.body == b"fresh" and msg.queue_offset == sent.queue_offset == start


def test_two_consumers_of_a_group_share_the_queues(rocketmq_server, filled_topic):
    group = unique("shared")
    first = PullConsumer(group, rocketmq_server.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    second = PullConsumer(group, rocketmq_server.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        first.subscribe(filled_topic)
        second.subscribe(filled_topic)
        # Until both have rebalanced after the second joined, their views may overlap: wait for the split.
        wait_for(lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2
                 and not first.assignment() & second.assignment(), timeout=30,
                 message=lambda: f"assignments {first.assignment()} / {second.assignment()}")
        got = poll_until(first, 10) + poll_until(second, 10)
        assert sorted(m.body for m in got) == [b"m%02d" % i for i in range(20)]
    finally:
        first.close()
        second.close()


def test_broadcasting_consumers_each_get_everything_and_keep_offsets_in_a_file(rocketmq_server, filled_topic,
                                                                                tmp_path):
    group = unique("broadcast")
    consumers = [PullConsumer(group, rocketmq_server.namesrv_addr, message_model="BROADCASTING",
                              consume_from_where="CONSUME_FROM_FIRST_OFFSET", offset_store_dir=str(tmp_path))
                 for _ in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe(filled_topic)
        for consumer in consumers:
            assert len(poll_until(consumer, 20)) == 20
    finally:
        for consumer in consumers:
            consumer.close()
    files = list(tmp_path.rglob("offsets.json"))
    assert len(files) == 2
    table = json.loads(files[0].read_text())["offsetTable"]
    assert sorted(table.values()) == [5, 5, 5, 5] and all(k.startswith(filled_topic + "@") for k in table)


def test_average_allocation_matches_rocketmq():
    queues = [MessageQueue("t", "b", i) for i in range(5)]
    shares = [allocate_averagely(c, ["c1", "c0", "c2"], queues) for c in ("c0", "c1", "c2")]
    assert [[q.queue_id for q in share] for share in shares] == [[0, 1], [2, 3], [4]]
    assert allocate_averagely("c3", ["c0", "c1", "c2", "c3", "c4", "c5"], queues) == [queues[3]]
    assert allocate_averagely("c5", ["c0", "c1", "c2", "c3", "c4", "c5"], queues) == []
    assert allocate_averagely("stranger", ["c0"], queues) == []
    assert Subscription("t", "A || B ||").tags == {"A", "B"} and Subscription("t", None).all
    with pytest.raises(ValueError, match="names no tag"):
        Subscription("t", "||")


def test_consume_from_a_timestamp(rocketmq_server, producer):
    topic = unique("timestamp")
    first = producer.send(Message(topic, b"before"))
    queue = first.message_queue
    with PullConsumer(unique("stamps"), rocketmq_server.namesrv_addr,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as reader:
        reader.assign([queue])
        [stored] = poll_until(reader, 1)
    # The next message is stored at least a millisecond later, so the search cannot land on the first one.
    wait_for(lambda: time.time() * 1000 > stored.store_timestamp + 2, timeout=5)
    second = producer.send(Message(topic, b"after"), queue=queue)
    [after] = [m for m in poll_all_of(rocketmq_server.namesrv_addr, queue, 2) if m.body == b"after"]
    with PullConsumer(unique("from-time"), rocketmq_server.namesrv_addr,
                      consume_from_where="CONSUME_FROM_TIMESTAMP", consume_timestamp=after.store_timestamp) as c:
        c.assign([queue])
        assert c.position(queue) == second.queue_offset
        assert [m.body for m in poll_until(c, 1)] == [b"after"]


def poll_all_of(namesrv: str, queue: MessageQueue, count: int) -> list:
    with PullConsumer(unique("all-of"), namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET") as reader:
        reader.assign([queue])
        return poll_until(reader, count)


def group_members(instance, broker_addr: str, group: str) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP as the broker answers it (it knows the members from their heartbeats)."""
    response = instance.remoting.call(broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    return json.loads(response.body or b"{}").get("consumerIdList") or []


def test_a_closed_consumer_leaves_its_group(rocketmq_server, filled_topic, producer):
    group = unique("leaving")
    consumer = PullConsumer(group, rocketmq_server.namesrv_addr)
    consumer.subscribe(filled_topic)
    client_id = consumer.instance.client_id
    assert group_members(producer.instance, rocketmq_server.broker_addr, group) == [client_id]
    consumer.close()
    assert group_members(producer.instance, rocketmq_server.broker_addr, group) == []


def test_a_backlog_is_pulled_two_batches_at_a_time_and_delivered_in_order(rocketmq_server, producer):
    topic = unique("pipelined")
    created = producer.send(Message(topic, b"create")).message_queue
    queue = MessageQueue(topic, created.broker_name, (created.queue_id + 1) % 4)    # an empty queue
    for start in range(0, 400, 100):
        producer.send_batch([Message(topic, b"%d" % i) for i in range(start, start + 100)], queue=queue)
    with PullConsumer(unique("pipelined"), rocketmq_server.namesrv_addr, pull_batch_size=8,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False) as consumer:
        remoting = consumer.instance.remoting
        out = {"now": 0, "most": 0}
        lock = threading.Lock()
        invoke_frame = remoting.invoke_frame

        def counting(address, frame, opaque, callback, **options):     # counts the pulls out at once
            def answered(response, error):
                with lock:
                    out["now"] -= 1
                callback(response, error)
            with lock:
                out["now"] += 1
                out["most"] = max(out["most"], out["now"])
            invoke_frame(address, frame, opaque, answered, **options)

        remoting.invoke_frame = counting
        consumer.assign([queue])
        got = poll_until(consumer, 400)
    assert [m.queue_offset for m in got] == list(range(400))        # in order, none twice, none missed
    assert [m.body for m in got] == [b"%d" % i for i in range(400)]
    assert out["most"] == 2
