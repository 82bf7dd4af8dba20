"""Oneway sends. Paced by the broker (fastmq/rocketmq/oneway_pace.py): a burst larger than Apache's send queue
(10000 requests) is stored whole, by Apache's broker and by the embedded one; a broker killed mid-burst fails no
call, and the producer's oneway sends are stored again once it is back. A broker's answer to a oneway request
(Apache's send-queue cleaner answers the requests it drops, [TIMEOUT_CLEAN_QUEUE] SYSTEM_BUSY, oneway or not) is
counted, not taken for a broken stream."""
from __future__ import annotations

import logging
import socket
import threading
from concurrent.futures import Future

import pytest

from fastmq._native.frames import RocketMQFrameSplitter
from fastmq.broker.process import BrokerProcess
from fastmq.rocketmq import Message, MessageQueue, Producer, SendFailedError, SendStatus
from fastmq.rocketmq.oneway_pace import SLOW_ANSWER, OnewayPace
from fastmq.rocketmq._native.remoting import FLAG_ONEWAY, FLAG_RESPONSE, decode_command, encode_frame
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.route import TopicRoute
from tests.support.servers import port_below_ephemeral_range
from tests.support.rocketmq import call, unique
from tests.support.waiting import wait_for

QUEUES = 4              # what both brokers give an auto-created topic here
APACHE_BURST = 25_000   # more than Apache's send queue holds (sendThreadPoolQueueCapacity 10000)
EMBEDDED_BURST = 12_000

CLEANED = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 201ms, size of queue: 9"


class CleaningBroker:
    """A broker address that answers every oneway request as Apache's BrokerFastFailure answers one it took out of
    its send queue (SYSTEM_BUSY with the request's opaque), and every other request SUCCESS."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.oneway_received = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn = self.sock.accept()[0]        # until close() shuts the listening socket down
            except OSError:
                return
            self.connections += 1
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        splitter = RocketMQFrameSplitter()
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            splitter.feed(data)
            while (frame := splitter.next_frame()) is not None:
                request = decode_command(frame)
                if request.flag & FLAG_ONEWAY:
                    self.oneway_received += 1
                    answer = encode_frame(ResponseCode.SYSTEM_BUSY, request.opaque, None, None, FLAG_RESPONSE,
                                          remark=CLEANED)
                else:
                    answer = encode_frame(ResponseCode.SUCCESS, request.opaque, {
                        "msgId": "00", "queueId": request.ext_fields.get("queueId", 0), "queueOffset": 7},
                        None, FLAG_RESPONSE)
                conn.sendall(answer)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)        # wakes the accept(); the client closed its connection
        self.sock.close()
        self._thread.join(30)


@pytest.fixture
def cleaning_broker():
    broker = CleaningBroker()
    yield broker
    broker.close()


def test_answers_to_oneway_requests_are_counted_and_the_connection_goes_on(rocketmq_server, cleaning_broker, caplog):
    topic = unique("cleaned")
    queue = MessageQueue(topic, "cleaning-broker", 0)
    with Producer(unique("cleaned"), rocketmq_server.namesrv_addr, send_timeout=10.0) as producer:
        producer.instance.routes[topic] = TopicRoute(topic, {"cleaning-broker": {0: cleaning_broker.address}}, [queue])
        with caplog.at_level(logging.WARNING, logger="fastmq.rocketmq.remoting"):
            for i in range(20):
                producer.send_oneway(Message(topic, b"%d" % i), queue=queue)
            result = producer.send(Message(topic, b"after"), queue=queue)
            wait_for(lambda: producer.remoting.oneway_refused == 20, timeout=30,
                     message=lambda: f"{producer.remoting.oneway_refused} refusals counted")
        assert result.status is SendStatus.SEND_OK and result.queue_offset == 7
        assert cleaning_broker.oneway_received == 20 and cleaning_broker.connections == 1
        said = [r.getMessage() for r in caplog.records if "answered a oneway request" in r.getMessage()]
        assert len(said) == 1 and "TIMEOUT_CLEAN_QUEUE" in said[0]


def test_every_nth_oneway_send_confirms_and_a_full_window_waits_for_an_answer():
    now = [0.0]                               # the pace's clock: answers come at once unless it is moved
    pace = OnewayPace(confirm_every=3, window=2, clock=lambda: now[0])
    first = [pace.confirmation("a:1", 30.0) for _ in range(3)]
    assert [c is not None for c in first] == [False, False, True]
    assert pace.window_of("a:1") == 1         # a new address starts with one confirmation in flight
    assert pace.confirmation("b:1", 30.0) is None            # each address has its own count
    assert pace.unanswered("a:1") == 1 and pace.unanswered("b:1") == 0
    first[2](done())                        # answered at once: the window grows to two
    confirmations = [pace.confirmation("a:1", 30.0) for _ in range(6)]
    assert [c is not None for c in confirmations] == [False, False, True] * 2
    assert pace.window_of("a:1") == 2 and pace.unanswered("a:1") == 2
    started = threading.Event()
    third: list = []

    def next_confirmation() -> None:
        started.set()
        third.append([pace.confirmation("a:1", 30.0) for _ in range(3)][-1])

    waiter = threading.Thread(target=next_confirmation)
    waiter.start()
    started.wait(10)
    waiter.join(0.2)
    assert waiter.is_alive() and not third                  # two unanswered: the third waits
    confirmations[2](done())                                # an answer (the send's done Future)
    waiter.join(10)
    assert third and third[0] is not None and pace.unanswered("a:1") == 2
    # A window that stays full holds a call only until its deadline, then the confirmation goes anyway.
    now[0] = 31.0
    assert [pace.confirmation("a:1", 30.0) for _ in range(3)][-1] is not None
    assert pace.unanswered("a:1") == 3
    with pytest.raises(ValueError):
        OnewayPace(confirm_every=0)


def done(error: BaseException | None = None) -> Future:
    """A send's Future, done: answered, or failed with error."""
    future: Future = Future()
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
    return future


def test_a_slow_answer_halves_the_window_and_quick_ones_grow_it_back():
    now = [0.0]
    pace = OnewayPace(confirm_every=1, window=4, clock=lambda: now[0])
    for _ in range(3):                      # answered at once: from one to the full window
        pace.confirmation("a:1", 1.0)(done())
    assert pace.window_of("a:1") == 4
    confirmations = [pace.confirmation("a:1", 1.0) for _ in range(4)]
    now[0] = SLOW_ANSWER * 2                # the broker's queue held them longer than SLOW_ANSWER
    confirmations[0](done(SendFailedError("lost", None)))       # no answer: a lost connection teaches nothing
    assert pace.window_of("a:1") == 4 and pace.unanswered("a:1") == 3
    confirmations[1](done(SendFailedError("busy", ResponseCode.SYSTEM_BUSY)))     # the broker's answer, late
    assert pace.window_of("a:1") == 2
    for confirmed in confirmations[2:]:
        confirmed(done())
    assert pace.window_of("a:1") == 1 and pace.unanswered("a:1") == 0     # halved down to one, never none
    for _ in range(5):                      # answered at once: one more a time, up to the window
        pace.confirmation("a:1", now[0] + 1)(done())
    assert pace.window_of("a:1") == 4

def stored(broker: str, topic: str) -> int:
    """The messages of topic the broker stored: the sum of its queues' max offsets."""
    return sum(int(call(broker, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue})
                   .ext_fields.get("offset", 0)) for queue in range(QUEUES))


def burst_is_stored_whole(producer: Producer, broker: str, topic: str, count: int) -> None:
    producer.send(Message(topic, b"first"))            # the topic, created from the default one
    for i in range(count):
        producer.send_oneway(Message(topic, b"oneway-%d" % i))
    # Its ConsumeQueues are written after the CommitLog: the count may lag the last send a little.
    wait_for(lambda: stored(broker, topic) >= count + 1, timeout=60,
             message=lambda: f"the broker stored {stored(broker, topic)} of {count + 1} messages")
    assert stored(broker, topic) == count + 1
    assert producer.remoting.oneway_refused == 0


def test_a_oneway_burst_larger_than_apaches_send_queue_is_stored_whole(rocketmq_server, producer):
    burst_is_stored_whole(producer, rocketmq_server.broker_addr, unique("oneway-burst"), APACHE_BURST)


@pytest.fixture(scope="module")
def embedded_rocketmq(tmp_path_factory):
    """The embedded broker in a process of its own (killed and started again by the last test): its
    (namesrv address, broker address, BrokerProcess). Ports below the ephemeral range, as tests/broker/rocketmq/
    test_faults.py explains."""
    broker_port, namesrv_port, kafka_port = (port_below_ephemeral_range() for _ in range(3))
    process = BrokerProcess(tmp_path_factory.mktemp("oneway-embedded") / "data", port=kafka_port,
                            args=["--rocketmq", f"127.0.0.1:{broker_port}", "--namesrv", f"127.0.0.1:{namesrv_port}"])
    process.start()
    try:
        yield f"127.0.0.1:{namesrv_port}", f"127.0.0.1:{broker_port}", process
    finally:
        process.close()


def test_a_oneway_burst_is_stored_whole_by_the_embedded_broker(embedded_rocketmq):
    namesrv, broker, _ = embedded_rocketmq
    with Producer(unique("oneway-embedded"), namesrv, send_timeout=10.0) as producer:
        burst_is_stored_whole(producer, broker, unique("oneway-burst"), EMBEDDED_BURST)


def test_a_broker_killed_mid_burst_fails_no_call_and_stores_again_once_back(embedded_rocketmq):
    namesrv, broker, process = embedded_rocketmq
    topic = unique("oneway-killed")
    with Producer(unique("oneway-killed"), namesrv, send_timeout=2.0) as producer:
        producer.send(Message(topic, b"first"))
        killed = threading.Event()
        for i in range(20_000):                 # every call returns None, before, during and after the kill
            assert producer.send_oneway(Message(topic, b"before-%d" % i)) is None
            if i == 2000:
                process.kill()
                killed.set()
            if killed.is_set() and i >= 4000:
                break
        process.start()
        # Back: the producer finds it again (its connection and the routes of the restarted namesrv).
        wait_for(lambda: sent_synchronously(producer, topic), timeout=60, message="the broker did not come back")
        wait_for(lambda: producer.remoting.pending.used == 0, timeout=30, message="sends still pending")
        before = stored(broker, topic)
        for i in range(EMBEDDED_BURST // 2):
            assert producer.send_oneway(Message(topic, b"after-%d" % i)) is None
        wait_for(lambda: stored(broker, topic) >= before + EMBEDDED_BURST // 2, timeout=60,
                 message=lambda: f"stored {stored(broker, topic) - before} of {EMBEDDED_BURST // 2} after the restart")
        assert stored(broker, topic) == before + EMBEDDED_BURST // 2


def sent_synchronously(producer: Producer, topic: str) -> bool:
    try:
        return producer.send(Message(topic, b"back")).status is SendStatus.SEND_OK
    except Exception:
        return False
