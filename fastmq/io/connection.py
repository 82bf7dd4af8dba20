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

All methods are for the loop thread (use IOLoop.call_soon_threadsafe or run_in_loop from others), except two
for a thread that waits for one answer (a synchronous send), so that its round trip costs the loop no wake-up and
no hand-over (on a loaded 2-core machine a hand-over to a sleeping loop thread took about 100 us of the round trip,
and the loop spent 50-60 us of CPU per response on the wake-ups and the GIL hand-over):

- request_now(): the thread writes its request itself when the connection has nothing queued. It only tries the
  stream's write lock; when it cannot write at once it returns False and the caller hands the request to the loop.
  The response comes back through the loop, to the request's callback.
- call_blocking(): the thread borrows the connection for one request and its response, when nothing else is in
  flight or queued on it: it takes the stream's write and read locks (only tried, as the loop tries them),
  switches the loop's EPOLLIN off (epoll_ctl from another thread is safe), writes, and polls the socket until a
  frame is whole in one compiled call without the GIL (FrameSplitter.round_trip: no Python-level call per poll or
  recv), and returns its response to the caller: no callback, no future, and the loop never hears of it. The
  request is in no in-flight table while the caller reads: nobody but the caller can answer or fail it. What
  does not fit that happy path goes back to the loop in order, which dispatches, closes or times out as it always
  does and then reads the socket again: frames that are not the answer (a request the server sends, say) and the
  bytes past it; then the request is registered for the loop to answer (and time out), and the caller waits for
  that. A write the socket did not take whole goes the same way (the loop writes the rest). A broken stream
  closes the connection, and a deadline that passes too (a late answer could not be matched); either fails the
  caller with that error.
"""
from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import threading
import time
from collections import deque
from itertools import chain
from typing import Any, Callable, Iterable, Sequence

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
HANDED_BACK_GRACE = 5.0         # s past its deadline that a borrower waits for the loop to fail its request


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

    @property
    def awaiting_response(self) -> bool:
        return self.in_flight_count > 0

    def can_send(self) -> bool:
        """READY and below max_in_flight."""
        return self._state is READY and self.in_flight_count < self.max_in_flight

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

    def request_many(self, requests: Sequence[tuple[Any, Callback | None, int, float | None]]) -> None:
        """Queue requests that expect responses (keyed mode), in order, as one write: requests holds
        (data, callback, correlation_id, timeout), data one bytes-like object, timeout as request()'s. One lock
        and one hand-over to the writer for all of them, where request() takes each once (a client that sends a
        request a message). All or none: raises as request() does, having queued nothing, when the connection is
        not READY, the requests would pass max_in_flight, or a correlation id is already in flight or repeated."""
        if self._state is not READY:
            raise self._not_ready()
        with self._write_lock:
            in_flight = self._in_flight
            if self.in_flight_count + len(requests) > self.max_in_flight:
                raise TooManyInFlightError(
                    f"{self} cannot take {len(requests)} more requests: max_in_flight is {self.max_in_flight}, "
                    f"{self.in_flight_count} in flight")
            if self._fifo:
                raise ValueError("request_many matches responses by correlation id: not for a FIFO protocol")
            ids = {request[2] for request in requests}
            if len(ids) != len(requests) or not ids.isdisjoint(in_flight):
                raise ValueError(f"correlation ids of requests to {self} repeat or are already in flight")
            now = self.loop.now
            default_timeout = self.request_timeout
            earliest = float("inf")
            for _, callback, correlation_id, timeout in requests:
                deadline = now + (default_timeout if timeout is None else timeout)
                in_flight[correlation_id] = (callback, deadline, now)
                if deadline < earliest:
                    earliest = deadline
            self._enqueue([request[0] for request in requests])
            self.metrics.requests_sent += len(requests)
            if self._timeout_timer is None or earliest < self._timeout_at:
                self._arm_timeout(earliest)

    def request_now(self, data: Any, callback: Callback | None, correlation_id: int, *,
                    timeout: float | None = None) -> bool:
        """From any thread: register a request that expects a response (keyed mode) and write it at once from
        the calling thread, non-blocking; bytes the socket does not take are left to the loop. data is one
        bytes-like object (a list of parts goes through request()). Returns False, having done nothing, when the
        connection is not READY, has output queued, is busy writing on the loop, uses TLS or compression,
        already has correlation_id in flight, or is at max_in_flight: then hand the request to the loop
        (request()). callback runs on the loop thread, as for request()."""
        if type(data) is list or type(data) is tuple:
            return False
        lock = self._write_lock
        if not lock.acquire(False):
            return False
        try:
            if (self._state is not READY or self._out or self._tls or self._codec is not None or self._fifo
                    or correlation_id in self._in_flight
                    or len(self._in_flight) + len(self._write_marks) >= self.max_in_flight):
                return False
            now = time.monotonic()      # not loop.now: that is the time the loop last woke
            deadline = now + (self.request_timeout if timeout is None else timeout)
            self._in_flight[correlation_id] = (callback, deadline, now)   # before the response can come
            if self._timeout_timer is None or deadline < self._timeout_at:
                self._arm_timeout(deadline)
            size = len(data)
            self._queued += size
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                # The loop closes the connection, which fails this request with the others.
                self.loop.call_soon_threadsafe(self._write_failed, exc)
                return True
            self._written += sent
            if sent < size:
                self._queue_rest(data, sent)
            self.metrics.count_direct(sent)
        finally:
            lock.release()
        return True

    def _queue_rest(self, data: Any, sent: int) -> None:
        # Under the write lock, from a client thread: the loop writes what the socket did not take.
        self._out.append(memoryview(data)[sent:])
        self._out_bytes += len(data) - sent
        self.loop.call_soon_threadsafe(self._schedule_flush)

    def call_blocking(self, data: Any, correlation_id: int, deadline: float) -> Any | None:
        """From a thread other than the loop's: send one request (one bytes-like object, keyed mode) and wait
        until time.monotonic() reaches `deadline` for its response, which is returned (see the module docstring).
        Returns None, having done nothing, when the connection cannot be lent now: not READY, anything in flight
        or queued, TLS, compression, paused input, idle reaping, another borrower, or the loop's own thread;
        then hand the request to request_now() or request(). Raises RequestTimeoutError when the deadline passed
        (the connection is closed), ConnectionClosedError when the connection broke or was closed meanwhile."""
        lock = self._write_lock
        if not lock.acquire(False):
            return None
        if (self._state is not READY or self._in_flight or self._out or self._write_marks or self._caller_reading
                or not self._reading or self._tls or self._codec is not None or self._fifo
                or self.idle_expiry is not None or self.loop.in_loop_thread() or not self._read_lock.acquire(False)):
            lock.release()
            return None
        self._caller_reading = True
        self._caller_socket = sock = self._sock
        self._events = 0                # EPOLLIN off (nothing is queued: no EPOLLOUT): the response wakes this
        self.loop.modify_handler(self._fd, 0)   # thread, not the loop
        size = len(data)
        self._queued += size
        self._written += size           # counted before the write: once all is sent, the lock is no longer held
        try:
            sent, received, code = self._splitter.round_trip(self._fd, data, lock, deadline, self._recv_size)
        except ProtocolError as exc:    # raised only once all was sent and the lock released
            sent, received, code = size, 0, 0
            broken: BaseException | None = exc
        else:
            broken = self._read_error(code) if received >= 0 else None
        if received < 0:
            # The socket did not take it all (the write lock is still held): the loop writes the rest and reads.
            self._written -= size - sent
            answer = _Answer()
            try:
                self._register_handed_back(correlation_id, answer, deadline)
                if code:
                    self.loop.call_soon_threadsafe(self._write_failed, OSError(code, os.strerror(code)))
                else:
                    self._queue_rest(data, sent)
                self.metrics.count_direct(sent)
                self._caller_reading = False
                self._caller_socket = None
                self._read_lock.release()
                self._update_events()
            finally:
                lock.release()
            return answer.wait(deadline)
        return self._finish_borrow(sock, correlation_id, deadline, size, received, broken)

    def _finish_borrow(self, sock: Any, correlation_id: int, deadline: float, sent: int, received: int,
                       broken: BaseException | None) -> Any:
        # The borrower, holding the read lock, has received into the splitter until a frame was whole, the stream
        # broke or the deadline passed: it returns its response, or hands the connection back to the loop.
        splitter = self._splitter
        frames: list[Any] = []      # whole frames received, in order, but the response
        response = None
        try:
            frame = splitter.next_frame()
            if (frame is not None and broken is None and not splitter.buffered
                    and self.adapter.correlation_id(frame) == correlation_id):
                with self._write_lock:
                    if self._state is not CLOSED:     # (else the loop closed it meanwhile: see below)
                        self._caller_reading = False
                        self._caller_socket = None
                        self._read_lock.release()
                        self._update_events()
                        self.metrics.count_direct(sent, received, 1)
                        return frame
            while frame is not None:
                if response is None and self.adapter.correlation_id(frame) == correlation_id:
                    response = frame
                else:
                    frames.append(frame)
                frame = splitter.next_frame()
        except ProtocolError as exc:
            broken = exc
        answer = None
        with self._write_lock:
            if self._state is CLOSED:
                # The loop closed the connection meanwhile: the socket is this thread's to close.
                self._caller_socket = None
                self._read_lock.release()
                sock.close()
                raise self._not_ready()
            self.metrics.count_direct(sent, received, response is not None)
            if response is None and broken is None:
                if time.monotonic() >= deadline:
                    broken = RequestTimeoutError(
                        f"a request to {self} got no response within its deadline; the connection was closed")
                else:
                    # Frames before the answer (a request the server sends) or part of it: the loop dispatches
                    # them in order and reads on; the answer comes through it.
                    answer = _Answer()
                    self._register_handed_back(correlation_id, answer, deadline)
            # The loop takes over, in order, before it reads again (the read lock is free, _caller_reading holds
            # it off); a loop already shutting down closes this connection itself.
            self._caller_socket = None
            self._read_lock.release()
            self.loop.call_or_hand_over(self._take_back_reading, frames, broken)
        if answer is not None:
            return answer.wait(deadline)
        if response is None and broken is not None:
            if isinstance(broken, ProtocolError):
                error = ConnectionClosedError(f"{self} closed after a protocol error: {broken}")
                error.__cause__ = broken
                raise error
            raise broken
        return response

    def _register_handed_back(self, correlation_id: int, answer: _Answer, deadline: float) -> None:
        # Under the write lock: a borrowed request the loop is to answer, or time out at its deadline.
        self._in_flight[correlation_id] = (answer, deadline, time.monotonic())
        if self._timeout_timer is None or deadline < self._timeout_at:
            self._arm_timeout(deadline)

    def _read_error(self, code: int) -> BaseException | None:
        # The error for a code of FrameSplitter.round_trip's receiving: -1 the peer closed, > 0 an errno.
        if code == 0:
            return None
        if code < 0:
            return ConnectionClosedError(f"{self} was closed by the peer")
        return ConnectionClosedError(f"reading from {self} failed: {os.strerror(code)}")

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
                if isinstance(error, RequestTimeoutError):
                    self.metrics.request_timeouts += 1
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
            except Exception as exc:
                _log.exception("response callback %r of %s failed", callback, self)
                if self._state is HANDSHAKE:
                    # The handshake waits on this answer: left open, the connection would idle until its
                    # connect timeout.
                    self.close(exc)

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


class _Answer:
    """The response to a borrowed request that the loop answers after all (Connection.call_blocking hands the
    connection back before its answer came): the borrower waits for it."""

    __slots__ = ("_done", "_frame", "_error")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self._frame: Any = None
        self._error: BaseException | None = None

    def __call__(self, frame: Any, error: BaseException | None) -> None:    # on the loop thread, once
        self._frame = frame
        self._error = error
        self._done.release()

    def wait(self, deadline: float) -> Any:
        # The loop fails the request at its deadline; the grace covers a loop late on a loaded machine.
        if not self._done.acquire(timeout=max(0.0, deadline - time.monotonic()) + HANDED_BACK_GRACE):
            raise RequestTimeoutError("a request handed back to the I/O loop was neither answered nor failed "
                                      "after its deadline")
        if self._error is not None:
            raise self._error
        return self._frame
