"""Requests a broker sends to fastmq.rocketmq's clients, against Apache RocketMQ: an administrator's
GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY go to the broker, which hands them to the client over the
client's own connection and passes its answer back (as `mqadmin consumerStatus` and `mqadmin consumeMessage` do);
an offset reset (INVOKE_BROKER_TO_RESET_OFFSET, `mqadmin resetOffsetByTime`) reaches the client as
RESET_CONSUMER_CLIENT_OFFSET.
tests/broker/rocketmq/test_server_requests.py runs them against the embedded broker, with `server` and `sender`
fixtures of its own."""
from __future__ import annotations

import json
import threading

import pytest

from fastmq.rocketmq import ConsumeStatus, Message, MessageQueue, PushConsumer
from fastmq.rocketmq.server_requests import parse_reset_offset_body, parse_running_info
from tests.support.rocketmq import call, unique
from tests.support.waiting import wait_for

GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, INVOKE_BROKER_TO_RESET_OFFSET = 307, 309, 222
STATUS_FIELDS = {"pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS", "consumeFailedMsgs"}


@pytest.fixture
def server(rocketmq_server):
    return rocketmq_server


@pytest.fixture
def sender(producer):
    return producer


@pytest.fixture
def consumer_and_seen(server, sender):
    topic, group = unique("admin"), unique("admin-group")
    sender.send(Message(topic, b"first"))
    seen: list = []
    lock = threading.Lock()

    def listener(messages):
        with lock:
            seen.extend(messages)
        if messages[0].body == b"refused":
            raise ValueError("refused on purpose")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, server.namesrv_addr, listener=listener,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        consumer.subscribe(topic, "*")
        consumer.start()
        wait_for(lambda: seen, timeout=30, message="the consumer did not consume")
        yield topic, consumer, seen
    finally:
        consumer.close()


def running_info(server, consumer, jstack=True):
    answer = call(server.broker_addr, GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": consumer.group, "clientId": consumer.instance.client_id, "jstackEnable": jstack},
        timeout=10)
    assert answer.code == 0, answer.remark
    return parse_running_info(answer.body)


def test_running_info_through_the_broker(server, consumer_and_seen):
    topic, consumer, _seen = consumer_and_seen

    def ours(info):
        return {queue: queue_info for queue, queue_info in info["mqTable"].items() if queue.topic == topic}

    # the one message consumed moves its queue's offset once the listener has returned
    info = wait_for(lambda: (lambda i: i if sum(q["commitOffset"] for q in ours(i).values()) == 1 else None)(
        running_info(server, consumer)), timeout=10, interval=0.1, message="the consumed message's offset never showed")
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info["properties"]["PROP_NAMESERVER_ADDR"] == server.namesrv_addr
    assert {s["topic"] for s in info["subscriptionSet"]} == {topic, f"%RETRY%{consumer.group}"}
    assert {queue.queue_id for queue in ours(info)} == set(range(len(ours(info)))) and len(ours(info)) >= 1
    assert "fastmq-rocketmq-consume" in info["jstack"]
    status = info["statusTable"][topic]      # the Java client's ConsumeStatus of the last minute
    assert set(status) == STATUS_FIELDS
    assert status["pullTPS"] > 0 and status["consumeOKTPS"] > 0 and status["pullRT"] >= 0
    assert status["consumeFailedTPS"] == 0 and status["consumeFailedMsgs"] == 0


def test_running_info_counts_failed_messages(server, sender, consumer_and_seen):
    topic, consumer, seen = consumer_and_seen
    sender.send(Message(topic, b"refused"))
    wait_for(lambda: any(m.body == b"refused" for m in seen), timeout=30, message="the consumer did not consume")
    status = wait_for(lambda: (lambda s: s if s.get("consumeFailedMsgs") else None)(
        running_info(server, consumer, jstack=False)["statusTable"].get(topic, {})),
        timeout=10, interval=0.1, message="the failed message was not counted")
    assert status["consumeFailedMsgs"] >= 1 and status["consumeFailedTPS"] > 0


def test_offset_reset_through_the_broker(server, sender, consumer_and_seen):
    topic, consumer, seen = consumer_and_seen
    sender.send(Message(topic, b"second"))
    wait_for(lambda: [m.body for m in seen].count(b"second") == 1, timeout=30, message="nothing consumed")
    # the broker resets only a group with an offset for every queue: the queues are started one after another
    # (each after an offset lookup), and the message may have come through the first ones before the last is
    # assigned; commit() stores only the assigned queues
    queues = set(consumer.fetch_queues(topic))
    wait_for(lambda: queues <= consumer.assignment(), timeout=30, message="the consumer never held every queue")

    def held() -> str:      # (queue: position, committed) when the wait fails: which queue had no position
        def position(queue: MessageQueue) -> int | None:
            try:
                return consumer.position(queue)
            except KeyError:
                return None
        return ", ".join(f"{q.queue_id}: {position(q)}, {consumer.committed(q)}"
                         for q in sorted(queues, key=lambda q: q.queue_id))

    wait_for(lambda: consumer.commit() or all(consumer.committed(q) is not None for q in queues), timeout=30,
             message=lambda: f"the group never had an offset for every queue ({held()})")
    answer = call(server.broker_addr, INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": topic, "group": consumer.group, "timestamp": 0, "isForce": True}, timeout=10)
    assert answer.code == 0, answer.remark
    offsets = parse_reset_offset_body(answer.body)
    assert {queue.topic for queue in offsets} == {topic} and set(offsets.values()) == {0}
    # every queue starts again from 0, one after another: both messages come again, in either order
    wait_for(lambda: sorted(m.body for m in seen if m.topic == topic) == [b"first", b"first", b"second", b"second"],
             timeout=30, message="the reset did not bring the messages again")


def test_offset_reset_of_a_group_without_offsets(server, consumer_and_seen):
    topic, _consumer, _seen = consumer_and_seen
    answer = call(server.broker_addr, INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": topic, "group": "no-such-group", "timestamp": 0, "isForce": True}, timeout=10)
    assert answer.code == 1 and "not exist" in answer.remark


def test_running_info_of_a_client_not_connected(server, consumer_and_seen):
    _topic, consumer, _seen = consumer_and_seen
    answer = call(server.broker_addr, GET_CONSUMER_RUNNING_INFO,
                  {"consumerGroup": consumer.group, "clientId": "127.0.0.1@nobody", "jstackEnable": False},
                  timeout=10)
    assert answer.code != 0


@pytest.mark.parametrize(("body", "result"), [(b"again", "CR_SUCCESS"), (b"refused", "CR_THROW_EXCEPTION")])
def test_consume_message_directly_through_the_broker(server, sender, consumer_and_seen, body, result):
    topic, consumer, seen = consumer_and_seen
    sent = sender.send(Message(topic, body))
    wait_for(lambda: any(m.body == body for m in seen), timeout=30, message="the consumer did not consume")
    answer = call(server.broker_addr, CONSUME_MESSAGE_DIRECTLY, {
        "consumerGroup": consumer.group, "clientId": consumer.instance.client_id, "msgId": sent.offset_msg_id,
        "brokerName": sent.message_queue.broker_name}, timeout=10)
    assert answer.code == 0, answer.remark
    outcome = json.loads(answer.body)
    assert outcome["consumeResult"] == result and outcome["order"] is False
    assert (outcome["remark"] is not None) == (result == "CR_THROW_EXCEPTION")
    # once pulled, once handed over (a refused one also comes back through %RETRY%, counted apart)
    assert [m.body for m in seen if m.topic == topic].count(body) == 2
