"""Frames that answer no request: server push, a client's on_push callback, a client answering a request its
server sent, and handshake steps. Framing: [size i32][id i32][command u8][body]; id -1 marks a pushed frame.
"""
from __future__ import annotations

import functools
import struct
import threading

import pytest

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import ProtocolError
from fastmq.io import Connection, ConnectionClosedError, ConnectionPool, Listener, NotReadyError, ServerHandler
from fastmq.io.adapter import HandshakeStep, ProtocolAdapter

from .conftest import make_frame

WAIT = 10.0
PUSHED = -1


class Adapter(ProtocolAdapter):
    """The base adapter's own routing: frames with id -1 go to on_push (no on_unsolicited override)."""

    def make_splitter(self) -> KafkaFrameSplitter:
        return KafkaFrameSplitter(max_frame_size=1 << 20)

    def correlation_id(self, frame: bytes) -> int | None:
        if len(frame) < 5:
            raise ProtocolError(f"a {len(frame)}-byte frame has no id and command")
        value = int.from_bytes(frame[:4], "big", signed=True)
        return None if value == PUSHED else value


class PushingHandler(ServerHandler):
    """E echoes; H holds its answer until released; M (a greeting) and A (the client's answers to requests we
    sent) get no reply."""

    def __init__(self) -> None:
        self.conns: list = []
        self.held: list = []
        self.answers: list[bytes] = []
        self.answered = threading.Event()
        self.commands: list[bytes] = []

    def connection_made(self, conn) -> None:
        self.conns.append(conn)

    def frame_received(self, conn, frame, reply) -> None:
        command = frame[4:5]
        self.commands.append(command)
        if command == b"M":                       # a greeting: nothing to answer
            reply(None)
        elif command == b"A":                     # the client's answer to a request we sent: no reply
            self.answers.append(frame)
            self.answered.set()
            reply(None)
        elif command == b"H":
            self.held.append((frame, reply))
        else:
            reply([struct.pack(">i", len(frame)), frame])


@pytest.fixture
def server(loop):
    handler = PushingHandler()
    listener = Listener(loop, functools.partial(KafkaFrameSplitter, max_frame_size=1 << 20), handler)
    yield listener, handler
    listener.close()


def collect_pushes(client) -> list:
    pushed: list = []
    arrived = threading.Event()

    def on_push(conn, frame) -> None:
        pushed.append(frame)
        arrived.set()

    client.call(setattr, client.conn, "on_push", on_push)
    return pushed, arrived


def test_a_push_from_another_thread_does_not_wait_behind_unanswered_requests(loop, server, connect):
    listener, handler = server
    client = connect(listener.address[1], Adapter())
    pushed, arrived = collect_pushes(client)
    held = client.send(b"H", b"held")
    (server_conn,) = handler.conns
    for _ in range(1000):                         # bounded wait until the server holds the request
        if handler.held:
            break
        threading.Event().wait(0.005)
    loop.call_soon_threadsafe(server_conn.send_frame, make_frame(PUSHED, b"Pnews"))
    assert arrived.wait(WAIT)
    assert pushed == [struct.pack(">i", PUSHED) + b"Pnews"] and not held.done()
    frame, reply = handler.held[0]
    reply([struct.pack(">i", len(frame)), frame])
    assert held.result(WAIT)[4:] == b"Hheld"


def test_the_client_answers_a_request_its_server_sent(loop, server, connect):
    listener, handler = server
    client = connect(listener.address[1], Adapter())

    def answer(conn, frame) -> None:
        # The server's request (command Q) is answered on the same connection, outside max_in_flight.
        conn.send_frame(make_frame(int.from_bytes(frame[5:9], "big"), b"A" + frame[9:].upper()))

    client.call(setattr, client.conn, "on_push", answer)
    (server_conn,) = handler.conns
    loop.run_in_loop(server_conn.send_frame, make_frame(PUSHED, b"Q" + struct.pack(">i", 42) + b"state?"),
                     timeout=WAIT)
    assert handler.answered.wait(WAIT)
    assert handler.answers == [struct.pack(">i", 42) + b"ASTATE?"]
    assert client.send(b"E", b"after").result(WAIT)[4:] == b"Eafter"   # the reply order is intact


def test_a_pushed_frame_without_on_push_is_a_protocol_error(loop, server, connect):
    listener, handler = server
    client = connect(listener.address[1], Adapter())
    (server_conn,) = handler.conns
    loop.run_in_loop(server_conn.send_frame, make_frame(PUSHED, b"Pnobody listens"), timeout=WAIT)
    error = client.closed.result(WAIT)
    assert isinstance(error, ConnectionClosedError) and isinstance(error.__cause__, ProtocolError)
    assert "answers no request" in str(error)


def test_send_frame_refuses_unconnected_and_closed_streams(loop, server, connect):
    listener, _ = server
    client = connect(listener.address[1], Adapter(), wait=False)
    client.ready.result(WAIT)
    client.close()
    with pytest.raises(ConnectionClosedError):
        client.call(client.conn.send_frame, b"late")
    unconnected = Connection(loop, "127.0.0.1", listener.address[1], Adapter())   # connect() not called
    with pytest.raises(NotReadyError, match="not connected"):
        loop.run_in_loop(unconnected.send_frame, b"early", timeout=WAIT)


def test_a_pool_hands_every_connection_its_push_callback(loop, echo_server):
    pushed: list = []
    arrived = threading.Event()

    def on_push(conn, frame) -> None:
        pushed.append((conn.node_id, frame))
        arrived.set()

    pool = ConnectionPool(loop, Adapter, on_push=on_push)
    answered: list = []
    try:
        loop.run_in_loop(pool.add_node, "n1", "127.0.0.1", echo_server.port, timeout=WAIT)
        ready = threading.Event()
        loop.run_in_loop(pool.add_listener, lambda node, is_ready, error: is_ready and ready.set(), timeout=WAIT)
        loop.run_in_loop(pool.maybe_connect, "n1", timeout=WAIT)
        assert ready.wait(WAIT)
        loop.run_in_loop(pool.send, "n1", make_frame(3, b"Ux"), lambda frame, error: answered.append(frame), 3,
                         timeout=WAIT)
        assert arrived.wait(WAIT)
        assert pushed == [("n1", struct.pack(">i", PUSHED) + b"pushed")]
    finally:
        loop.run_in_loop(pool.close, timeout=WAIT)


# ---- handshake steps -------------------------------------------------------------------------------------------

class Greeting(HandshakeStep):
    """Sends a frame that gets no answer (like magic bytes) and is done at once."""

    def start(self, conn, done) -> None:
        conn.handshake_request(make_frame(0, b"Mmagic"), expect_response=False)
        done()


class Identify(HandshakeStep):
    """One request/answer exchange; a refusal closes the connection."""

    def __init__(self, log: list, refuse: bool = False) -> None:
        self.log, self.refuse = log, refuse

    def start(self, conn, done) -> None:
        def answered(response, error) -> None:
            if error is not None:
                return
            self.log.append(response)
            if self.refuse:
                conn.close(ConnectionRefusedByTest("identify refused"))
            else:
                done()

        cid = conn.next_correlation_id()
        conn.handshake_request(make_frame(cid, b"Iname"), answered, cid)


class ConnectionRefusedByTest(Exception):
    pass


class SteppingAdapter(Adapter):
    def __init__(self, steps) -> None:
        self.steps = steps

    def handshake_steps(self):
        return self.steps


def test_handshake_steps_run_in_order_before_the_connection_is_ready(loop, server, connect):
    listener, handler = server
    log: list = []
    ready_at: list = []
    adapter = SteppingAdapter([Greeting(), Identify(log)])
    client = connect(listener.address[1], adapter, wait=False)
    client.ready.add_done_callback(lambda _: ready_at.append(len(log)))
    client.ready.result(WAIT)
    assert ready_at == [1] and log[0][4:] == b"Iname"          # ready only after the identify answer
    assert handler.commands == [b"M", b"I"]
    assert client.send(b"E", b"x").result(WAIT)[4:] == b"Ex"


def test_a_failing_handshake_step_fails_the_connection(loop, server, connect):
    listener, _ = server
    log: list = []
    client = connect(listener.address[1], SteppingAdapter([Identify(log, refuse=True), Greeting()]), wait=False)
    with pytest.raises(ConnectionRefusedByTest):
        client.ready.result(WAIT)
    assert len(log) == 1
