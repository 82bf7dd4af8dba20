"""fastmq/rocketmq/compat.py: the usage PyPI `rocketmq`'s README and tests show, against Apache RocketMQ."""
from __future__ import annotations

import threading

import pytest

from fastmq.rocketmq.compat import (
    ConsumeStatus,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
)
from fastmq.rocketmq import Message as NativeMessage
from fastmq.rocketmq import RocketMQError
from tests.support.rocketmq import unique
from tests.support.waiting import wait_for


def make_message(topic: str, body: str, keys: str = "XXX", tags: str = "XXX") -> Message:
    msg = Message(topic)
    msg.set_keys(keys)
    msg.set_tags(tags)
    msg.set_body(body)
    return msg


def test_the_readme_producer_and_pull_consumer(rocketmq_server):
    topic = unique("compat")
    producer = Producer("PID-XXX")
    producer.set_namesrv_addr(rocketmq_server.namesrv_addr)
    producer.start()
    try:
        msg = make_message(topic, "XXXX")
        msg.set_property("color", "red")
        ret = producer.send_sync(msg)
        assert ret.status == SendStatus.OK and len(ret.msg_id) == 32 and ret.offset >= 0
        done = threading.Event()
        results = []
        producer.send_async(make_message(topic, "async"), lambda r: (results.append(r), done.set()), None)
        assert done.wait(20) and results[0].status == SendStatus.OK
        producer.send_oneway(make_message(topic, "oneway"))
        ordered = [producer.send_orderly(make_message(topic, f"ordered-{i}"), 7) for i in range(3)]
        assert len({r.offset for r in ordered}) == 3
        producer.send_oneway_orderly(make_message(topic, "oneway-ordered", tags="YYY"), 7)
    finally:
        producer.shutdown()
    consumer = PullConsumer("CID_XXX")
    consumer.set_namesrv_addr(rocketmq_server.namesrv_addr)
    consumer.start()
    try:
        def all_seven():
            messages = list(consumer.pull(topic))
            return messages if len(messages) == 7 else None

        bodies = wait_for(all_seven, timeout=20)
        by_body = {m.body: m for m in bodies}
        first = by_body[b"XXXX"]
        assert (first.topic, first.tags, first.keys, first.id) == (topic, b"XXX", b"XXX", ret.msg_id)
        assert first.get_property("color") == b"red" and first["color"] == b"red" and str(first) == "XXXX"
        assert by_body[b"ordered-0"].queue_id == by_body[b"ordered-2"].queue_id == 7 % 4
        assert [m.body for m in consumer.pull(topic, "YYY")] == [b"oneway-ordered"]
    finally:
        consumer.shutdown()


def test_the_readme_push_consumer_retries_what_the_callback_raises_on(rocketmq_server, producer):
    topic = unique("compat-push")
    producer.send(NativeMessage(topic, b"create"))
    seen = []
    lock = threading.Lock()

    def callback(msg):
        with lock:
            seen.append((msg.body, msg.reconsume_times))
        if msg.body == b"flaky" and msg.reconsume_times == 0:
            raise RuntimeError("not yet")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(unique("CID"))
    consumer.set_namesrv_addr(rocketmq_server.namesrv_addr)
    consumer.subscribe(topic, callback)
    consumer.start()
    try:
        # A new group starts at the end of the queues (CONSUME_FROM_LAST_OFFSET, the library's default): every
        # queue of the topic is held before the sends (the group's retry queue is in the assignment too).
        queues = set(consumer._consumer.fetch_queues(topic))
        wait_for(lambda: queues <= consumer._consumer.assignment(), timeout=30,
                 message=lambda: f"assigned {consumer._consumer.assignment()}")
        for body in (b"fine", b"flaky"):
            producer.send(NativeMessage(topic, body))
        wait_for(lambda: (b"flaky", 1) in seen, timeout=30, message=lambda: f"seen {seen}")
    finally:
        consumer.shutdown()
    assert (b"fine", 0) in seen and (b"flaky", 0) in seen and (b"create", 0) not in seen


def test_what_is_not_supported_says_so():
    producer = Producer("PID")
    with pytest.raises(RocketMQError, match="set_namesrv_addr"):
        producer.set_namesrv_domain("http://onsaddr.example")
    with pytest.raises(RocketMQError, match="before start"):
        producer.start()
    with pytest.raises(RocketMQError, match="not started"):
        producer.send_sync(Message("t"))
