"""Listener and ServerConnection, driven by plain blocking client sockets and by fastmq's own Connection."""
from __future__ import annotations

import functools
import random
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import FrameTooLargeError, ProtocolError
from fastmq.io import ConnectionClosedError, IdleConnectionClosedError, Listener, ServerHandler
from tests.support.sockets import recv_exact
from tests.support.waiting import WAIT, wait_for


class EchoHandler(ServerHandler):
    """Answers each frame with itself, re-framed; 'P' frames are a protocol error, 'B' a handler bug."""

    def __init__(self) -> None:
        self.made: list = []
        self.lost: list = []
        self.frames = 0

    def connection_made(self, conn) -> None:
        self.made.append(conn)

    def frame_received(self, conn, frame, reply) -> None:
        self.frames += 1
        if frame[4:5] == b"P":
            raise ProtocolError("the test client sent a forbidden request")
        if frame[4:5] == b"B":
            raise ValueError("bug in the handler")
        reply([struct.pack(">i", len(frame)), frame])

    def connection_lost(self, conn, error) -> None:
        self.lost.append((conn, error))


class BlockingClient:
    """A plain blocking socket speaking the test framing."""

    def __init__(self, address) -> None:
        self.sock = socket.create_connection(address, timeout=WAIT)
        self.next_id = 0

    def send(self, command: bytes, body: bytes = b"") -> int:
        cid = self.next_id
        self.next_id += 1
        payload = struct.pack(">i", cid) + command + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return cid

    def receive(self) -> bytes:
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        return recv_exact(self.sock, size)

    def is_closed_by_server(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listen(loop):
    listeners = []

    def _listen(handler=None, **options) -> Listener:
        listener = Listener(loop, functools.partial(KafkaFrameSplitter, max_frame_size=1 << 20),
                            handler if handler is not None else EchoHandler(), **options)
        listeners.append(listener)
        return listener

    yield _listen
    for listener in listeners:
        listener.close()


def test_accepts_many_clients_and_answers_pipelined_requests_in_order(loop, listen):
    handler = EchoHandler()
    listener = listen(handler)
    clients = [BlockingClient(listener.address) for _ in range(40)]
    for index, client in enumerate(clients):
        for i in range(10):
            client.send(b"E", b"%d-%d" % (index, i))
    for index, client in enumerate(clients):
        for i in range(10):
            response = client.receive()
            assert struct.unpack(">i", response[:4])[0] == i
            assert response[4:] == b"E%d-%d" % (index, i)
    assert wait_for(lambda: len(handler.made) == 40)
    assert len(listener.connections) == 40
    for client in clients:
        client.close()
    assert wait_for(lambda: len(handler.lost) == 40 and not listener.connections)


def test_a_client_sending_garbage_is_closed_while_the_others_continue(loop, listen):
    handler = EchoHandler()
    listener = listen(handler)
    good = BlockingClient(listener.address)
    bad = BlockingClient(listener.address)
    good.send(b"E", b"before")
    assert good.receive()[4:] == b"Ebefore"
    bad.sock.sendall(b"\x7f\xff\xff\xff not a frame")
    assert bad.is_closed_by_server()
    assert wait_for(lambda: len(handler.lost) == 1)
    error = handler.lost[0][1]
    assert isinstance(error, ConnectionClosedError) and isinstance(error.__cause__, FrameTooLargeError)
    good.send(b"E", b"after")
    assert good.receive()[4:] == b"Eafter"


def test_protocol_error_or_bug_in_the_handler_closes_only_that_connection(loop, listen, caplog):
    handler = EchoHandler()
    listener = listen(handler)
    good = BlockingClient(listener.address)
    for command in (b"P", b"B"):
        bad = BlockingClient(listener.address)
        bad.send(command)
        assert bad.is_closed_by_server()
        good.send(b"E", command)
        assert good.receive()[4:] == b"E" + command
    assert "bug in the handler" in caplog.text


def test_handler_answering_from_other_threads_out_of_order(loop, listen):
    rng = random.Random(5)

    class DelayedHandler(ServerHandler):
        def frame_received(self, conn, frame, reply):
            delay = rng.uniform(0, 0.03)  # later requests often finish first
            threading.Timer(delay, reply, args=(struct.pack(">i", len(frame)) + frame,)).start()

    listener = listen(DelayedHandler())
    client = BlockingClient(listener.address)
    for i in range(40):
        client.send(b"E", b"%d" % i)
    for i in range(40):
        response = client.receive()
        assert struct.unpack(">i", response[:4])[0] == i and response[5:] == b"%d" % i


def test_reply_none_sends_nothing_and_a_second_reply_is_refused(loop, listen):
    errors = []

    class SelectiveHandler(ServerHandler):
        def frame_received(self, conn, frame, reply):
            if frame[4:5] == b"N":
                reply(None)  # no response, like Kafka's acks=0 produce
                try:
                    reply(b"again")
                except RuntimeError as exc:
                    errors.append(exc)
            else:
                reply.send(struct.pack(">i", len(frame)) + frame)

    listener = listen(SelectiveHandler())
    client = BlockingClient(listener.address)
    client.send(b"N")
    client.send(b"E", b"x")
    response = client.receive()
    assert struct.unpack(">i", response[:4])[0] == 1 and response[4:] == b"Ex"
    assert len(errors) == 1


def test_connection_limit_rejects_extra_clients(loop, listen):
    listener = listen(max_connections=3)
    clients = [BlockingClient(listener.address) for _ in range(3)]
    for client in clients:
        client.send(b"E")
        client.receive()
    extra = BlockingClient(listener.address)
    assert extra.is_closed_by_server()
    assert listener.metrics.connections_rejected == 1
    clients[0].close()
    assert wait_for(lambda: len(listener.connections) == 2)
    again = BlockingClient(listener.address)
    again.send(b"E", b"room again")
    assert again.receive()[4:] == b"Eroom again"


def test_unanswered_requests_pause_reading_until_answered(loop, listen):
    replies = []
    seen = []

    class HoldingHandler(ServerHandler):
        def frame_received(self, conn, frame, reply):
            seen.append(frame)
            replies.append((reply, struct.pack(">i", len(frame)) + frame))

    listener = listen(HoldingHandler(), max_pending_replies=2)
    client = BlockingClient(listener.address)
    for i in range(6):
        client.send(b"E", b"%d" % i)
    assert wait_for(lambda: len(seen) == 2)
    time.sleep(0.1)  # no more frames may arrive however long one waits
    assert len(seen) == 2  # the other four wait in the socket and the splitter
    for _ in range(3):
        reply, data = replies.pop(0)
        reply(data)
        assert wait_for(lambda: len(seen) >= 3)
    assert wait_for(lambda: len(seen) == 5)
    while len(seen) < 6 or replies:
        assert wait_for(lambda: replies)
        reply, data = replies.pop(0)
        reply(data)
    for i in range(6):
        assert client.receive()[4:] == b"E%d" % i


def test_listener_close_closes_its_connections(loop, listen):
    handler = EchoHandler()
    listener = listen(handler)
    client = BlockingClient(listener.address)
    client.send(b"E")
    client.receive()
    listener.close()
    assert client.is_closed_by_server()
    assert listener.closed and not listener.connections
    assert len(handler.lost) == 1
    with pytest.raises(OSError):
        socket.create_connection(listener.address, timeout=1)


def test_idle_server_connections_are_closed(loop, listen):
    handler = EchoHandler()
    listener = listen(handler, connections_max_idle_ms=400)
    quiet = BlockingClient(listener.address)
    busy = BlockingClient(listener.address)
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        busy.send(b"E")
        busy.receive()
        time.sleep(0.04)  # the traffic pattern under test: busy, never idle 400 ms
    assert quiet.is_closed_by_server()
    assert any(isinstance(error, IdleConnectionClosedError) for _, error in handler.lost)
    busy.send(b"E", b"alive")
    assert busy.receive()[4:] == b"Ealive"


def test_fastmq_client_against_fastmq_server(loop, listen, connect):
    listener = listen()
    client = connect(listener.address[1], max_in_flight=100)
    futures = [client.send(b"E", b"%d" % i) for i in range(100)]
    for i, future in enumerate(futures):
        assert future.result(WAIT)[5:] == b"%d" % i


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(
    st.binary(min_size=1, max_size=600),
    # well-framed random payloads reach the handler too
    st.lists(st.binary(max_size=100), min_size=1, max_size=5).map(
        lambda payloads: b"".join(struct.pack(">i", len(p)) + p for p in payloads))))
def test_random_bytes_from_clients_never_break_the_server(loop, listen, data):
    listener = listen()
    fuzzer = socket.create_connection(listener.address, timeout=WAIT)
    try:
        fuzzer.sendall(data)
    except OSError:
        pass
    fuzzer.close()
    probe = BlockingClient(listener.address)
    probe.send(b"E", b"probe")
    assert probe.receive()[4:] == b"Eprobe"
    probe.close()
    listener.close()
    assert wait_for(lambda: not listener.connections)


class AnswerAtOnceHandler(ServerHandler):
    """Answers each frame with send_answer (answers matched by id, as RocketMQ's) and notes the output still queued
    right after it."""

    def __init__(self) -> None:
        self.queued_after: list[int] = []

    def frame_received(self, conn, frame, reply) -> None:
        reply(None)
        conn.send_answer([struct.pack(">i", len(frame)), frame])
        self.queued_after.append(conn.pending_output)


def test_send_answer_writes_at_once_unless_another_request_is_buffered(loop, listen):
    handler = AnswerAtOnceHandler()
    listener = listen(handler)
    client = BlockingClient(listener.address)
    try:
        client.send(b"E", b"alone")
        assert client.receive()[4:] == b"Ealone"
        # written in the handler, not at the loop's next turn (noted just after the client may have read it)
        assert wait_for(lambda: handler.queued_after == [0])
        # two requests in one segment: the first answer waits for the second, and both leave in one write
        frames = b"".join(struct.pack(">ii", 4 + len(body), i) + body for i, body in ((1, b"Ea"), (2, b"Eb")))
        client.sock.sendall(frames)
        assert [client.receive()[4:] for _ in range(2)] == [b"Ea", b"Eb"]
        assert wait_for(lambda: handler.queued_after[1:] == [10, 0])
    finally:
        client.close()
