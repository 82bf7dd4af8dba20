"""TubeMQ RPC over fastmq.io: requests to masters and brokers by address, answers matched by serial number.

One RpcClient owns a ConnectionPool (one connection per (host, port), reconnected on demand, idle connections
reaped) on an IOLoop. Several producers and consumers may share one RpcClient (the Java client's connection
sharing per session factory) or each own one. A request made while its node's connection is still coming up
waits for it; a connection that fails fails what waits. A request that outlives its timeout closes its
connection and fails (fastmq.io.RequestTimeoutError), as do all requests pending on it.
"""
from __future__ import annotations

import ssl
import threading
from collections import defaultdict, deque
from concurrent.futures import Future
from typing import Any, Callable

from fastmq._native.frames import TubeMQFrameSplitter
from fastmq.errors import ProtocolError
from fastmq.io import ConnectionPool, IOLoop, ProtocolAdapter
from fastmq.tubemq import rpc
from fastmq.tubemq.errors import RemoteException

Address = tuple[str, int]
ResultCallback = Callable[[Any, BaseException | None], Any]


class TubeMQAdapter(ProtocolAdapter):
    """Frames are (serialNo, payload); the serial number matches a response to its request."""

    def make_splitter(self) -> TubeMQFrameSplitter:
        return TubeMQFrameSplitter()

    def correlation_id(self, frame: tuple[int, bytes]) -> int:
        return frame[0]


class RpcClient:
    """Connections to TubeMQ masters and brokers, and requests over them."""

    def __init__(self, *, loop: IOLoop | None = None, request_timeout_ms: int = rpc.DEFAULT_TIMEOUT_MS,
                 connect_timeout_ms: int = 3000, connections_max_idle_ms: float | None = 180_000,
                 ssl_context: ssl.SSLContext | None = None, max_in_flight: int = 1024) -> None:
        self._own_loop = loop is None
        self.loop = loop if loop is not None else IOLoop("fastmq-tubemq")
        if self._own_loop:
            self.loop.start()
        self.request_timeout_ms = request_timeout_ms
        self.pool = ConnectionPool(self.loop, TubeMQAdapter, ssl_context=ssl_context,
                                   connect_timeout_ms=connect_timeout_ms, request_timeout_ms=request_timeout_ms + 1000,
                                   max_in_flight=max_in_flight, connections_max_idle_ms=connections_max_idle_ms,
                                   reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
        self.pool.add_listener(self._node_changed)
        self._waiting: dict[Address, deque[tuple[int, bytes, type, ResultCallback]]] = defaultdict(deque)
        self._outbox: deque[Any] = deque()
        self._outbox_scheduled = False
        self._closed = False
        self._lock = threading.Lock()

    # ---- requests ------------------------------------------------------------------------------------------

    def call_async(self, address: Address, method: int, message: Any, response_class: type,
                   callback: ResultCallback) -> None:
        """Send `message` (a protobuf request) to address; callback(response, error) runs on the loop thread
        with the decoded `response_class` message, or with the error (RemoteException for an exception
        response). Any thread."""
        body = message.SerializeToString()
        if self.loop.in_loop_thread():
            self._submit(address, method, body, response_class, callback)
            return
        # Requests from other threads queue in the outbox; one loop callback takes all that queued meanwhile.
        self._outbox.append((address, method, body, response_class, callback))
        if not self._outbox_scheduled:
            self._outbox_scheduled = True
            self.loop.call_soon_threadsafe(self._take_outbox)

    def _take_outbox(self) -> None:
        self._outbox_scheduled = False
        outbox = self._outbox
        while outbox:
            self._submit(*outbox.popleft())

    def call(self, address: Address, method: int, message: Any, response_class: type,
             timeout: float | None = None) -> Any:
        """call_async, waiting for the answer; raises what failed. Not on the loop thread."""
        future: Future[Any] = Future()

        def done(response: Any, error: BaseException | None) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(response)

        self.call_async(address, method, message, response_class, done)
        return future.result(timeout if timeout is not None else self.request_timeout_ms / 1000 + 5)

    def _submit(self, address: Address, method: int, body: bytes, response_class: type,
                callback: ResultCallback) -> None:
        if self._closed:
            callback(None, ConnectionAbortedError("the TubeMQ RPC client is closed"))
            return
        if address not in self.pool.nodes:
            self.pool.add_node(address, address[0], address[1])
        self._waiting[address].append((method, body, response_class, callback))
        self._drain(address)

    def _drain(self, address: Address) -> None:
        """Send what waits for address while its connection takes more; connect it when it has none."""
        waiting = self._waiting.get(address)
        if not waiting:
            return
        pool = self.pool
        if not pool.is_ready(address):
            if not pool.maybe_connect(address):     # in reconnect backoff: try when it ends
                self.loop.call_later(pool.connection_delay(address) + 0.01, self._drain, address)
            return
        conn = pool.connection(address)
        while waiting and conn is not None and conn.can_send():
            self._send(conn, address, *waiting.popleft())

    def _send(self, conn: Any, address: Address, method: int, body: bytes, response_class: type,
              callback: ResultCallback) -> None:
        serial_no = conn.next_correlation_id()
        frame = rpc.encode_request(serial_no, method, body, timeout_ms=self.request_timeout_ms)

        def answered(frame: Any, error: BaseException | None) -> None:
            if error is not None:
                callback(None, error)
                return
            try:
                data = rpc.decode_response(frame[0], frame[1]).data
                response = rpc.decode_message(response_class, data)
            except (ProtocolError, RemoteException) as exc:
                callback(None, exc)
            else:
                callback(response, None)
            if self._waiting.get(address):
                self._drain(address)

        conn.request(frame, answered, serial_no)

    def _node_changed(self, address: Address, ready: bool, error: BaseException | None) -> None:
        if ready:
            self._drain(address)
            return
        waiting = self._waiting.pop(address, None)
        for *_, callback in waiting or ():
            callback(None, error or ConnectionError(f"TubeMQ node {address[0]}:{address[1]} closed"))

    def is_ready(self, address: Address) -> bool:
        """Loop thread: whether address has a ready connection."""
        return address in self.pool.nodes and self.pool.is_ready(address)

    def connect(self, address: Address) -> None:
        """Start connecting to address ahead of its first request (the producer's pre-connection). Any thread."""
        def start() -> None:
            if address not in self.pool.nodes:
                self.pool.add_node(address, address[0], address[1])
            self.pool.maybe_connect(address)
        self.loop.call_soon_threadsafe(start)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True

        def close_all() -> None:
            for waiting in self._waiting.values():
                for *_, callback in waiting:
                    callback(None, ConnectionAbortedError("the TubeMQ RPC client closed"))
            self._waiting.clear()
            self.pool.close()

        try:
            self.loop.run_in_loop(close_all, timeout=10)
        finally:
            if self._own_loop:
                self.loop.close(timeout=10)
