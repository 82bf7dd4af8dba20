"""Connection.call_blocking: a client thread borrows the connection for one request and its response (against the
real threaded echo server of conftest.py, and a scripted socket server for answers that come in pieces)."""
from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from fastmq.io import ConnectionClosedError, RequestTimeoutError

from tests.support.sockets import recv_exact
from tests.support.waiting import wait_for

from .conftest import EchoAdapter, make_frame

WAIT = 10.0
_ids = itertools.count(2_000_000)      # far from the ids the loop hands out (0, 1, 2, ...)


def open_descriptors() -> int:
    """This process's descriptors (the servers' sockets included: they run in this process)."""
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(autouse=True)
def no_descriptor_left() -> Iterator[None]:
    before = open_descriptors()
    yield
    wait_for(lambda: open_descriptors() <= before, WAIT, message="descriptors back to where they were")


def call(client: Any, command: bytes, body: bytes = b"", deadline: float = WAIT) -> tuple[int, Any]:
    cid = next(_ids)
    return cid, client.conn.call_blocking(make_frame(cid, command + body), cid, time.monotonic() + deadline)


def test_the_caller_gets_its_answer_and_the_loop_reads_again_after(loop, echo_server, connect):
    client = connect(echo_server.port)
    for i in range(50):
        cid, answer = call(client, b"E", b"own-%d" % i)
        assert answer == struct.pack(">i", cid) + b"Eown-%d" % i
    metrics = client.conn.metrics
    assert metrics.direct_responses == 50 and metrics.responses_received == 0 and metrics.bytes_in == 0
    assert metrics.direct_bytes_in == metrics.direct_bytes_out and client.conn.in_flight_count == 0
    # The loop's EPOLLIN is back on: requests it writes are answered through it.
    assert client.send(b"E", b"loop").result(WAIT)[4:] == b"Eloop"
    assert metrics.responses_received == 1
    client.close()


def test_it_declines_on_the_loop_thread_and_with_another_request_in_flight(loop, echo_server, connect):
    client = connect(echo_server.port)
    assert client.call(call, client, b"E")[1] is None
    held = client.send(b"H", b"held")
    wait_for(lambda: client.conn.in_flight_count == 1, WAIT, message="the held request in flight")
    assert call(client, b"E")[1] is None
    assert client.send(b"F").result(WAIT)[4:] == b"F" and held.result(WAIT)[4:] == b"Hheld"
    client.close()


class ScriptedServer:
    """One connection on 127.0.0.1: each request is answered by the script's list of (delay s, bytes) writes,
    made from the request's correlation id. With receive_buffer the connection's receive buffer is that small, and
    before_reading() is called (from the server's thread) before anything is read."""

    def __init__(self, script: Any, receive_buffer: int | None = None,
                 before_reading: Callable[[], object] | None = None) -> None:
        self.script = script
        self.before_reading = before_reading
        self.sock = socket.socket()
        if receive_buffer is not None:      # set on the listening socket: the accepted one inherits it
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(WAIT)
            try:
                if self.before_reading is not None:
                    self.before_reading()
                while True:
                    size, cid = struct.unpack(">ii", recv_exact(conn, 8))
                    payload = recv_exact(conn, size - 4)
                    for delay, data in self.script(cid, payload):
                        time.sleep(delay)
                        conn.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        self.thread.join(WAIT)


@pytest.mark.parametrize("pause", [0.0, 0.05])
def test_a_frame_the_server_pushes_while_the_caller_waits_goes_to_its_handler(loop, connect, pause):
    # The push and the answer in one write, or the push alone first: either way the push reaches on_unsolicited
    # (through the loop) and the caller its answer.
    server = ScriptedServer(lambda cid, payload: [(0, make_frame(-1, b"pushed")),
                                                   (pause, make_frame(cid, payload[1:]))])
    adapter = EchoAdapter()
    client = connect(server.port, adapter)
    try:
        for i in range(3):
            cid, answer = call(client, b"E", b"asked-%d" % i)
            assert answer == struct.pack(">i", cid) + b"asked-%d" % i
        wait_for(lambda: len(adapter.pushed) == 3, WAIT, message="the pushed frames handled")
        assert adapter.pushed == [b"\xff\xff\xff\xffpushed"] * 3
        assert client.send(b"E", b"after").result(WAIT)[4:] == b"after"   # the loop reads again
    finally:
        client.close()
        server.close()


def test_an_answer_in_pieces_is_read_whole(loop, connect):
    server = ScriptedServer(lambda cid, payload: [(0, make_frame(cid, payload)[:7]), (0.05, make_frame(cid, payload)[7:])])
    client = connect(server.port)
    try:
        cid, answer = call(client, b"E", b"x" * 1000)
        assert answer == struct.pack(">i", cid) + b"E" + b"x" * 1000
        assert client.conn.metrics.direct_responses == 1
    finally:
        client.close()
        server.close()


def test_a_peer_that_never_answers_fails_the_caller_by_its_deadline_and_the_connection_closes(loop, echo_server,
                                                                                           connect):
    client = connect(echo_server.port, request_timeout=60)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        call(client, b"S", deadline=0.3)
    assert time.monotonic() - started < WAIT
    assert isinstance(client.closed.result(WAIT), RequestTimeoutError)
    assert client.conn.metrics.request_timeouts == 1


@pytest.mark.parametrize("command, body", [
    (b"C", b""),                        # the server closes
    (b"G", b"\x00\x00\x00\x02ab"),      # garbage: a frame too short for a correlation id
    (b"G", b"\xff\xff\xff\xfeab"),      # garbage: a frame header the splitter refuses
    (b"X", b""),                        # an answer to no pending request
])
def test_a_broken_answer_fails_the_caller_and_closes_the_connection(loop, echo_server, connect, command, body):
    client = connect(echo_server.port, request_timeout=60)
    with pytest.raises(ConnectionClosedError):
        call(client, command, body)
    assert isinstance(client.closed.result(WAIT), ConnectionClosedError)


def test_closing_the_connection_wakes_a_caller_waiting_for_its_answer(loop, echo_server, connect):
    client = connect(echo_server.port, request_timeout=60)
    outcome: list[BaseException] = []

    def waiting_caller() -> None:
        try:
            call(client, b"S", deadline=60)
        except ConnectionClosedError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=waiting_caller)
    caller.start()
    wait_for(lambda: echo_server.requests and echo_server.requests[-1][4:5] == b"S", WAIT,
             message="the request arrived")
    client.close()
    caller.join(WAIT)
    assert not caller.is_alive() and len(outcome) == 1


def test_what_the_socket_does_not_take_is_written_by_the_loop_and_answered_through_it(loop, connect):
    # The server reads nothing until the caller has handed the rest of its request to the loop, and both buffers
    # are small: the socket cannot take 256 KiB at once, however fast the machine (a server reading at once could
    # drain it as fast as the caller wrote, and nothing was handed over).
    clients: list[Any] = []
    server = ScriptedServer(lambda cid, payload: [(0, make_frame(cid, payload))], receive_buffer=4096,
                            before_reading=lambda: wait_for(
                                lambda: clients and clients[0].conn.metrics.direct_bytes_out > 0, WAIT,
                                message="the caller handed the rest of its request to the loop"))
    options = ((socket.SOL_SOCKET, socket.SO_SNDBUF, 4096), (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1))
    client = connect(server.port, socket_options=options)
    clients.append(client)
    body = bytes(range(256)) * 1024
    try:
        cid, answer = call(client, b"E", body)
        assert answer == struct.pack(">i", cid) + b"E" + body
        metrics = client.conn.metrics
        assert 0 < metrics.direct_bytes_out < len(body) and metrics.bytes_out > 0 and metrics.responses_received == 1
        assert client.conn.pending_output == 0 and client.conn.in_flight_count == 0
    finally:
        client.close()
        server.close()


def test_many_threads_calling_at_once_get_their_own_answers(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=10_000)
    failures: list[str] = []

    def caller(thread: int) -> None:
        for i in range(200):
            body = b"%d-%d-" % (thread, i) + b"y" * (i * 53 % 2000)
            cid, answer = call(client, b"E", body)
            if answer is None:      # lent to another thread: through the loop
                answer = struct.pack(">i", cid) + client.send(b"E", body, correlation_id=cid).result(WAIT)[4:]
            if answer != struct.pack(">i", cid) + b"E" + body:
                failures.append(f"{thread}-{i}")

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert not failures and not any(thread.is_alive() for thread in threads)
    metrics = client.conn.metrics
    assert metrics.direct_responses + metrics.responses_received == 800 and metrics.direct_responses > 0
    client.close()
