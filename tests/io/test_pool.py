"""ConnectionPool and ReconnectBackoff against real sockets on 127.0.0.1."""
from __future__ import annotations

import random
import socket
import struct
import threading
import time
from concurrent.futures import Future

import pytest

from fastmq.io import ConnectionPool, IdleConnectionClosedError, NotReadyError, ReconnectBackoff
from tests.support.waiting import WAIT, wait_for


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def make_pool(loop, echo_adapter_cls):
    pools = []

    def _make(**options) -> ConnectionPool:
        pool = loop.run_in_loop(lambda: ConnectionPool(loop, echo_adapter_cls, **options), timeout=WAIT)
        pools.append(pool)
        return pool

    yield _make
    for pool in pools:
        if not loop.closed:
            loop.run_in_loop(pool.close, timeout=WAIT)


def pool_send(loop, pool, node_id, command: bytes, body: bytes = b"") -> Future:
    future: Future = Future()

    def callback(response, error):
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(response)

    def submit():
        conn = pool.connection(node_id)
        if conn is None:
            raise NotReadyError(f"node {node_id} not ready")
        cid = conn.next_correlation_id()
        payload = command + body
        pool.send(node_id, struct.pack(">ii", 4 + len(payload), cid) + payload, callback, cid)

    loop.run_in_loop(submit, timeout=WAIT)
    return future


def test_backoff_grows_exponentially_within_the_jitter_bounds():
    backoff = ReconnectBackoff(50, 1000, rng=random.Random(1234))
    assert backoff.delay(0) == 0.0
    for failures in range(1, 12):
        expected = min(0.05 * 2 ** (failures - 1), 1.0)
        for _ in range(50):
            delay = backoff.delay(failures)
            assert expected * 0.8 <= delay <= expected * 1.2
    # The jitter really varies (connection storms are what it prevents).
    assert len({round(backoff.delay(3), 9) for _ in range(20)}) > 1


def test_backoff_without_jitter_and_bad_settings():
    backoff = ReconnectBackoff(100, 400, jitter=0.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 50, 10**6)] == [0.1, 0.2, 0.4, 0.4, 0.4, 0.4]
    with pytest.raises(ValueError):
        ReconnectBackoff(-1, 10)
    with pytest.raises(ValueError):
        ReconnectBackoff(1, 10, jitter=1.5)


def test_ready_connects_and_requests_flow(loop, echo_server, make_pool):
    pool = make_pool()
    events = []
    loop.run_in_loop(pool.add_listener, lambda *event: events.append(event), timeout=WAIT)
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    assert loop.run_in_loop(pool.ready, 1, timeout=WAIT) is False  # connecting
    assert wait_for(lambda: loop.run_in_loop(pool.is_ready, 1))
    assert loop.run_in_loop(pool.can_send, 1) and loop.run_in_loop(pool.connection_delay, 1) == 0.0
    assert pool_send(loop, pool, 1, b"E", b"hi").result(WAIT)[4:] == b"Ehi"
    assert events == [(1, True, None)]
    assert pool.metrics.responses_received == 1


def test_send_to_a_node_that_is_not_ready_raises(loop, make_pool):
    pool = make_pool()
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", closed_port(), timeout=WAIT)
    with pytest.raises(NotReadyError):
        loop.run_in_loop(pool.send, 1, b"x", None, 0, timeout=WAIT)
    with pytest.raises(KeyError):
        loop.run_in_loop(pool.maybe_connect, "unknown", timeout=WAIT)


def test_reconnect_backoff_grows_after_each_failure(loop, make_pool):
    pool = make_pool(reconnect_backoff_ms=40, reconnect_backoff_max_ms=200, rng=random.Random(7))
    failures = []
    # Recorded on the loop thread right after the pool set the backoff: delay = next_attempt - then.
    loop.run_in_loop(pool.add_listener, lambda node, ready, error: failures.append((loop.time(), error)),
                     timeout=WAIT)
    loop.run_in_loop(pool.add_node, "n", "127.0.0.1", closed_port(), timeout=WAIT)
    node = pool._nodes["n"]
    delays = []
    for attempt in range(1, 6):
        assert wait_for(lambda: loop.run_in_loop(pool.maybe_connect, "n"))
        assert wait_for(lambda: len(failures) == attempt)
        closed_at, error = failures[-1]
        delay = node.next_attempt - closed_at
        delays.append(delay)
        expected = min(0.04 * 2 ** (attempt - 1), 0.2)
        assert node.failures == attempt
        assert expected * 0.8 - 0.001 <= delay <= expected * 1.2
        # While the backoff lasts, no new connection is started (both asked in one loop callback).
        remaining, started = loop.run_in_loop(lambda: (pool.connection_delay("n"), pool.maybe_connect("n")))
        assert remaining <= expected * 1.2
        if remaining > 0.005:
            assert started is False
    assert delays[4] > delays[0]
    assert all(error is not None for _, error in failures)


def test_a_ready_connection_resets_the_failure_count(loop, echo_server, make_pool):
    pool = make_pool(reconnect_backoff_ms=10, reconnect_backoff_max_ms=20)
    port = closed_port()
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", port, timeout=WAIT)
    loop.run_in_loop(pool.maybe_connect, 1, timeout=WAIT)
    assert wait_for(lambda: pool._nodes[1].failures == 1)
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    assert pool._nodes[1].failures == 0 and loop.run_in_loop(pool.last_error, 1) is None


def test_peer_disconnect_then_reconnect(loop, echo_server, make_pool):
    pool = make_pool(reconnect_backoff_ms=10, reconnect_backoff_max_ms=50)
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    first = loop.run_in_loop(pool.connection, 1)
    pending = pool_send(loop, pool, 1, b"S")
    pool_send(loop, pool, 1, b"C")
    with pytest.raises(Exception):
        pending.result(WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.is_disconnected, 1))
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    assert loop.run_in_loop(pool.connection, 1) is not first
    assert pool_send(loop, pool, 1, b"E", b"again").result(WAIT)[4:] == b"Eagain"


def test_changing_a_node_address_closes_the_old_connection(loop, echo_server, make_pool):
    other = type(echo_server)()
    try:
        pool = make_pool()
        loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
        assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
        old = loop.run_in_loop(pool.connection, 1)
        loop.run_in_loop(pool.add_node, 1, "127.0.0.1", other.port, timeout=WAIT)
        assert old.closed
        assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
        assert pool_send(loop, pool, 1, b"E").result(WAIT)
        assert other.accepted == 1
    finally:
        other.close()


def test_least_loaded_node_prefers_idle_ready_nodes(loop, echo_server, make_pool):
    pool = make_pool(reconnect_backoff_ms=5000, reconnect_backoff_max_ms=5000)
    for node_id in (1, 2):
        loop.run_in_loop(pool.add_node, node_id, "127.0.0.1", echo_server.port, timeout=WAIT)
    loop.run_in_loop(pool.add_node, 3, "127.0.0.1", closed_port(), timeout=WAIT)
    # Nothing connected yet: any node out of backoff will do.
    assert loop.run_in_loop(pool.least_loaded_node) in (1, 2, 3)
    for node_id in (1, 2, 3):
        loop.run_in_loop(pool.maybe_connect, node_id, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.is_ready, 1) and loop.run_in_loop(pool.is_ready, 2)
                    and loop.run_in_loop(pool.is_disconnected, 3))
    busy = pool_send(loop, pool, 1, b"H")
    for _ in range(20):
        assert loop.run_in_loop(pool.least_loaded_node) == 2
    busy2 = pool_send(loop, pool, 2, b"H")
    pool_send(loop, pool, 2, b"H")
    assert loop.run_in_loop(pool.least_loaded_node) == 1  # one in flight beats two
    assert loop.run_in_loop(pool.in_flight_count, 2) == 2
    # Node 3 is in a long backoff: only it is offered -> None.
    assert loop.run_in_loop(pool.least_loaded_node, [3]) is None
    loop.run_in_loop(pool.close, timeout=WAIT)
    for future in (busy, busy2):
        with pytest.raises(Exception):
            future.result(WAIT)


def test_idle_connections_are_reaped_and_active_ones_kept(loop, echo_server, make_pool):
    pool = make_pool(connections_max_idle_ms=500)
    closed = {}
    loop.run_in_loop(pool.add_listener,
                     lambda node, ready, error: closed.setdefault(node, error) if not ready else None,
                     timeout=WAIT)
    for node_id in ("busy", "idle"):
        loop.run_in_loop(pool.add_node, node_id, "127.0.0.1", echo_server.port, timeout=WAIT)
        loop.run_in_loop(pool.maybe_connect, node_id, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.is_ready, "busy") and loop.run_in_loop(pool.is_ready, "idle"))
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # traffic every 50 ms on one of them only
        assert pool_send(loop, pool, "busy", b"E").result(WAIT)
        time.sleep(0.05)  # the traffic pattern under test: busy, never idle 400 ms
    assert isinstance(closed.get("idle"), IdleConnectionClosedError)
    assert "busy" not in closed and loop.run_in_loop(pool.is_ready, "busy")
    # An idle close is no failure: the node may reconnect at once.
    assert loop.run_in_loop(pool.connection_delay, "idle") == 0.0
    assert wait_for(lambda: "busy" in closed)  # and once the busy one goes quiet, it is reaped too
    assert isinstance(closed["busy"], IdleConnectionClosedError)


def test_a_connection_awaiting_a_response_is_not_idle(loop, echo_server, make_pool):
    pool = make_pool(connections_max_idle_ms=200, request_timeout_ms=30000)
    closed = {}
    loop.run_in_loop(pool.add_listener,
                     lambda node, ready, error: closed.setdefault(node, error) if not ready else None,
                     timeout=WAIT)
    loop.run_in_loop(pool.add_node, "slow", "127.0.0.1", echo_server.port, timeout=WAIT)
    loop.run_in_loop(pool.maybe_connect, "slow", timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.is_ready, "slow"))
    held = pool_send(loop, pool, "slow", b"H", b"held")     # the server answers it only with the next F
    time.sleep(0.8)  # the peer takes four times connections_max_idle_ms to answer
    assert "slow" not in closed and not held.done()
    flushed = pool_send(loop, pool, "slow", b"F")
    assert held.result(WAIT).endswith(b"Hheld") and flushed.result(WAIT)
    assert wait_for(lambda: "slow" in closed)  # answered and quiet: idle
    assert isinstance(closed["slow"], IdleConnectionClosedError)


def test_pool_close_closes_everything_and_refuses_new_connections(loop, echo_server, make_pool):
    pool = make_pool()
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    conn = loop.run_in_loop(pool.connection, 1)
    loop.run_in_loop(pool.close, timeout=WAIT)
    assert conn.closed
    assert loop.run_in_loop(pool.maybe_connect, 1) is False


def test_close_of_one_node_allows_an_immediate_reconnect(loop, echo_server, make_pool):
    pool = make_pool(reconnect_backoff_ms=5000, reconnect_backoff_max_ms=5000)
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    loop.run_in_loop(pool.close, 1, timeout=WAIT)
    assert loop.run_in_loop(pool.connection_delay, 1) == 0.0
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    loop.run_in_loop(pool.remove_node, 1, timeout=WAIT)
    assert loop.run_in_loop(lambda: pool.nodes) == []


def test_many_threads_drive_one_pool_through_the_loop(loop, echo_server, make_pool):
    pool = make_pool(max_in_flight=1000)
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.ready, 1))
    results: list[bytes] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        futures = [pool_send(loop, pool, 1, b"E", b"%d-%d" % (index, i)) for i in range(50)]
        with lock:
            results.extend(future.result(WAIT)[5:] for future in futures)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(results) == sorted(b"%d-%d" % (t, i) for t in range(6) for i in range(50))


def test_a_node_with_every_in_flight_slot_taken_is_not_polled_until_one_frees(loop, echo_server, make_pool):
    # "Look again at once" for a full connection spun the producer's sender (1000 topics x 4 partitions): the
    # response that frees a slot runs the loop's hooks anyway.
    pool = make_pool(max_in_flight=2)
    loop.run_in_loop(pool.add_node, 1, "127.0.0.1", echo_server.port, timeout=WAIT)
    loop.run_in_loop(pool.ready, 1, timeout=WAIT)
    assert wait_for(lambda: loop.run_in_loop(pool.is_ready, 1))
    held = [pool_send(loop, pool, 1, b"H", bytes([n])) for n in range(2)]
    assert loop.run_in_loop(pool.connection_delay, 1) == float("inf")
    assert not loop.run_in_loop(pool.can_send, 1)
    # Room for the flush that answers the held two.
    loop.run_in_loop(setattr, pool.connection(1), "max_in_flight", 3, timeout=WAIT)
    pool_send(loop, pool, 1, b"F").result(WAIT)
    assert all(future.result(WAIT) for future in held)
    assert wait_for(lambda: loop.run_in_loop(pool.connection_delay, 1) == 0.0)
