"""Connection against a real (threaded, blocking) echo server on 127.0.0.1."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.errors import FastMQError, FrameTooLargeError, ProtocolError
from fastmq.io import (
    AuthenticationError,
    ConnectFailedError,
    ConnectionClosedError,
    ConnectionState,
    ConnectTimeoutError,
    NotReadyError,
    RequestTimeoutError,
    TooManyInFlightError,
)
from tests.io.conftest import future_callback, make_frame

WAIT = 10.0


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_many_concurrent_requests_are_matched_by_correlation_id(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=500)
    futures = [(i, client.send(b"E", b"body-%d" % i)) for i in range(400)]
    for i, future in futures:
        response = future.result(WAIT)
        assert response[4:] == b"E" + b"body-%d" % i
    assert client.conn.in_flight_count == 0
    metrics = client.conn.metrics
    assert metrics.requests_sent == 400 and metrics.responses_received == 400
    assert metrics.bytes_out > 0 and metrics.bytes_in == metrics.bytes_out
    assert metrics.request_latency_max >= metrics.request_latency_avg > 0


def test_responses_out_of_order_complete_the_right_requests(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=10)
    held = [client.send(b"H", b"held-%d" % i) for i in range(5)]
    time.sleep(0.05)  # held requests stay unanswered however long one waits
    assert not any(future.done() for future in held)
    flush = client.send(b"F", b"flush")
    assert flush.result(WAIT)[4:] == b"Fflush"
    for i, future in enumerate(held):
        assert future.result(WAIT)[4:] == b"H" + b"held-%d" % i


def test_fifo_mode_matches_in_order_and_routes_pushed_frames(loop, echo_server, connect, fifo_adapter_cls):
    adapter = fifo_adapter_cls()
    client = connect(echo_server.port, adapter, max_in_flight=50)
    # Ids deliberately all the same: FIFO mode must not look at them.
    futures = [client.send(b"E", b"%d" % i, correlation_id=7) for i in range(30)]
    pushed = client.send(b"U", b"after-push", correlation_id=7)
    for i, future in enumerate(futures):
        assert future.result(WAIT)[5:] == b"%d" % i
    assert pushed.result(WAIT)[5:] == b"after-push"
    assert adapter.pushed == [struct.pack(">i", -1) + b"pushed"]


def test_unsolicited_frame_in_keyed_mode_goes_to_the_adapter(loop, echo_server, connect, echo_adapter_cls):
    adapter = echo_adapter_cls()
    client = connect(echo_server.port, adapter)
    assert client.send(b"U", b"x").result(WAIT)[4:] == b"Ux"
    assert adapter.pushed == [struct.pack(">i", -1) + b"pushed"]


def test_large_request_with_a_small_send_buffer_is_written_in_parts(loop, echo_server, connect, frame):
    options = ((socket.SOL_SOCKET, socket.SO_SNDBUF, 4096), (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1))
    client = connect(echo_server.port, socket_options=options)
    body = bytes(range(256)) * (4 * 4096)  # 4 MiB
    # Sent as many parts, including memoryview slices, to exercise the vectored path.
    parts = [b"E"] + [memoryview(body)[i:i + 65536] for i in range(0, len(body), 65536)]
    cid = client.call(client.conn.next_correlation_id)
    header = struct.pack(">ii", 4 + sum(len(p) for p in parts), cid)
    result = {}
    done = threading.Event()

    def callback(response, error):
        result["response"], result["error"] = response, error
        done.set()

    def submit_and_flush() -> int:
        client.conn.request([header] + parts, callback, cid)
        client.conn.flush()  # what the loop does at the end of the iteration
        return client.conn.pending_output

    assert client.call(submit_and_flush) > 0  # the socket took only part of it
    assert done.wait(WAIT)
    assert result["error"] is None
    assert result["response"][4:] == b"E" + body
    assert client.conn.pending_output == 0


def test_more_parts_than_iov_max_are_written_in_order(loop, echo_server, connect):
    from fastmq.io.stream import IOV_MAX

    client = connect(echo_server.port)
    count = IOV_MAX * 3 + 7
    parts = [b"%05d" % i for i in range(count)]
    cid = client.call(client.conn.next_correlation_id)
    header = struct.pack(">ii", 4 + 1 + 5 * count, cid)
    done = threading.Event()
    result = {}

    def callback(response, error):
        result["response"] = response
        done.set()

    client.call(client.conn.request, [header, b"E"] + parts, callback, cid)
    assert done.wait(WAIT)
    assert result["response"][5:] == b"".join(parts)


def test_request_timeout_closes_the_connection_and_fails_every_pending_request(loop, echo_server, connect):
    client = connect(echo_server.port, request_timeout=0.2)
    silent = [client.send(b"S") for _ in range(3)]
    for future in silent:
        with pytest.raises(RequestTimeoutError) as info:
            future.result(WAIT)
        assert info.value.retriable
    assert isinstance(client.closed.result(WAIT), RequestTimeoutError)
    assert client.conn.state is ConnectionState.CLOSED
    assert client.conn.metrics.request_timeouts == 1
    with pytest.raises(ConnectionClosedError):
        client.send(b"E")


def test_answered_requests_keep_the_connection_open_past_their_timeout(loop, echo_server, connect):
    client = connect(echo_server.port, request_timeout=0.5)
    for _ in range(6):
        assert client.send(b"E", b"x").result(WAIT)
        time.sleep(0.1)  # requests spread over more than the timeout
    time.sleep(0.6)  # the timer fires with nothing pending
    assert client.conn.state is ConnectionState.READY


def test_per_request_timeout_overrides_the_default(loop, echo_server, connect):
    client = connect(echo_server.port, request_timeout=60)
    slow = client.send(b"S", timeout=0.1)
    with pytest.raises(RequestTimeoutError):
        slow.result(WAIT)


def test_max_in_flight_is_enforced(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=3)
    held = [client.send(b"H") for _ in range(3)]
    assert client.conn.in_flight_count == 3
    assert not client.call(client.conn.can_send)
    with pytest.raises(TooManyInFlightError) as info:
        client.send(b"E")
    assert info.value.retriable
    client.close()
    for future in held:
        with pytest.raises(ConnectionClosedError):
            future.result(WAIT)


def test_slots_free_up_as_responses_arrive(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=3)
    held = [client.send(b"H") for _ in range(2)]
    assert client.call(client.conn.can_send)
    client.send(b"F").result(WAIT)
    for future in held:
        future.result(WAIT)
    assert client.conn.in_flight_count == 0 and client.call(client.conn.can_send)


def test_request_many_writes_requests_as_one_and_matches_each_answer(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=300)
    calls = [future_callback() for _ in range(250)]

    def submit() -> None:
        first = client.conn.next_correlation_id()
        client.conn.request_many([(make_frame(first + i, b"E" + b"many-%d" % i), callback, first + i, None)
                                  for i, (_, callback) in enumerate(calls)])

    client.call(submit)
    for i, (future, _) in enumerate(calls):
        assert future.result(WAIT)[4:] == b"E" + b"many-%d" % i
    metrics = client.conn.metrics
    assert metrics.requests_sent == 250 and metrics.responses_received == 250 and client.conn.in_flight_count == 0


def test_request_many_gives_each_request_its_own_timeout(loop, echo_server, connect):
    client = connect(echo_server.port, request_timeout=60)
    (held, held_callback), (quick, quick_callback) = future_callback(), future_callback()

    def submit() -> None:
        client.conn.request_many([(make_frame(1, b"H"), held_callback, 1, None),
                                  (make_frame(2, b"H"), quick_callback, 2, 0.2)])

    started = time.monotonic()
    client.call(submit)
    for future in (held, quick):     # the short timeout closes the connection, which fails both
        with pytest.raises((RequestTimeoutError, ConnectionClosedError)):
            future.result(WAIT)
    assert time.monotonic() - started < 30


def test_request_many_queues_all_or_none(loop, echo_server, connect):
    client = connect(echo_server.port, max_in_flight=4)
    held = client.send(b"H", correlation_id=7)
    calls = [future_callback() for _ in range(4)]

    def attempt(ids: list[int]) -> None:
        client.conn.request_many([(make_frame(cid, b"E"), callback, cid, None)
                                  for cid, (_, callback) in zip(ids, calls)])

    with pytest.raises(TooManyInFlightError):
        client.call(attempt, [1, 2, 3, 4])              # 1 in flight + 4 > max_in_flight
    with pytest.raises(ValueError, match="repeat or are already in flight"):
        client.call(attempt, [1, 7])                    # 7 is the held request's
    with pytest.raises(ValueError, match="repeat or are already in flight"):
        client.call(attempt, [1, 1])
    assert client.conn.in_flight_count == 1 and client.conn.metrics.requests_sent == 1
    client.call(attempt, [1, 2, 3])
    assert [future.result(WAIT)[4:] for future, _ in calls[:3]] == [b"E"] * 3
    client.close()
    with pytest.raises(ConnectionClosedError):
        held.result(WAIT)
    with pytest.raises(ConnectionClosedError):
        client.call(attempt, [5])


def test_request_without_response_completes_when_written(loop, echo_server, connect):
    client = connect(echo_server.port)
    no_reply = client.send(b"S", b"fire-and-forget", expect_response=False)
    assert no_reply.result(WAIT) is None
    assert client.conn.in_flight_count == 0
    assert client.send(b"E", b"after").result(WAIT)[4:] == b"Eafter"
    assert any(request.endswith(b"Sfire-and-forget") for request in echo_server.requests)


def test_connect_to_a_closed_port_fails_fast_with_a_retriable_error(loop, connect):
    client = connect(closed_port(), wait=False)
    with pytest.raises(ConnectFailedError) as info:
        client.ready.result(WAIT)
    assert info.value.retriable
    assert client.conn.metrics.connect_failures == 1


def test_connect_timeout_when_the_handshake_never_finishes(loop, echo_server, connect, echo_adapter_cls):
    class StallingAdapter(echo_adapter_cls):
        def start_handshake(self, conn):
            pass  # never calls handshake_done

    client = connect(echo_server.port, StallingAdapter(), wait=False, connect_timeout=0.2)
    with pytest.raises(ConnectTimeoutError, match="handshake"):
        client.ready.result(WAIT)


def test_connect_timeout_when_the_server_never_accepts(loop, connect):
    # A listener with a full accept queue drops new SYNs, so the TCP connect itself stalls.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)  # the kernel queues the fillers in the backlog
        client = connect(port, wait=False, connect_timeout=0.3)
        with pytest.raises(ConnectTimeoutError):
            client.ready.result(WAIT)
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_connect_by_host_name_tries_each_resolved_address(loop, echo_server, connect):
    # "localhost" may resolve to ::1 first, where nothing listens: the IPv4 address must still work.
    client = connect(echo_server.port, host="localhost")
    assert client.send(b"E", b"by-name").result(WAIT)[4:] == b"Eby-name"


def test_requests_before_ready_and_after_close_are_refused(loop, echo_server, connect, echo_adapter_cls):
    class StallingAdapter(echo_adapter_cls):
        def start_handshake(self, conn):
            pass

    stalled = connect(echo_server.port, StallingAdapter(), wait=False)
    assert stalled.call(lambda: stalled.conn.state) in (
        ConnectionState.CONNECTING, ConnectionState.HANDSHAKE)
    with pytest.raises(NotReadyError):
        stalled.send(b"E")
    stalled.close()
    with pytest.raises(ConnectionClosedError):
        stalled.send(b"E")


def test_close_fails_everything_pending_with_the_given_error(loop, echo_server, connect):
    client = connect(echo_server.port)
    pending = [client.send(b"S") for _ in range(3)]
    client.close()
    for future in pending:
        with pytest.raises(ConnectionClosedError, match="closed"):
            future.result(WAIT)
    client.close()  # idempotent
    assert isinstance(client.closed.result(WAIT), ConnectionClosedError)


def test_peer_closing_fails_pending_requests(loop, echo_server, connect):
    client = connect(echo_server.port)
    pending = client.send(b"S")
    client.send(b"C")
    with pytest.raises(ConnectionClosedError, match="closed by the peer"):
        pending.result(WAIT)


def test_unknown_correlation_id_closes_only_that_connection(loop, echo_server, connect):
    bad = connect(echo_server.port)
    good = connect(echo_server.port)
    future = bad.send(b"X")
    with pytest.raises(ConnectionClosedError, match="protocol error") as info:
        future.result(WAIT)
    assert isinstance(info.value.__cause__, ProtocolError)
    assert good.send(b"E", b"still fine").result(WAIT)[4:] == b"Estill fine"


def test_garbage_from_the_peer_closes_the_connection_with_a_protocol_error(loop, echo_server, connect):
    client = connect(echo_server.port)
    pending = client.send(b"S")
    client.send(b"G", b"\x7f\xff\xff\xff garbage", expect_response=False)
    with pytest.raises(ConnectionClosedError) as info:
        pending.result(WAIT)
    assert isinstance(info.value.__cause__, FrameTooLargeError)
    assert loop.run_in_loop(lambda: "loop alive", timeout=WAIT) == "loop alive"


def test_response_callback_errors(loop, echo_server, connect, frame):
    client = connect(echo_server.port)
    results = []

    def buggy(response, error):
        results.append(response)
        raise ValueError("bug in user code")

    def strict(response, error):
        raise ProtocolError("the response body is malformed")

    def submit(callback) -> None:
        cid = client.conn.next_correlation_id()
        client.conn.request(frame(cid, b"E"), callback, cid)

    client.call(submit, buggy)
    assert client.send(b"E").result(WAIT)  # a plain bug is logged; the connection lives on
    assert len(results) == 1
    client.call(submit, strict)
    error = client.closed.result(WAIT)  # a protocol error in the response closes it
    assert isinstance(error, ConnectionClosedError) and isinstance(error.__cause__, ProtocolError)


def test_handshake_hook_exchanges_frames_before_ready(loop, echo_server, connect, echo_adapter_cls, frame):
    class HelloAdapter(echo_adapter_cls):
        def start_handshake(self, conn):
            assert conn.state is ConnectionState.HANDSHAKE
            with pytest.raises(NotReadyError):
                conn.request(frame(99, b"E"), None, 99)

            def answered(response, error):
                if error is None and response[4:] == b"Ehello":
                    conn.handshake_done()
                else:
                    conn.close(AuthenticationError("the handshake was refused"))

            cid = conn.next_correlation_id()
            conn.handshake_request(frame(cid, b"Ehello"), answered, cid)

    client = connect(echo_server.port, HelloAdapter())
    assert client.conn.state is ConnectionState.READY
    assert client.send(b"E", b"after").result(WAIT)[4:] == b"Eafter"
    assert echo_server.requests[0][4:] == b"Ehello"


def test_a_handshake_answer_whose_callback_fails_closes_the_connection_at_once(loop, echo_server, connect,
                                                                                echo_adapter_cls, frame):
    # A bug in a handshake step's callback: the connection closes with it, instead of waiting for the connect
    # timeout (an hour here) that would otherwise end a handshake nobody will finish.
    class BuggyAdapter(echo_adapter_cls):
        def start_handshake(self, conn):
            def answered(response, error):
                int(b"not a number")

            cid = conn.next_correlation_id()
            conn.handshake_request(frame(cid, b"Ehello"), answered, cid)

    client = connect(echo_server.port, BuggyAdapter(), wait=False, connect_timeout=3600)
    with pytest.raises(ValueError, match="not a number"):
        client.ready.result(WAIT)
    assert client.conn.state is ConnectionState.CLOSED


def test_failed_handshake_reports_its_error(loop, echo_server, connect, echo_adapter_cls):
    class RefusedAdapter(echo_adapter_cls):
        def start_handshake(self, conn):
            raise AuthenticationError("wrong password")

    client = connect(echo_server.port, RefusedAdapter(), wait=False)
    with pytest.raises(AuthenticationError) as info:
        client.ready.result(WAIT)
    assert not info.value.retriable


def test_stopping_the_loop_fails_in_flight_requests(loop, echo_server, connect):
    client = connect(echo_server.port)
    pending = [client.send(b"S") for _ in range(3)]
    assert loop.close(WAIT)
    for future in pending:
        with pytest.raises(ConnectionClosedError, match="loop stopped"):
            future.result(WAIT)
    assert client.conn.state is ConnectionState.CLOSED


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=6))
def test_random_bytes_from_the_peer_never_break_the_loop(loop, connect, chunks):
    ours, theirs = socket.socketpair()
    client = connect(0, sock=ours)
    pending = client.send(b"S")
    try:
        for chunk in chunks:
            theirs.sendall(chunk)
    except OSError:
        pass  # the connection may already have closed on a protocol error
    theirs.close()
    # Whatever the bytes were, the request ends with one of fastmq's own errors (or, if the bytes
    # happened to form a response to it, with that response), and the connection is closed.
    try:
        pending.result(WAIT)
    except FastMQError:
        pass
    error = client.closed.result(WAIT)
    assert isinstance(error, FastMQError)
    assert loop.run_in_loop(lambda: "alive", timeout=WAIT) == "alive"


def test_an_answer_sent_before_the_peer_reset_reaches_its_request(loop, connect):
    """A peer that refuses a request from its header, answers and closes without reading the rest (nsqd with a
    message over its size limit): the write fails with a reset, and the request still gets the answer."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(WAIT)

    def refuse() -> None:
        conn, _ = server.accept()
        with conn:
            _size, correlation_id = struct.unpack(">ii", conn.recv(8, socket.MSG_WAITALL))
            conn.sendall(struct.pack(">ii", 4 + 7, correlation_id) + b"refused")
        # Closed with most of the request unread: the kernel answers what comes next with a reset.

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    try:
        client = connect(server.getsockname()[1], socket_options=((socket.SOL_SOCKET, socket.SO_SNDBUF, 4096),))
        answer = client.send(b"E", b"x" * (8 << 20))
        assert answer.result(WAIT)[4:] == b"refused"
        assert isinstance(client.closed.result(WAIT), ConnectionClosedError)
    finally:
        thread.join(WAIT)
        server.close()
