"""Connection.request_now: a client thread writes its own request when the connection has nothing queued (against
the real threaded echo server of conftest.py)."""
from __future__ import annotations

import itertools
import os
import socket
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from fastmq.io import ConnectionClosedError, ConnectionState, RequestTimeoutError

from tests.support.waiting import wait_for

from .conftest import EchoAdapter, future_callback

WAIT = 10.0
_ids = itertools.count(1_000_000)      # far from the ids the loop hands out (0, 1, 2, ...)


def send_now(client: Any, frame: Any, command: bytes, body: bytes = b"", **options: Any) -> tuple[bool, Future]:
    cid = next(_ids)
    future, callback = future_callback()
    return client.conn.request_now(frame(cid, command + body), callback, cid, **options), future


def test_an_idle_connection_is_written_by_the_calling_thread(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    for i in range(50):
        taken, future = send_now(client, frame, b"E", b"now-%d" % i)
        assert taken
        assert future.result(WAIT)[4:] == b"Enow-%d" % i
    metrics = client.conn.metrics
    # Counted apart from the loop's requests; every byte went out from this thread.
    assert metrics.direct_requests == 50 and metrics.requests_sent == 0
    assert metrics.direct_bytes_out == metrics.bytes_in and metrics.bytes_out == 0
    assert client.conn.in_flight_count == 0


def test_it_declines_when_output_is_queued_or_the_id_is_in_flight(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    cid = next(_ids)
    held, callback = future_callback()
    assert client.conn.request_now(frame(cid, b"H"), callback, cid)
    # The same id again: declined, the first request untouched.
    assert not client.conn.request_now(frame(cid, b"E"), callback, cid)

    def queue_then_try() -> bool:
        # On the loop thread, between queueing and the iteration's flush: output is queued.
        queued, tried = next(_ids), next(_ids)
        client.conn.request(frame(queued, b"E"), None, queued)
        return client.conn.request_now(frame(tried, b"E"), None, tried)

    assert not client.call(queue_then_try)
    assert client.send(b"F").result(WAIT)[4:] == b"F"
    assert held.result(WAIT)[4:] == b"H"


def test_it_declines_a_request_in_parts(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    cid = next(_ids)
    whole = frame(cid, b"Eparts")
    assert not client.conn.request_now([whole[:5], whole[5:]], None, cid)
    assert client.conn.in_flight_count == 0


def test_it_declines_once_the_connection_is_closed(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    client.close()
    taken, future = send_now(client, frame, b"E")
    assert not taken and not future.done()


def test_what_the_socket_does_not_take_is_written_by_the_loop(loop, echo_server, connect, frame):
    options = ((socket.SOL_SOCKET, socket.SO_SNDBUF, 4096), (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1))
    client = connect(echo_server.port, socket_options=options)
    body = bytes(range(256)) * 1024  # 256 KiB: far more than the send buffer takes at once
    taken, future = send_now(client, frame, b"E", body)
    assert taken
    assert future.result(WAIT)[4:] == b"E" + body
    metrics = client.conn.metrics
    assert 0 < metrics.direct_bytes_out < len(body) and metrics.bytes_out > 0
    assert metrics.direct_bytes_out + metrics.bytes_out == len(body) + 9
    assert client.conn.pending_output == 0


def test_a_request_written_by_a_caller_times_out_like_any_other(loop, echo_server, connect, frame):
    client = connect(echo_server.port, request_timeout=60)
    taken, silent = send_now(client, frame, b"S", timeout=0.2)
    assert taken
    with pytest.raises(RequestTimeoutError):
        silent.result(WAIT)
    assert isinstance(client.closed.result(WAIT), RequestTimeoutError)


def test_callers_and_the_loop_writing_at_once_keep_every_frame_whole(loop, echo_server, connect, frame):
    client = connect(echo_server.port, max_in_flight=10_000)
    results: dict[int, tuple[bytes, Future]] = {}
    lock = threading.Lock()

    def caller(thread: int) -> None:
        for i in range(300):
            cid = next(_ids)
            body = b"%d-%d-" % (thread, i) + b"x" * (i * 37 % 3000)
            future, callback = future_callback()
            with lock:
                results[cid] = (body, future)
            if not client.conn.request_now(frame(cid, b"E" + body), callback, cid):
                client.call(client.conn.request, frame(cid, b"E" + body), callback, cid)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert len(results) == 1200
    for cid, (body, future) in results.items():
        response = future.result(WAIT)
        assert int.from_bytes(response[:4], "big") == cid and response[4:] == b"E" + body
    metrics = client.conn.metrics
    assert metrics.direct_requests + metrics.requests_sent == 1200 and metrics.direct_requests > 0


def test_a_close_racing_callers_fails_or_answers_every_request(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    futures: list[Future] = []
    stop = threading.Event()

    def caller() -> None:
        for _ in range(20_000):
            if stop.is_set():
                return
            taken, future = send_now(client, frame, b"E")
            if taken:
                futures.append(future)
            elif client.conn.state is ConnectionState.CLOSED:
                return

    thread = threading.Thread(target=caller)
    thread.start()
    while len(futures) < 200 and thread.is_alive():
        threading.Event().wait(0.001)
    client.close()
    stop.set()
    thread.join(WAIT)
    assert futures
    for future in futures:
        try:
            future.result(WAIT)
        except ConnectionClosedError:
            pass


# ---- read_response: the calling thread reads its own answer when nothing else is in flight ----------------------

def read_now(client: Any, frame: Any, command: bytes, body: bytes = b"", **options: Any) -> tuple[bool, Future, list]:
    """request_now(read_response=True); also the names of the threads the callback ran on."""
    cid = next(_ids)
    future, complete = future_callback()
    ran_on: list[str] = []

    def callback(response: Any, error: BaseException | None) -> None:
        ran_on.append(threading.current_thread().name)
        complete(response, error)

    taken = client.conn.request_now(frame(cid, command + body), callback, cid, read_response=True, **options)
    return taken, future, ran_on


def open_descriptors() -> int:
    """This process's descriptors (the echo server's sockets included: it runs in this process)."""
    return len(os.listdir("/proc/self/fd"))


def test_the_caller_reads_its_own_answer_and_the_loop_reads_again_after(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    for i in range(50):
        taken, future, ran_on = read_now(client, frame, b"E", b"own-%d" % i)
        # Answered before request_now returned, on this thread: the loop was not woken for it.
        assert taken and future.done() and ran_on == [threading.current_thread().name]
        assert future.result(0)[4:] == b"Eown-%d" % i
    metrics = client.conn.metrics
    assert metrics.direct_responses == 50 and metrics.responses_received == 0 and metrics.bytes_in == 0
    assert metrics.direct_bytes_in == metrics.direct_bytes_out
    # The loop's EPOLLIN is back on: requests it writes are answered through it.
    assert client.send(b"E", b"loop").result(WAIT)[4:] == b"Eloop"
    assert metrics.responses_received == 1 and client.conn.in_flight_count == 0


def test_a_frame_from_the_server_before_the_answer_goes_back_to_the_loop_in_order(loop, echo_server, connect,
                                                                                  frame):
    adapter = EchoAdapter()
    client = connect(echo_server.port, adapter)
    taken, future, ran_on = read_now(client, frame, b"U", b"pushed-first")
    assert taken
    assert future.result(WAIT)[4:] == b"Upushed-first"
    assert ran_on == [loop.name]            # handed to the loop with the pushed frame, which went first
    assert adapter.pushed == [b"\xff\xff\xff\xffpushed"]
    assert client.conn.metrics.direct_responses == 0 and client.conn.metrics.responses_received == 1
    client.call(lambda: None)       # the loop has handed reading back by the time it runs this
    taken, future, ran_on = read_now(client, frame, b"E", b"after")
    assert taken and future.result(0)[4:] == b"Eafter" and ran_on == [threading.current_thread().name]


def test_with_another_request_in_flight_the_loop_reads(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    held = client.send(b"H", b"held")
    attempt: list[Any] = []
    # Declined while the loop still holds the connection's write lock after writing the held request: tried again.
    wait_for(lambda: attempt.append(read_now(client, frame, b"F", b"flush")) or attempt[-1][0], WAIT,
             message="the connection took the request")
    _, future, ran_on = attempt[-1]
    assert future.result(WAIT)[4:] == b"Fflush" and held.result(WAIT)[4:] == b"Hheld"
    assert ran_on == [loop.name] and client.conn.metrics.direct_responses == 0


def test_on_the_loop_thread_it_only_writes(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    taken, future, ran_on = client.call(read_now, client, frame, b"E", b"on-loop")
    assert taken and future.result(WAIT)[4:] == b"Eon-loop" and ran_on == [loop.name]


@pytest.mark.parametrize("command, timeout, error", [
    (b"C", None, ConnectionClosedError),        # the server closes
    (b"G", None, ConnectionClosedError),        # garbage: a frame too short for a correlation id
    (b"X", None, ConnectionClosedError),        # an answer to no pending request
    (b"S", 0.2, RequestTimeoutError),           # no answer within the request's timeout
])
def test_a_broken_or_missing_answer_closes_the_connection_through_the_loop(loop, echo_server, connect, frame,
                                                                           command, timeout, error):
    before = open_descriptors()
    client = connect(echo_server.port, request_timeout=60)
    taken, future, _ = read_now(client, frame, command, b"\x00\x00\x00\x02ab" if command == b"G" else b"",
                                timeout=timeout)
    assert taken
    with pytest.raises(error):
        future.result(WAIT)
    assert isinstance(client.closed.result(WAIT), error)
    wait_for(lambda: open_descriptors() == before, WAIT, message="descriptors back to where they were")


def test_closing_the_connection_wakes_a_caller_waiting_for_its_answer(loop, echo_server, connect, frame):
    before = open_descriptors()
    client = connect(echo_server.port, request_timeout=60)
    outcome: list[Any] = []
    caller = threading.Thread(target=lambda: outcome.append(read_now(client, frame, b"S")))
    caller.start()
    wait_for(lambda: echo_server.requests and echo_server.requests[-1][4:5] == b"S", WAIT,
             message="the request arrived")
    client.close()
    caller.join(WAIT)
    assert not caller.is_alive()
    taken, future, _ = outcome[0]
    assert taken
    with pytest.raises(ConnectionClosedError):
        future.result(WAIT)
    # the socket the caller polled was closed by it, once awake (and the echo server closes its side)
    wait_for(lambda: open_descriptors() == before, WAIT, message="descriptors back to where they were")


def test_callers_reading_and_the_loop_reading_keep_every_answer_whole(loop, echo_server, connect, frame):
    client = connect(echo_server.port, max_in_flight=10_000)
    failures: list[str] = []

    def caller(thread: int) -> None:
        for i in range(200):
            body = b"%d-%d-" % (thread, i) + b"y" * (i * 53 % 2000)
            taken, future, _ = read_now(client, frame, b"E", body)
            if not taken:
                future = client.send(b"E", body)
            if future.result(WAIT)[4:] != b"E" + body:
                failures.append(f"{thread}-{i}")

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert not failures and not any(thread.is_alive() for thread in threads)
    metrics = client.conn.metrics
    assert metrics.direct_responses + metrics.responses_received == 600
