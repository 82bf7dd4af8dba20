"""Connection.request_now: a client thread writes its own request when the connection has nothing queued (against
the real threaded echo server of conftest.py)."""
from __future__ import annotations

import itertools
import socket
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from fastmq.io import ConnectionClosedError, ConnectionState, RequestTimeoutError


from .conftest import future_callback

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
