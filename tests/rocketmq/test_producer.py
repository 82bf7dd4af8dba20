"""fastmq/rocketmq/producer.py against Apache RocketMQ: every kind of send, read back by a pull consumer."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from fastmq.rocketmq import Message, MessageQueue, Producer, RocketMQError, SendStatus
from fastmq.errors import ProtocolError
from fastmq.rocketmq._native.remoting import FLAG_RESPONSE, SERIALIZE_JSON, SERIALIZE_ROCKETMQ, encode_frame
from fastmq.rocketmq.consumer import PullConsumer
from fastmq.rocketmq.errors import BrokerError
from fastmq.rocketmq.producer import FutureCondition, SendFuture, send_outcome
from tests.support.rocketmq import unique
from tests.support.waiting import wait_for



def read_all(namesrv: str, topic: str, count: int, expression: str = "*") -> list:
    with PullConsumer(unique("reader"), namesrv,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
        consumer.subscribe(topic, expression)
        got: list = []
        wait_for(lambda: got.extend(consumer.poll(0.5)) or len(got) >= count, timeout=30,
                 message=lambda: f"{len(got)} of {count} messages of {topic}")
        return got


def test_a_message_keeps_what_it_was_given():
    message = Message("topic", "caf\u00e9", tags="T", keys=["k1", "k2"], properties={"p": "v"}, flag=3, delay_level=2,
                      wait_store=False)
    assert (message.topic, message.body, message.tags, message.keys, message.properties, message.flag,
            message.delay_level, message.wait_store) == ("topic", "caf\u00e9".encode(), "T", ["k1", "k2"], {"p": "v"},
                                                         3, 2, False)
    assert repr(message) == "Message(topic='topic', tags='T', keys=['k1', 'k2'], body=5 bytes)"
    message.keys, message.body = "k3", b"raw"          # the compat face fills its messages field by field
    assert (message.keys, message.body) == ("k3", b"raw")
    plain = Message("topic", memoryview(b"view"))
    assert (plain.tags, plain.keys, plain.properties, plain.flag, plain.delay_level, plain.wait_store) == (
        None, None, None, 0, 0, True) and bytes(plain.body) == b"view"
    for topic in ("", None):
        with pytest.raises(ValueError, match="needs a topic"):
            Message(topic, b"x")
    with pytest.raises(TypeError):
        Message(b"topic", b"x")
    with pytest.raises(AttributeError):
        message.extra = 1


def test_send_outcomes_of_every_kind_of_answer():
    """send_outcome: the compiled reader's usual answers and what the general decoder says of the rest."""
    queue = MessageQueue("topic", "broker-a", 1)

    def answer(code: int, fields: dict, serialize_type: int = SERIALIZE_ROCKETMQ, remark: str | None = None):
        wire = encode_frame(code, 5, fields, None, FLAG_RESPONSE, serialize_type, remark=remark)[4:]
        return send_outcome(wire, "UNIQ", queue)

    stored = {"msgId": "7F0000010000", "queueId": "1", "queueOffset": "42", "transactionId": "tx"}
    for serialize_type in (SERIALIZE_ROCKETMQ, SERIALIZE_JSON):
        result = answer(10, stored, serialize_type)
        assert (result.status, result.msg_id, result.offset_msg_id, result.message_queue, result.queue_offset,
                result.transaction_id) == (SendStatus.FLUSH_DISK_TIMEOUT, "UNIQ", "7F0000010000", queue, 42, "tx")
    moved = answer(0, {**stored, "queueId": "3"})
    assert moved.message_queue == MessageQueue("topic", "broker-a", 3) and moved.queue_offset == 42
    assert answer(0, {}).queue_offset == -1 and answer(0, {}).message_queue == queue
    refused = answer(14, {}, remark="topic not exist")
    assert isinstance(refused, BrokerError) and refused.code == 14 and "topic not exist" in str(refused)
    for offset in ("abc", str(2**64)):
        malformed = answer(0, {**stored, "queueOffset": offset})
        assert isinstance(malformed, RocketMQError) and "malformed" in str(malformed)
    assert isinstance(send_outcome(b"\x01\x00\x00", "UNIQ", queue), ProtocolError)


def test_sync_send_keeps_tags_keys_properties_and_body(rocketmq_server, producer):
    topic = unique("sync")
    big = b"compressible " * 1000              # over 4 KiB: sent zlib-compressed
    first = producer.send(Message(topic, b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}))
    second = producer.send(Message(topic, big, flag=7))
    assert first.status is SendStatus.SEND_OK and second.status is SendStatus.SEND_OK
    assert first.message_queue.topic == topic and first.message_queue.broker_name == rocketmq_server.broker_name
    assert len(first.msg_id) == 32 and first.msg_id != second.msg_id and len(first.offset_msg_id) == 32
    got = {m.msg_id: m for m in read_all(rocketmq_server.namesrv_addr, topic, 2)}
    one = got[first.msg_id]
    assert (one.body, one.tags, one.keys, one.properties["color"]) == (b"hello", "TagA", "k1 k2", "red")
    assert (one.queue_id, one.queue_offset) == (first.message_queue.queue_id, first.queue_offset)
    assert one.offset_msg_id == first.offset_msg_id and one.store_host == rocketmq_server.broker_addr
    assert got[second.msg_id].body == big and got[second.msg_id].flag == 7


def test_sync_sends_read_their_own_answers(rocketmq_server, producer):
    # A synchronous send with nothing else in flight on its connection is answered on the sending thread: the
    # response does not go through the I/O thread (Connection.call_blocking).
    topic = unique("own-answers")
    producer.send(Message(topic, b"create"))
    metrics = producer.remoting.pool.metrics
    before = metrics.direct_responses
    results = [producer.send(Message(topic, b"sync-%d" % i)) for i in range(20)]
    assert [r.status for r in results] == [SendStatus.SEND_OK] * 20
    assert len({(r.message_queue, r.queue_offset) for r in results}) == 20
    # Heartbeats and route refreshes of the I/O thread may share a connection now and then: most, not all.
    assert metrics.direct_responses - before >= 15


def test_sync_and_async_sends_from_two_threads_share_a_connection(rocketmq_server, producer):
    # One thread's synchronous sends read their own answers while another thread's async sends are answered on the
    # I/O thread, on the same broker connection at once: every answer reaches its own send, none is lost or crossed.
    topic = unique("mixed-threads")
    producer.send(Message(topic, b"create"))
    start = threading.Barrier(2, timeout=30)
    synced: list = []
    futures: list = []

    def sync_sends() -> None:
        start.wait()
        synced.extend(producer.send(Message(topic, b"sync-%d" % i)) for i in range(150))

    def async_sends() -> None:
        start.wait()
        for burst in range(15):
            futures.extend(producer.send_async(Message(topic, b"async-%d-%d" % (burst, i))) for i in range(20))
            futures[-1].result(30)

    threads = [threading.Thread(target=sync_sends), threading.Thread(target=async_sends)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    results = synced + [future.result(30) for future in futures]
    assert len(results) == 450 and all(r.status is SendStatus.SEND_OK for r in results)
    assert len({(r.message_queue, r.queue_offset) for r in results}) == 450
    bodies = sorted(m.body for m in read_all(rocketmq_server.namesrv_addr, topic, 451))
    assert bodies == sorted([b"create"] + [b"sync-%d" % i for i in range(150)]
                            + [b"async-%d-%d" % (b, i) for b in range(15) for i in range(20)])


def test_sync_sends_from_four_threads_are_each_stored_once(rocketmq_server, producer):
    # Four threads' synchronous sends on one producer (one broker connection): a thread borrows the connection for
    # its round trip when nothing else is in flight there, the others go through the I/O thread meanwhile.
    topic = unique("four-threads")
    producer.send(Message(topic, b"create"))
    metrics = producer.remoting.pool.metrics
    borrowed_before = metrics.direct_responses
    results: list = []

    def sync_sends(start: threading.Barrier, round_: int, thread: int) -> None:
        start.wait()
        results.extend(producer.send(Message(topic, b"r%d-t%d-%d" % (round_, thread, i))) for i in range(60))

    # Whether a thread ever finds the connection free is up to the scheduler: a loaded machine once ran a whole
    # round of 240 sends without one borrowed round trip. Rounds go on (at most 5) until one was borrowed.
    rounds = 0
    while rounds < 5 and (rounds == 0 or metrics.direct_responses == borrowed_before):
        start = threading.Barrier(4, timeout=30)
        threads = [threading.Thread(target=sync_sends, args=(start, rounds, n)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
        rounds += 1
    assert len(results) == 240 * rounds and all(r.status is SendStatus.SEND_OK for r in results)
    assert len({(r.message_queue, r.queue_offset) for r in results}) == 240 * rounds
    assert metrics.direct_responses > borrowed_before
    bodies = sorted(m.body for m in read_all(rocketmq_server.namesrv_addr, topic, 1 + 240 * rounds))
    assert bodies == sorted([b"create"] + [b"r%d-t%d-%d" % (r, t, i) for r in range(rounds) for t in range(4)
                                           for i in range(60)])


def test_async_oneway_and_batch_sends_all_arrive(rocketmq_server, producer):
    topic = unique("async")
    producer.send(Message(topic, b"create"))           # the topic exists on the broker from here on
    futures = [producer.send_async(Message(topic, b"async-%d" % i)) for i in range(200)]
    results = [f.result(30) for f in futures]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({(r.message_queue, r.queue_offset) for r in results}) == 200
    assert len({r.message_queue.queue_id for r in results}) == 4       # round robin over every queue
    batch = producer.send_batch([Message(topic, b"batch-%d" % i, tags="B") for i in range(10)])
    assert batch.status is SendStatus.SEND_OK and len(batch.msg_id.split(",")) == 10
    for i in range(5):
        producer.send_oneway(Message(topic, b"oneway-%d" % i))
    bodies = [m.body for m in read_all(rocketmq_server.namesrv_addr, topic, 216)]
    assert sorted(bodies) == sorted([b"create"] + [b"async-%d" % i for i in range(200)]
                                    + [b"batch-%d" % i for i in range(10)] + [b"oneway-%d" % i for i in range(5)])
    by_queue = [m for m in read_all(rocketmq_server.namesrv_addr, topic, 10, "B")]
    assert sorted(m.queue_offset for m in by_queue) == list(range(batch.queue_offset, batch.queue_offset + 10))


def test_send_futures_sharing_a_condition_wait_for_their_own_result():
    condition = FutureCondition()
    mine, other = SendFuture(condition), SendFuture(condition)
    waited: list = []
    waiter = threading.Thread(target=lambda: waited.append(mine.result(30)))
    waiter.start()
    wait_for(lambda: condition._waiters, timeout=10, message="the waiter never waited")  # type: ignore[attr-defined]
    other.set_result("other's")           # wakes the waiter, whose future is still pending
    mine.set_result("mine")
    waiter.join(30)
    assert waited == ["mine"]
    with pytest.raises(concurrent.futures.TimeoutError):
        SendFuture(condition).result(0.01)
    late = SendFuture(condition)
    late.set_exception(ValueError("refused"))
    assert isinstance(late.exception(1), ValueError)
    # what callers of concurrent.futures and asyncio do with a send's future
    done, _ = concurrent.futures.wait([mine, other, late], timeout=1)
    assert len(done) == 3

    async def awaited() -> object:
        return await asyncio.wait_for(asyncio.wrap_future(mine), 1)
    assert asyncio.run(awaited()) == "mine"
    assert condition.sleepers == 0


def test_send_futures_wake_each_kind_of_waiter_and_call_their_callbacks():
    """Completion notifies the shared Condition only while a thread sleeps on it: each kind of waiter still wakes
    (result(), exception(), concurrent.futures.wait already waiting), and callbacks run once, in order, whether
    added before or after completion; a callback that raises is logged and does not stop the others."""
    condition = FutureCondition()
    for complete in (lambda f: f.set_result("sent"), lambda f: f.set_exception(ValueError("refused"))):
        future = SendFuture(condition)
        calls: list = []
        future.add_done_callback(lambda f: calls.append(("first", f.done())))
        future.add_done_callback(lambda f: 1 / 0)
        future.add_done_callback(lambda f: calls.append(("second", f.done())))
        outcomes: list = []
        sleepers = [threading.Thread(target=lambda: outcomes.append(future.exception(30))),
                    threading.Thread(target=lambda: outcomes.append(
                        len(concurrent.futures.wait([future], timeout=30).done))),
                    threading.Thread(target=lambda: outcomes.append(
                        len(list(concurrent.futures.as_completed([future], timeout=30)))))]
        for thread in sleepers:
            thread.start()
        wait_for(lambda: condition.sleepers == 1 and len(future._waiters) == 2,  # type: ignore[attr-defined]
                 timeout=10, message="the waiters never waited")
        complete(future)
        for thread in sleepers:
            thread.join(30)
        assert not any(thread.is_alive() for thread in sleepers)
        assert calls == [("first", True), ("second", True)]
        assert len(outcomes) == 3 and outcomes.count(1) == 2 and condition.sleepers == 0
        assert future._waiters == []             # type: ignore[attr-defined]  # each waiter took itself off
        late: list = []
        future.add_done_callback(late.append)
        assert late == [future]
        with pytest.raises(concurrent.futures.InvalidStateError):
            complete(future)


def test_a_cancelled_send_stays_cancelled_and_the_producer_goes_on(rocketmq_server, producer, caplog):
    """A send's future is the send itself: cancelling it before the answer comes leaves it cancelled (its
    callbacks run once, the late answer is dropped without an error on the I/O thread), and the next sends go."""
    topic = unique("cancel")
    producer.send(Message(topic, b"route"))
    cancelled: list = []
    for attempt in range(20):            # the answer may win the race: try until one send is cancelled in time
        future = producer.send_async(Message(topic, b"maybe-%d" % attempt))
        future.add_done_callback(cancelled.append)
        if future.cancel():
            break
    assert future.cancelled() and cancelled[-1] is future
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(1)
    after = producer.send_async(Message(topic, b"after")).result(10)
    assert after.status is SendStatus.SEND_OK
    assert cancelled.count(future) == 1
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_orderly_sends_keep_a_key_on_one_queue(rocketmq_server, producer):
    topic = unique("ordered")
    results = {key: [producer.send_orderly(Message(topic, f"{key}-{i}".encode()), key) for i in range(5)]
               for key in ("order-1", "order-2", "order-3")}
    for key, sent in results.items():
        assert len({r.message_queue for r in sent}) == 1
        assert [r.queue_offset for r in sent] == sorted(r.queue_offset for r in sent)
    got = read_all(rocketmq_server.namesrv_addr, topic, 15)
    for key, sent in results.items():
        queue_id = sent[0].message_queue.queue_id
        assert [m.body for m in sorted(got, key=lambda m: m.queue_offset) if m.queue_id == queue_id
                and m.body.startswith(key.encode())] == [f"{key}-{i}".encode() for i in range(5)]


def test_a_delayed_message_arrives_with_its_level(rocketmq_server, producer):
    topic = unique("delay")
    sent = producer.send(Message(topic, b"later", delay_level=2))
    [msg] = read_all(rocketmq_server.namesrv_addr, topic, 1)
    assert msg.body == b"later" and msg.properties["DELAY"] == "2" and msg.msg_id == sent.msg_id


def test_sends_that_cannot_go_anywhere_fail_clearly(rocketmq_server, producer):
    topic = unique("nowhere")
    producer.send(Message(topic, b"create"))
    with pytest.raises(RocketMQError, match="no master address known for broker 'no-such-broker'"):
        producer.send(Message(topic, b"x"), queue=MessageQueue(topic, "no-such-broker", 0), timeout=2.0)
    with pytest.raises(ValueError, match="max_message_size"):
        producer.send(Message(topic, b"x" * (4 * 1024 * 1024 + 1)))


def test_json_headers_work_as_well_as_binary_ones(rocketmq_server):
    topic = unique("json")
    with Producer("fastmq-json-producer", rocketmq_server.namesrv_addr, serialize_type=SERIALIZE_JSON) as json_producer:
        sent = json_producer.send(Message(topic, b"json headers", tags="J"))
    assert sent.status is SendStatus.SEND_OK
    [msg] = read_all(rocketmq_server.namesrv_addr, topic, 1)
    assert (msg.body, msg.tags, msg.msg_id) == (b"json headers", "J", sent.msg_id)
