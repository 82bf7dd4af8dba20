"""Connections per node: get-or-connect, reconnect backoff, idle reaping, readiness, least-loaded node.

A node is an id with a host and port (a Kafka broker id, an NSQ daemon, ...). The pool keeps at most one
connection per node. After a connection closes the node may reconnect only once its backoff has passed:
reconnect_backoff_ms * 2**(failures-1), capped at reconnect_backoff_max_ms, then jittered by +-20% so
that clients do not reconnect in lock-step (kafka-python's and Kafka's rule; the jitter is applied after
the cap, so a delay can exceed the cap by up to 20%). Reaching READY resets the failure count; a
connection closed for being idle, or by the pool itself, reconnects without delay.

Loop thread only, like Connection.
"""
from __future__ import annotations

import logging
import random
import ssl
from typing import Any, Callable, Iterable

from fastmq.io.adapter import Callback, ProtocolAdapter
from fastmq.io.connection import DEFAULT_SOCKET_OPTIONS, Connection
from fastmq.io.errors import ConnectionClosedError, IdleConnectionClosedError, NotReadyError
from fastmq.io.idle import IdleReaper
from fastmq.io.loop import IOLoop
from fastmq.io.metrics import IOMetrics

_log = logging.getLogger(__name__)

# Doubling stops here; 2**30 times any useful base is far beyond any useful maximum.
_MAX_BACKOFF_EXPONENT = 30

StateListener = Callable[[Any, bool, BaseException | None], Any]


class ReconnectBackoff:
    """Exponential reconnect delay with jitter; rng is injectable so tests can pin the random factor."""

    def __init__(self, base_ms: float, max_ms: float, jitter: float = 0.2, rng: random.Random | None = None) -> None:
        if base_ms < 0 or max_ms < 0:
            raise ValueError("reconnect backoff times must not be negative")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {jitter}")
        self.base = base_ms / 1000.0
        self.max = max(max_ms, base_ms) / 1000.0
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()

    def delay(self, failures: int) -> float:
        """Seconds to wait before the next attempt after `failures` consecutive failures (0 for none)."""
        if failures <= 0:
            return 0.0
        exponent = min(failures - 1, _MAX_BACKOFF_EXPONENT)
        capped = min(self.base * (1 << exponent), self.max)
        return capped * self._rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)


class _Node:
    __slots__ = ("node_id", "host", "port", "conn", "failures", "next_attempt", "last_error")

    def __init__(self, node_id: Any, host: str, port: int) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.conn: Connection | None = None
        self.failures = 0              # consecutive closes without reaching READY in between
        self.next_attempt = 0.0        # loop time before which no new connection is started
        self.last_error: BaseException | None = None


class ConnectionPool:
    """At most one Connection per node, (re)connected on demand."""

    def __init__(
        self,
        loop: IOLoop,
        adapter_factory: Callable[[], ProtocolAdapter],
        *,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout_ms: float = 10000,
        request_timeout_ms: float = 30000,
        max_in_flight: int = 5,
        reconnect_backoff_ms: float = 50,
        reconnect_backoff_max_ms: float = 1000,
        connections_max_idle_ms: float | None = 540000,
        socket_options: Iterable[tuple[int, int, int]] = DEFAULT_SOCKET_OPTIONS,
        recv_size: int = 65536,
        metrics: IOMetrics | None = None,
        rng: random.Random | None = None,
        on_push: Callable[[Connection, Any], Any] | None = None,
    ) -> None:
        self.loop = loop
        self.adapter_factory = adapter_factory
        self.ssl_context = ssl_context
        self.connect_timeout = connect_timeout_ms / 1000.0
        self.request_timeout = request_timeout_ms / 1000.0
        self.max_in_flight = max_in_flight
        self.socket_options = tuple(socket_options)
        self.recv_size = recv_size
        self.metrics = metrics if metrics is not None else IOMetrics()
        self._rng = rng if rng is not None else random.Random()
        # Every connection's on_push: frames that answer no request (conn.node_id tells the node).
        self.on_push = on_push
        self.backoff = ReconnectBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms, rng=self._rng)
        self.idle_reaper = (IdleReaper(loop, connections_max_idle_ms / 1000.0)
                            if connections_max_idle_ms else None)
        self._nodes: dict[Any, _Node] = {}
        self._listeners: list[StateListener] = []
        self._closed = False

    # ---- nodes -----------------------------------------------------------------------------------

    def add_node(self, node_id: Any, host: str, port: int) -> None:
        """Add a node or change its address (closing a connection to the old address)."""
        node = self._nodes.get(node_id)
        if node is None:
            self._nodes[node_id] = _Node(node_id, host, port)
            return
        if (node.host, node.port) != (host, port):
            node.host, node.port = host, port
            self._close_node(node, f"node {node_id!r} moved to {host}:{port}")

    def remove_node(self, node_id: Any) -> None:
        node = self._nodes.pop(node_id, None)
        if node is not None:
            self._close_node(node, f"node {node_id!r} was removed")

    @property
    def nodes(self) -> list[Any]:
        return list(self._nodes)

    def add_listener(self, listener: StateListener) -> None:
        """listener(node_id, ready, error) runs when a node's connection becomes ready (True, None) or
        closes (False, error)."""
        self._listeners.append(listener)

    # ---- connecting ------------------------------------------------------------------------------

    def maybe_connect(self, node_id: Any) -> bool:
        """Start connecting unless connected, connecting or in backoff; True unless in backoff."""
        node = self._node(node_id)
        if node.conn is not None:
            return True
        if self._closed or self.loop.time() < node.next_attempt:
            return False
        conn = Connection(
            self.loop, node.host, node.port, self.adapter_factory(), node_id=node_id,
            ssl_context=self.ssl_context, connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout, max_in_flight=self.max_in_flight,
            socket_options=self.socket_options, recv_size=self.recv_size, metrics=self.metrics)
        conn.on_ready = self._on_ready
        conn.on_close = self._on_close
        conn.on_push = self.on_push
        node.conn = conn
        conn.connect()
        return True

    def ready(self, node_id: Any) -> bool:
        """maybe_connect(), then whether the node is ready (kafka-python's KafkaClient.ready)."""
        self.maybe_connect(node_id)
        return self.is_ready(node_id)

    def _on_ready(self, conn: Connection) -> None:
        node = self._nodes.get(conn.node_id)
        if node is None or node.conn is not conn:
            return
        node.failures = 0
        node.last_error = None
        if self.idle_reaper is not None:
            self.idle_reaper.track(conn)
        self._notify(conn.node_id, True, None)

    def _on_close(self, conn: Connection, error: BaseException) -> None:
        node = self._nodes.get(conn.node_id)
        if node is not None and node.conn is conn:
            node.conn = None
            node.last_error = error
            if isinstance(error, IdleConnectionClosedError):
                node.next_attempt = 0.0
            else:
                node.failures += 1
                delay = self.backoff.delay(node.failures)
                node.next_attempt = self.loop.time() + delay
                _log.info("node %r at %s:%d disconnected (%s); reconnect allowed in %.0f ms",
                          node.node_id, node.host, node.port, error, delay * 1000)
        self._notify(conn.node_id, False, error)

    def _notify(self, node_id: Any, ready: bool, error: BaseException | None) -> None:
        for listener in self._listeners:
            try:
                listener(node_id, ready, error)
            except Exception:
                _log.exception("connection state listener %r failed", listener)

    # ---- queries ---------------------------------------------------------------------------------

    def _node(self, node_id: Any) -> _Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}; add it with add_node()") from None

    def connection(self, node_id: Any) -> Connection | None:
        """The node's connection if it is READY, else None."""
        node = self._nodes.get(node_id)
        conn = node.conn if node is not None else None
        return conn if conn is not None and conn.ready else None

    def is_ready(self, node_id: Any) -> bool:
        return self.connection(node_id) is not None

    def can_send(self, node_id: Any) -> bool:
        """READY and below max_in_flight."""
        conn = self.connection(node_id)
        return conn is not None and conn.can_send()

    def is_connecting(self, node_id: Any) -> bool:
        node = self._nodes.get(node_id)
        return node is not None and node.conn is not None and not node.conn.ready

    def is_disconnected(self, node_id: Any) -> bool:
        node = self._nodes.get(node_id)
        return node is None or node.conn is None

    def in_flight_count(self, node_id: Any) -> int:
        node = self._nodes.get(node_id)
        return node.conn.in_flight_count if node is not None and node.conn is not None else 0

    def last_error(self, node_id: Any) -> BaseException | None:
        """Why the node's last connection closed (None after it became ready again)."""
        node = self._nodes.get(node_id)
        return node.last_error if node is not None else None

    def connection_delay(self, node_id: Any) -> float:
        """Seconds until the node is worth looking at again: 0 when a request can be sent or a connection
        may be started now, the rest of the backoff when disconnected, inf while connecting (wait for the
        state listener) or while every in-flight slot is taken (a response or a finished write frees one,
        and either runs the loop's hooks again: asking to be polled at once would spin the loop)."""
        node = self._node(node_id)
        if node.conn is not None:
            return 0.0 if node.conn.can_send() else float("inf")
        return max(0.0, node.next_attempt - self.loop.time())

    def least_loaded_node(self, node_ids: Iterable[Any] | None = None) -> Any | None:
        """The node to send a node-independent request (metadata) to: a ready node with the fewest
        requests in flight (an idle one at once), else a connecting node, else a disconnected node out
        of backoff; None when every node is in backoff. Ties are broken at random."""
        candidates = list(self._nodes if node_ids is None else node_ids)
        self._rng.shuffle(candidates)
        now = self.loop.time()
        best = connecting = startable = None
        best_load = None
        for node_id in candidates:
            node = self._nodes.get(node_id)
            if node is None:
                continue
            conn = node.conn
            if conn is not None and conn.ready:
                load = conn.in_flight_count
                if load == 0:
                    return node_id
                if load < conn.max_in_flight and (best_load is None or load < best_load):
                    best, best_load = node_id, load
            elif conn is not None:
                if connecting is None:
                    connecting = node_id
            elif startable is None and now >= node.next_attempt:
                startable = node_id
        for choice in (best, connecting, startable):
            if choice is not None:
                return choice
        return None

    # ---- sending ---------------------------------------------------------------------------------

    def send(self, node_id: Any, data: Any, callback: Callback | None = None, correlation_id: int | None = None,
             *, expect_response: bool = True, timeout: float | None = None) -> None:
        """Connection.request() on the node's ready connection; NotReadyError when there is none."""
        conn = self.connection(node_id)
        if conn is None:
            raise NotReadyError(f"node {node_id!r} has no ready connection; call ready() and wait")
        conn.request(data, callback, correlation_id, expect_response=expect_response, timeout=timeout)

    # ---- closing ---------------------------------------------------------------------------------

    def _close_node(self, node: _Node, reason: str) -> None:
        conn = node.conn
        if conn is not None:
            # Detached first, so that _on_close does not count this as a failure.
            node.conn = None
            node.next_attempt = 0.0
            conn.close(ConnectionClosedError(f"{conn} closed by the client: {reason}"))

    def close(self, node_id: Any | None = None) -> None:
        """Close one node's connection (it may reconnect at once), or all of them and the pool."""
        if node_id is not None:
            self._close_node(self._node(node_id), "close() was called")
            return
        self._closed = True
        for node in list(self._nodes.values()):
            self._close_node(node, "the connection pool closed")
        if self.idle_reaper is not None:
            self.idle_reaper.close()

    def __repr__(self) -> str:
        ready = sum(1 for node in self._nodes.values() if node.conn is not None and node.conn.ready)
        return f"<ConnectionPool nodes={len(self._nodes)} ready={ready}>"
