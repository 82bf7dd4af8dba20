"""A client connection driven by the IOLoop: connect, TLS, protocol handshake, pipelined requests.

Life: NEW -> connect() -> RESOLVING -> CONNECTING -> [TLS_HANDSHAKE] -> HANDSHAKE (the adapter's
start_handshake: its handshake steps, which may upgrade the stream in place) -> READY -> CLOSED. The connect timeout covers everything up to READY. A connection
is never reused after CLOSED; ConnectionPool makes a new one, after the reconnect backoff.

Frames that answer no request (adapter.correlation_id() is None) go to adapter.on_unsolicited, by default
to the owner's on_push callback; a server's request is answered with send_frame().

Requests: request(data, callback, correlation_id) queues the framed bytes and registers the request in
the in-flight table (keyed by correlation id, or FIFO for protocols without ids). callback(response,
error) runs on the loop thread exactly once: with the response frame, or with an error when the request
times out or the connection closes. Requests that expect no response (Kafka acks=0) complete when
their bytes have been written. A request that exceeds its timeout closes the connection and fails all
pending requests with RequestTimeoutError: a response that arrives later could not be trusted.

All methods are for the loop thread (use IOLoop.call_soon_threadsafe or run_in_loop from others), except
request_now(): a thread waiting for one answer (a synchronous send) writes its request itself when the connection
has nothing queued, so that the request costs the loop no wake-up and no hand-over (on a loaded 2-core machine a
hand-over to a sleeping loop thread took about 100 us of the round trip). It only tries the stream's write lock;
when it cannot write at once it returns False and the caller hands the request to the loop as usual.

With read_response=True the calling thread also reads the response itself when nothing else is in flight on the
connection: it takes the stream's read lock (only tried, as the loop's reads try it), switches the loop's EPOLLIN
off, and polls the socket until its response is whole, then runs the callback itself. The response then wakes
only the thread waiting for it: no loop wake-up, no second hand-over from the loop to that thread (two context
switches and a GIL hand-over per round trip; the loop spent 50-60 us of CPU per response on them on a loaded
2-core machine). Anything else it receives (a frame from the server, bytes past the response), a broken
connection, or a deadline that passes goes back to the loop in order, which dispatches it, closes or times out as
it always does, and then reads the socket again.
"""
from __future__ import annotations

import errno
import logging
import os
import select
import socket
import ssl
import time
from collections import deque
from itertools import chain
from typing import Any, Callable, Iterable

from fastmq.errors import FastMQError, ProtocolError
from fastmq.io.adapter import Callback, ProtocolAdapter
from fastmq.io.errors import (
    ConnectFailedError,
    ConnectionClosedError,
    ConnectTimeoutError,
    NotReadyError,
    RequestTimeoutError,
    TooManyInFlightError,
)
from fastmq.io.loop import EPOLLOUT, AddrInfo, IOLoop, TimerHandle
from fastmq.io.metrics import IOMetrics
from fastmq.io.stream import (
    CLOSED,
    CONNECTING,
    HANDSHAKE,
    NEW,
    READY,
    RESOLVING,
    ConnectionState,
    Stream,
)

_log = logging.getLogger(__name__)

# kafka-python's default: no Nagle delay, requests leave as soon as they are flushed.
DEFAULT_SOCKET_OPTIONS: tuple[tuple[int, int, int], ...] = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)
_CONNECT_IN_PROGRESS = (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK)
_CORRELATION_MASK = 0x7FFFFFFF  # ids stay non-negative int32, as Kafka's do


class Connection(Stream):
    """One client connection to host:port speaking the protocol of `adapter`."""

    def __init__(
        self,
        loop: IOLoop,
        host: str,
        port: int,
        adapter: ProtocolAdapter,
        *,
        node_id: Any = None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        max_in_flight: int = 5,
        socket_options: Iterable[tuple[int, int, int]] = DEFAULT_SOCKET_OPTIONS,
        recv_size: int = 65536,
        metrics: IOMetrics | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        super().__init__(loop, adapter.make_splitter(), metrics=metrics, recv_size=recv_size)
        self.host = host
        self.port = port
        self.node_id = node_id
        self.adapter = adapter
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_in_flight = max_in_flight
        self.socket_options = tuple(socket_options)
        self._ssl_context = ssl_context
        self._server_hostname = server_hostname if server_hostname is not None else host
        self._fifo = adapter.fifo
        # correlation id -> (callback, deadline, queued_at); insertion order is send order
        self._in_flight: dict[int, tuple[Callback | None, float, float]] = {}
        self._fifo_queue: deque[tuple[Callback | None, float, float]] = deque()
        self._correlation = 0
        self._addresses: deque[tuple[Any, ...]] = deque()
        self._caller_poller: Any = None     # the poll object of a thread reading its own response (one per socket)
        self._connect_timer: TimerHandle | None = None
        self._timeout_timer: TimerHandle | None = None
        self._timeout_at = 0.0
        # Set by the owner (ConnectionPool): called on the loop thread when READY / once closed.
        self.on_ready: Callable[["Connection"], Any] | None = None
        self.on_close: Callable[["Connection", BaseException], Any] | None = None
        # Set by the owner for frames that answer no request (server push, requests the server sends):
        # on_push(connection, frame) on the loop thread; answer a server's request with send_frame().
        self.on_push: Callable[["Connection", Any], Any] | None = None

    # ---- properties ------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._state is READY

    @property
    def in_flight_count(self) -> int:
        """Requests awaiting a response, plus requests without response not yet written."""
        return len(self._in_flight) + len(self._fifo_queue) + len(self._write_marks)

    def can_send(self) -> bool:
        """READY and below max_in_flight."""
        return self._state is READY and (
            len(self._in_flight) + len(self._fifo_queue) + len(self._write_marks) < self.max_in_flight)

    def next_correlation_id(self) -> int:
        """A fresh id for the next request's header (0, 1, 2, ..., wrapping at 2**31)."""
        value = self._correlation
        self._correlation = (value + 1) & _CORRELATION_MASK
        return value

    # ---- connecting ------------------------------------------------------------------------------

    def connect(self) -> None:
        """Start connecting; on_ready or on_close tells how it ended."""
        if self._state is not NEW:
            raise RuntimeError(f"{self}: connect() can be called once")
        self._state = RESOLVING
        self.metrics.connections_created += 1
        self._connect_timer = self.loop.call_later(self.connect_timeout, self._connect_timed_out)
        self.loop.getaddrinfo(self.host, self.port, self._resolved)

    def adopt_socket(self, sock: socket.socket) -> None:
        """Use an already connected socket instead of connect() (TLS and the handshake still run)."""
        if self._state is not NEW:
            raise RuntimeError(f"{self}: the connection was already started")
        self.metrics.connections_created += 1
        self._connect_timer = self.loop.call_later(self.connect_timeout, self._connect_timed_out)
        sock.setblocking(False)
        self._state = CONNECTING
        self._register(sock, EPOLLOUT)
        self._transport_connected()

    def _resolved(self, infos: AddrInfo | None, error: BaseException | None) -> None:
        if self._state is not RESOLVING:
            return
        if error is not None or not infos:
            self.close(ConnectFailedError(f"cannot resolve {self.host!r}: {error}"))
            return
        self._addresses.extend(infos)
        self._connect_next(None)

    def _connect_next(self, last_error: BaseException | None) -> None:
        # Try the resolved addresses in order (e.g. ::1 then 127.0.0.1 for localhost) within one
        # connect timeout, as the peers' clients do.
        while self._addresses:
            family, kind, proto, _, sockaddr = self._addresses.popleft()
            try:
                sock = socket.socket(family, kind, proto)
            except OSError as exc:
                last_error = exc
                continue
            try:
                sock.setblocking(False)
                for level, option, value in self.socket_options:
                    sock.setsockopt(level, option, value)
                result = sock.connect_ex(sockaddr)
            except OSError as exc:
                sock.close()
                last_error = exc
                continue
            if result == 0 or result in _CONNECT_IN_PROGRESS:
                self._state = CONNECTING
                self._register(sock, EPOLLOUT)
                if result == 0:
                    self._transport_connected()
                return
            sock.close()
            last_error = OSError(result, os.strerror(result))
        reason = getattr(last_error, "strerror", None) or last_error
        self.close(ConnectFailedError(f"cannot connect to {self.host}:{self.port}: {reason}"))

    def _connect_event(self, events: int) -> None:
        code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code == 0:
            self._transport_connected()
            return
        self.loop.remove_handler(self._fd)
        self._sock.close()
        self._sock = None
        self._connect_next(OSError(code, os.strerror(code)))

    def _transport_connected(self) -> None:
        if self._ssl_context is not None:
            self._start_tls(self._ssl_context, False, self._server_hostname)
        else:
            self._start_protocol_handshake()

    def _tls_established(self) -> None:
        self._start_protocol_handshake()

    def _start_protocol_handshake(self) -> None:
        self._state = HANDSHAKE
        self._update_events()
        try:
            self.adapter.start_handshake(self)
        except ProtocolError as exc:
            self._protocol_error(exc)
        except FastMQError as exc:
            self.close(exc)
        except Exception as exc:
            _log.exception("the handshake of %r failed on %s", self.adapter, self)
            self.handle_error(exc)

    def handshake_done(self) -> None:
        """Called by the adapter when its handshake succeeded: the connection becomes READY."""
        if self._state is not HANDSHAKE:
            return
        self._state = READY
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None
        _log.debug("%s is ready", self)
        if self.on_ready is not None:
            try:
                self.on_ready(self)
            except Exception:
                _log.exception("on_ready callback of %s failed", self)

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if self._state is READY or self._state is CLOSED:
            return
        self.close(ConnectTimeoutError(
            f"{self} was not ready within {self.connect_timeout:.3g} s "
            f"(still in {self._state.name.lower()})"))

    # ---- requests --------------------------------------------------------------------------------

    def request(self, data: Any, callback: Callback | None = None, correlation_id: int | None = None, *,
                expect_response: bool = True, timeout: float | None = None) -> None:
        """Queue one framed request (a bytes-like object or a list of them, written without copies).

        callback(response_frame, None) or callback(None, error) runs on the loop thread. In keyed mode
        correlation_id must be the id written in the request; it is ignored in FIFO mode. With
        expect_response=False the callback runs once the bytes are written. Raises NotReadyError when
        the connection is not READY and TooManyInFlightError at max_in_flight (check can_send()).
        """
        if self._state is not READY:
            raise self._not_ready()
        with self._write_lock:
            self._submit(data, callback, correlation_id, expect_response, timeout)

    def request_now(self, data: Any, callback: Callback | None, correlation_id: int, *,
                    timeout: float | None = None, read_response: bool = False) -> bool:
        """From any thread: register a request that expects a response (keyed mode) and write it at once from
        the calling thread, non-blocking; bytes the socket does not take are left to the loop. data is one
        bytes-like object (a list of parts goes through request()). Returns False, having done nothing, when the
        connection is not READY, has output queued, is busy writing on the loop, uses TLS or compression,
        already has correlation_id in flight, or is at max_in_flight: then hand the request to the loop
        (request()). callback runs on the loop thread, as for request().

        read_response=True (a thread other than the loop's, about to wait for this answer): when nothing else is
        in flight, the calling thread also reads the response (see the module docstring) and runs
        callback(response, None) itself before returning; otherwise, and whenever it hands reading back, the
        callback runs on the loop thread as usual."""
        if type(data) is list or type(data) is tuple:
            return False
        lock = self._write_lock
        if not lock.acquire(False):
            return False
        reading = False
        try:
            if (self._state is not READY or self._out or self._tls or self._codec is not None or self._fifo
                    or correlation_id in self._in_flight
                    or len(self._in_flight) + len(self._write_marks) >= self.max_in_flight):
                return False
            now = time.monotonic()      # not loop.now: that is the time the loop last woke
            deadline = now + (self.request_timeout if timeout is None else timeout)
            if (read_response and not self._in_flight and not self._write_marks and self._reading
                    and self.idle_expiry is None and not self._caller_reading and not self.loop.in_loop_thread()):
                reading = self._read_lock.acquire(False)    # False: the loop is reading this socket right now
            self._in_flight[correlation_id] = (callback, deadline, now)   # before the response can come
            if self._timeout_timer is None or deadline < self._timeout_at:
                self._arm_timeout(deadline)
            if reading:
                self._caller_reading = True
                self._caller_socket = self._sock
                self._update_events()   # EPOLLIN off: the response wakes this thread, not the loop
            size = len(data)
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                if reading:
                    reading = False
                    self._stop_caller_reading()
                # The loop closes the connection, which fails this request with the others.
                self.loop.call_soon_threadsafe(self._write_failed, exc)
                return True
            self._queued += size
            self._written += sent
            if sent < size:
                self._out.append(memoryview(data)[sent:])
                self._out_bytes += size - sent
                self.loop.call_soon_threadsafe(self._schedule_flush)
            self.metrics.count_direct(sent)
        finally:
            lock.release()
        if reading:
            self._read_own_response(correlation_id, deadline)
        return True

    def _stop_caller_reading(self) -> None:
        # Under the write lock, with the read lock held by the calling thread: the loop reads this socket again.
        self._caller_reading = False
        self._caller_socket = None
        self._read_lock.release()
        self._update_events()

    def _read_own_response(self, correlation_id: int, deadline: float) -> None:
        # The calling thread, holding the read lock, receives until the response to correlation_id is whole.
        sock = self._sock
        splitter = self._splitter
        frames: list[Any] = []      # whole frames received, in order
        received_total = 0
        response = None
        error: BaseException | None = None
        poller = self._caller_poller
        if poller is None:
            poller = self._caller_poller = select.poll()
            poller.register(sock, select.POLLIN)
        try:
            while not frames and self._state is READY:
                wait_ms = (deadline - time.monotonic()) * 1000
                if wait_ms <= 0:
                    break               # the loop's timer closes the connection and fails the request
                if not poller.poll(wait_ms + 1):
                    continue
                try:
                    received = sock.recv_into(splitter.writable(self._recv_size))
                except (BlockingIOError, InterruptedError):
                    continue
                if not received:
                    error = ConnectionClosedError(f"{self} was closed by the peer")
                    break
                splitter.commit(received)
                received_total += received
                frame = splitter.next_frame()
                while frame is not None:
                    frames.append(frame)
                    frame = splitter.next_frame()
            if len(frames) == 1 and self.adapter.correlation_id(frames[0]) == correlation_id:
                response = frames[0]
        except ProtocolError as exc:
            error = exc
        except OSError as exc:
            error = ConnectionClosedError(f"reading from {self} failed: {exc.strerror or exc}")
        entry = None
        with self._write_lock:
            if self._state is CLOSED:
                # The loop closed the connection meanwhile (and failed the request): the socket is this
                # thread's to close.
                self._caller_socket = None
                self._read_lock.release()
                sock.close()
                return
            if response is not None and not splitter.buffered:
                entry = self._in_flight.pop(correlation_id, None)
                self._stop_caller_reading()
                self.metrics.count_direct_read(received_total, 1)
            else:
                self.metrics.count_direct_read(received_total, 0)
                # Frames that are not the response, bytes past it, a broken connection or a passed deadline: the loop
                # takes over, in order, before it reads again (the read lock is free, _caller_reading holds it off).
                self._caller_socket = None
                self._read_lock.release()
                # (a loop already shutting down closes this connection itself, failing the request)
                self.loop.call_or_hand_over(self._take_back_reading, frames, error)
        if entry is not None and entry[0] is not None:
            self._run_callback(entry[0], response, None)

    def _take_back_reading(self, frames: list[Any], error: BaseException | None) -> None:
        # On the loop thread: what a client thread received goes through the usual dispatch, then the loop reads.
        try:
            for frame in frames:
                if self._state is not READY:
                    return
                self._on_frame(frame)
        except ProtocolError as exc:
            self._protocol_error(exc)
            return
        if error is not None:
            if isinstance(error, ProtocolError):
                self._protocol_error(error)
            else:
                self.close(error)
            return
        with self._write_lock:
            self._caller_reading = False
            self._update_events()
        self.dispatch_frames()

    def handshake_request(self, data: Any, callback: Callback | None = None, correlation_id: int | None = None,
                          *, expect_response: bool = True, timeout: float | None = None) -> None:
        """request() for the adapter's handshake, allowed only in the HANDSHAKE state."""
        if self._state is not HANDSHAKE:
            raise self._not_ready()
        with self._write_lock:
            self._submit(data, callback, correlation_id, expect_response, timeout)

    def expect_frame(self, callback: Callback | None, correlation_id: int | None = None, *,
                     timeout: float | None = None) -> None:
        """Wait for a response that the peer sends without a request of ours (NSQ answers OK once more after
        a TLS or compression upgrade): it is matched and completes callback like a request's response.
        Allowed in the HANDSHAKE and READY states."""
        if self._state is not READY and self._state is not HANDSHAKE:
            raise self._not_ready()
        with self._write_lock:
            self._submit(None, callback, correlation_id, True, timeout)

    def _not_ready(self) -> FastMQError:
        if self._state is CLOSED:
            error = ConnectionClosedError(f"{self} is closed: {self.close_error}")
            error.__cause__ = self.close_error
            return error
        return NotReadyError(f"{self} is not ready ({self._state.name.lower()})")

    def _submit(self, data: Any, callback: Callback | None, correlation_id: int | None,
                expect_response: bool, timeout: float | None) -> None:
        if len(self._in_flight) + len(self._fifo_queue) + len(self._write_marks) >= self.max_in_flight:
            raise TooManyInFlightError(
                f"{self} already has {self.max_in_flight} requests in flight (max_in_flight)")
        if expect_response and not self._fifo:
            if correlation_id is None:
                raise ValueError("correlation_id is required: this protocol matches responses by id")
            if correlation_id in self._in_flight:
                raise ValueError(f"correlation id {correlation_id} is already in flight on {self}")
        now = self.loop.now
        deadline = now + (self.request_timeout if timeout is None else timeout)
        if data is not None:
            self._enqueue(data)
            self.metrics.requests_sent += 1
        if expect_response:
            if self._fifo:
                self._fifo_queue.append((callback, deadline, now))
            else:
                self._in_flight[correlation_id] = (callback, deadline, now)  # type: ignore[index]
        else:
            self._write_marks.append((self._queued, callback, deadline))
        if self._timeout_timer is None or deadline < self._timeout_at:
            self._arm_timeout(deadline)

    def _arm_timeout(self, deadline: float) -> None:
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
        self._timeout_at = deadline
        self._timeout_timer = self.loop.call_at(deadline, self._check_timeouts)

    def _check_timeouts(self) -> None:
        # One timer per connection, set for the earliest deadline. Requests usually share one timeout,
        # so a new request never moves it: it is re-armed only here, at most once per timeout period
        # while requests flow, never per request.
        with self._write_lock:      # requests written by other threads join _in_flight under it
            self._timeout_timer = None
            if self._state is not CLOSED:
                self._expire(self.loop.time())

    def _expire(self, now: float) -> None:
        expired = 0
        earliest = float("inf")
        deadlines = chain((entry[1] for entry in chain(self._in_flight.values(), self._fifo_queue)),
                          (mark[2] for mark in self._write_marks))
        for deadline in deadlines:
            if deadline <= now:
                expired += 1
            elif deadline < earliest:
                earliest = deadline
        if expired:
            pending = self.in_flight_count
            self.metrics.request_timeouts += 1
            self.close(RequestTimeoutError(
                f"{expired} request(s) to {self} got no response within the request timeout "
                f"({self.request_timeout:.3g} s); the connection was closed and its {pending} pending "
                f"request(s) failed"))
        elif earliest != float("inf"):
            self._arm_timeout(earliest)

    # ---- responses -------------------------------------------------------------------------------

    def _on_frame(self, frame: Any) -> None:
        correlation_id = self.adapter.correlation_id(frame)
        if correlation_id is None:
            self.adapter.on_unsolicited(self, frame)
            return
        if self._fifo:
            if not self._fifo_queue:
                raise ProtocolError(f"{self} received a response while no request was pending")
            callback, _, queued_at = self._fifo_queue.popleft()
        else:
            entry = self._in_flight.pop(correlation_id, None)
            if entry is None:
                raise ProtocolError(
                    f"{self} received a response with correlation id {correlation_id}, "
                    f"which matches no pending request")
            callback, _, queued_at = entry
        metrics = self.metrics
        latency = self.loop.now - queued_at
        metrics.responses_received += 1
        metrics.request_latency_total += latency
        if latency > metrics.request_latency_max:
            metrics.request_latency_max = latency
        if callback is not None:
            try:
                callback(frame, None)
            except ProtocolError:
                raise
            except Exception:
                _log.exception("response callback %r of %s failed", callback, self)

    # ---- close -----------------------------------------------------------------------------------

    def _closed(self, previous: ConnectionState, error: BaseException) -> None:
        for timer in (self._connect_timer, self._timeout_timer):
            if timer is not None:
                timer.cancel()
        self._connect_timer = self._timeout_timer = None
        self._addresses.clear()
        if previous is not READY:
            self.metrics.connect_failures += 1
            _log.info("%s failed before it was ready: %s", self, error)
        else:
            _log.debug("%s closed: %s", self, error)
        pending = list(self._in_flight.values())
        pending.extend(self._fifo_queue)
        self._in_flight.clear()
        self._fifo_queue.clear()
        for callback, _, _ in pending:
            if callback is not None:
                self._run_callback(callback, None, error)
        if self.on_close is not None:
            try:
                self.on_close(self, error)
            except Exception:
                _log.exception("on_close callback of %s failed", self)

    def __str__(self) -> str:
        node = f" (node {self.node_id})" if self.node_id is not None else ""
        return f"connection to {self.host}:{self.port}{node}"

    def __repr__(self) -> str:
        return (f"<Connection {self.host}:{self.port} node={self.node_id!r} {self._state.name} "
                f"in_flight={self.in_flight_count}>")
