"""The part every socket on the loop shares, client or server: TLS handshake, writes, reads, close.

Writes: callers queue bytes-like objects (whole framed requests or their parts); the loop flushes every
connection that queued output once per iteration with one sendmsg over the queue (vectored: the parts
are never joined; IOV_MAX parts per call), keeps a partial write's remainder as a memoryview slice, and
registers EPOLLOUT only while output is pending. The output queue, the socket's writes and the state's change to
CLOSED are guarded by the stream's write lock, so that a client thread may write a request itself when nothing is
queued (Connection.request_now); the loop thread is the only one that ever waits for that lock. TLS sockets cannot
sendmsg, so small parts are joined into one TLS write of up to TLS_COALESCE bytes (encryption copies them anyway);
a write that raised SSLWantWriteError is retried with the very same buffer, as OpenSSL requires.

Reads: recv_into the frame splitter's writable() view, commit(), then every complete frame goes to
_on_frame (the subclass). A ProtocolError from the splitter or from _on_frame closes this connection
only. Level-triggered epoll re-reports a socket with unread data, but not bytes a TLS object already
decrypted and holds: those are read on until SSLObject.pending() is 0.

In-place upgrades of a live connection, asked for by the protocol right after the frame that names the
switch (NSQ's IDENTIFY answer):
- start_compression(codec): from that frame on, both directions pass through a StreamCodec (fastmq.io.codecs)
  below the splitter. Output queued before stays as it is; bytes already received past that frame are taken
  back out of the splitter (take_buffered) and decoded first. Input is then received into a raw buffer and
  decoded in bounded pieces, each framed and dispatched before the next is decoded.
- start_tls(context, ...): output queued before leaves in plain text, then the TLS handshake runs on the same
  socket (state TLS_HANDSHAKE, nothing read or written meanwhile) and the connection returns to its state.
  The peer must wait for the switch (TLS cannot take bytes already read): bytes past the frame close it.
"""
from __future__ import annotations

import enum
import logging
import os
import socket
import ssl
import threading
from collections import deque
from itertools import islice
from typing import Any, Callable, Sequence

from fastmq.errors import ProtocolError
from fastmq.io.codecs import StreamCodec
from fastmq.io.errors import ConnectionClosedError, NotReadyError, TLSError, UpgradeError
from fastmq.io.idle import IdleExpiry, Reapable
from fastmq.io.loop import EPOLLIN, EPOLLOUT, IOLoop, TimerHandle
from fastmq.io.metrics import IOMetrics

_log = logging.getLogger(__name__)

_EPOLL_FAILURE = 0x008 | 0x010  # EPOLLERR | EPOLLHUP, reported whatever the registered mask

# sendmsg() takes at most IOV_MAX buffers; the rest of the queue waits for the next write.
IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024
# Parts smaller than this are joined into one TLS write (a TLS record carries up to 16 KiB; larger
# joined writes let OpenSSL fill whole records without a Python call per record).
TLS_COALESCE = 128 * 1024
# sendmsg calls per flush when more than IOV_MAX parts are queued; the rest waits for EPOLLOUT.
_WRITES_PER_FLUSH = 8
# TLS reads per readiness event before yielding to the other connections; the rest of the decrypted
# bytes are read in this iteration's callback phase.
_TLS_READS_PER_EVENT = 16


class ConnectionState(enum.IntEnum):
    NEW = 0              # created, connect() not called yet
    RESOLVING = 1        # waiting for the host name to resolve
    CONNECTING = 2       # TCP connect in progress
    TLS_HANDSHAKE = 3    # TLS handshake in progress
    HANDSHAKE = 4        # protocol handshake (ProtocolAdapter.start_handshake) in progress
    READY = 5            # requests may be sent
    CLOSED = 6           # closed for good; a new connection is needed


NEW = ConnectionState.NEW
RESOLVING = ConnectionState.RESOLVING
CONNECTING = ConnectionState.CONNECTING
TLS_HANDSHAKE = ConnectionState.TLS_HANDSHAKE
HANDSHAKE = ConnectionState.HANDSHAKE
READY = ConnectionState.READY
CLOSED = ConnectionState.CLOSED


def as_buffer(part: Any) -> Any:
    """part as an object whose len() is its size in bytes (bytes, bytearray or a flat byte memoryview)."""
    kind = type(part)
    if kind is bytes or kind is bytearray:
        return part
    view = part if kind is memoryview else memoryview(part)
    if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
        view = view.cast("B")
    return view


class Stream:
    """A connected (or connecting) non-blocking socket registered with an IOLoop."""

    def __init__(self, loop: IOLoop, splitter: Any, *, metrics: IOMetrics | None, recv_size: int) -> None:
        self.loop = loop
        self.metrics = metrics if metrics is not None else IOMetrics()
        self.idle_expiry: IdleExpiry[Reapable] | None = None
        self.close_error: BaseException | None = None
        self._state = NEW
        self._sock: Any = None
        self._fd = -1
        self._splitter = splitter
        self._recv_size = recv_size
        self._events = 0                  # the epoll mask currently registered
        self._reading = True              # False while the owner paused input (server back-pressure)
        self._out: deque[Any] = deque()   # queued output parts, each sized by len()
        self._out_bytes = 0               # sum of len() over _out
        self._queued = 0                  # bytes ever queued (positions for _write_marks)
        self._written = 0                 # bytes ever written
        # (position, callback, deadline): callback(None, None) once _written reaches position
        self._write_marks: deque[tuple[int, Callable[[Any, Any], Any] | None, float]] = deque()
        self._flush_scheduled = False
        # Held by the loop while it queues or writes output or closes, and by a thread writing a request itself
        # (which only tries it: it never waits). Re-entrant: a write's completion callbacks may queue more.
        self._write_lock = threading.RLock()
        # Held by whoever receives from the socket: the loop in _read, or a client thread reading the response to
        # its own request (Connection.call_blocking); both only try it, neither ever waits.
        self._read_lock = threading.Lock()
        self._caller_reading = False      # a client thread reads (or just read) this socket: EPOLLIN is off and the
                                          # loop reads nothing until that thread hands reading back
        self._caller_socket: Any = None   # the socket that thread polls: close() wakes it, and it closes the socket
        self._tls = False
        self._tls_retry = False           # the last TLS write did not complete: repeat the same buffer
        self._tls_read_wants_write = False  # a TLS read needs the socket writable (renegotiation)
        self._tls_write_wants_read = False  # a TLS write needs incoming data first; EPOLLOUT would spin
        self._handshake_events = 0        # epoll mask the TLS handshake waits for
        self._codec: StreamCodec | None = None  # the compression layer below the splitter, once started
        self._raw: memoryview | None = None     # receive buffer while a codec decodes what is received
        # An in-place TLS upgrade: the state to return to, the callback after it, and (until the plain output
        # queued before it has left) the arguments of the handshake and that output.
        self._upgrade_resume: ConnectionState | None = None
        self._upgrade_done: Callable[[], Any] | None = None
        self._pending_tls: tuple[ssl.SSLContext, bool, str | None] | None = None
        self._plain_prefix: deque[Any] = deque()
        self._upgrade_timer: TimerHandle | None = None

    # ---- state -----------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def closed(self) -> bool:
        return self._state is CLOSED

    @property
    def awaiting_response(self) -> bool:
        """Whether this end waits for the peer to answer (a client's requests in flight); a server's never does."""
        return False

    @property
    def pending_output(self) -> int:
        """Bytes queued and not yet written."""
        return self._out_bytes

    @property
    def compression(self) -> str | None:
        """The name of the codec started with start_compression(), or None."""
        return self._codec.name if self._codec is not None else None

    def peer_certificate(self) -> dict[str, Any] | None:
        """The peer's verified TLS certificate (SSLSocket.getpeercert()); None without TLS, before the
        handshake, after close, or when the peer sent none."""
        if not self._tls or self._state is CLOSED or self._state is TLS_HANDSHAKE:
            return None
        return self._sock.getpeercert() or None

    def _register(self, sock: Any, events: int) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._events = events
        self.loop.add_handler(self._fd, self, events)

    def _update_events(self) -> None:
        state = self._state
        if state is CLOSED or self._sock is None:
            return
        if state is CONNECTING:
            mask = EPOLLOUT
        elif state is TLS_HANDSHAKE:
            mask = self._handshake_events
        else:
            mask = EPOLLIN if self._reading and not self._caller_reading else 0
            if (self._out and not self._tls_write_wants_read) or self._tls_read_wants_write:
                mask |= EPOLLOUT
        if mask != self._events:
            self._events = mask
            self.loop.modify_handler(self._fd, mask)

    def pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._update_events()

    def resume_reading(self) -> None:
        """Resume input; frames that arrived while paused are dispatched in this iteration."""
        if not self._reading and self._state is not CLOSED:
            self._reading = True
            self._update_events()
            self.loop.call_soon(self.dispatch_frames)

    # ---- loop entry points -----------------------------------------------------------------------

    def handle_events(self, events: int) -> None:
        state = self._state
        if state is READY or state is HANDSHAKE:
            if events & EPOLLOUT:
                if self._tls_read_wants_write:
                    self._tls_read_wants_write = False
                    self._read()
                if self._out and self._state is not CLOSED:
                    self.flush()
            if self._state is CLOSED:
                return
            if self._reading:
                if events & (EPOLLIN | _EPOLL_FAILURE):
                    self._read()
            elif events & _EPOLL_FAILURE:
                # Nothing reads while paused, so a hang-up would be re-reported forever.
                self.close(ConnectionClosedError(f"{self} was closed by the peer"))
        elif state is CONNECTING:
            self._connect_event(events)
        elif state is TLS_HANDSHAKE:
            if self._pending_tls is None:
                self._tls_handshake_step()
            elif self._write_plain_prefix():
                self._begin_tls_upgrade()

    def handle_error(self, error: BaseException) -> None:
        closing = ConnectionClosedError(f"{self} closed after an internal error: {error!r}")
        closing.__cause__ = error
        self.close(closing)

    def loop_stopped(self) -> None:
        self.close(ConnectionClosedError(f"{self} closed because its I/O loop stopped"))

    def _connect_event(self, events: int) -> None:  # pragma: no cover - only client connections connect
        raise NotImplementedError

    # ---- TLS -------------------------------------------------------------------------------------

    def _start_tls(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None) -> None:
        self._state = TLS_HANDSHAKE
        self._handshake_events = EPOLLIN
        try:
            self._sock = context.wrap_socket(self._sock, server_side=server_side,
                                             server_hostname=server_hostname, do_handshake_on_connect=False)
        except (ssl.SSLError, ValueError) as exc:
            self.close(TLSError(f"TLS setup for {self} failed: {exc}"))
            return
        self._tls = True
        self._tls_handshake_step()

    def _tls_handshake_step(self) -> None:
        try:
            self._sock.do_handshake()
        except ssl.SSLWantReadError:
            self._handshake_events = EPOLLIN
            self._update_events()
            return
        except ssl.SSLWantWriteError:
            self._handshake_events = EPOLLOUT
            self._update_events()
            return
        except ssl.SSLCertVerificationError as exc:
            self.close(TLSError(f"TLS handshake with {self} failed: certificate verification: "
                                f"{exc.verify_message or exc.reason}; check ssl_cafile and ssl_check_hostname"))
            return
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError) as exc:
            self.close(ConnectionClosedError(f"{self} closed during the TLS handshake: {exc}"))
            return
        except ssl.SSLError as exc:
            self.close(TLSError(f"TLS handshake with {self} failed: {exc.reason or exc}"))
            return
        except OSError as exc:
            self.close(ConnectionClosedError(f"{self} failed during the TLS handshake: {exc}"))
            return
        if self._upgrade_resume is None:
            self._tls_established()
        else:
            self._finish_tls_upgrade()

    def _tls_established(self) -> None:  # pragma: no cover - overridden by both subclasses
        raise NotImplementedError

    # ---- in-place upgrades -----------------------------------------------------------------------

    def start_tls(self, context: ssl.SSLContext, *, server_side: bool, server_hostname: str | None = None,
                  on_done: Callable[[], Any] | None = None, timeout: float | None = None) -> None:
        """Turn this live connection into a TLS connection on the same socket (see the module docstring).

        Call it right after the frame that names the switch. on_done() runs on the loop thread once the
        handshake succeeded; a failed handshake closes the connection (TLSError), and so does one that is
        not done within timeout seconds (ConnectionClosedError; None: no limit of its own, the connect
        timeout of a client connection still in its handshake keeps running). Requests wait meanwhile
        (NotReadyError). Raises UpgradeError when the connection is not open, already TLS, or compressed.
        """
        with self._write_lock:
            self._start_tls_upgrade(context, server_side, server_hostname, on_done, timeout)

    def _start_tls_upgrade(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None,
                           on_done: Callable[[], Any] | None, timeout: float | None) -> None:
        state = self._state
        if state is not READY and state is not HANDSHAKE:
            raise UpgradeError(f"{self} cannot start TLS in the {state.name.lower()} state")
        if self._tls:
            raise UpgradeError(f"{self} already uses TLS")
        if self._codec is not None:
            raise UpgradeError(f"{self} is compressed ({self._codec.name}); TLS must be started before that")
        early = self._splitter.buffered
        if early:
            self.close(UpgradeError(f"{self} received {early} bytes past the TLS upgrade point before the "
                                    f"handshake: the peer must wait for the switch"))
            return
        self._upgrade_resume = state
        self._upgrade_done = on_done
        if timeout is not None:
            self._upgrade_timer = self.loop.call_later(timeout, self._upgrade_timed_out, timeout)
        self._pending_tls = (context, server_side, server_hostname)
        self._plain_prefix, self._out = self._out, deque()
        self._out_bytes = 0
        self._state = TLS_HANDSHAKE
        self._handshake_events = EPOLLOUT
        if self._write_plain_prefix():
            self._begin_tls_upgrade()
        else:
            self._update_events()

    def _write_plain_prefix(self) -> bool:
        # The output queued before start_tls, in plain text; True once all of it is written.
        prefix = self._plain_prefix
        while prefix:
            head = prefix[0]
            try:
                sent = self._sock.send(head)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as exc:
                self._write_failed(exc)
                return False
            self._written += sent
            self.metrics.bytes_out += sent
            if sent < len(head):
                prefix[0] = memoryview(head)[sent:]
            else:
                prefix.popleft()
        self._complete_write_marks()
        return self._state is not CLOSED

    def _begin_tls_upgrade(self) -> None:
        context, server_side, server_hostname = self._pending_tls  # type: ignore[misc]
        self._pending_tls = None
        self._start_tls(context, server_side, server_hostname)

    def _upgrade_timed_out(self, timeout: float) -> None:
        self._upgrade_timer = None
        if self._upgrade_resume is not None:
            self.close(ConnectionClosedError(f"{self} did not finish its TLS upgrade within {timeout:.3g} s"))

    def _finish_tls_upgrade(self) -> None:
        if self._upgrade_timer is not None:
            self._upgrade_timer.cancel()
            self._upgrade_timer = None
        self._state = self._upgrade_resume  # type: ignore[assignment]
        self._upgrade_resume = None
        done, self._upgrade_done = self._upgrade_done, None
        self._update_events()
        if self._out:
            self._schedule_flush()
        # The handshake may have pulled application data into the TLS object, which epoll cannot see.
        self.loop.call_soon(self._read_if_open)
        if done is not None:
            try:
                done()
            except Exception as exc:
                _log.exception("the TLS upgrade callback of %s failed", self)
                self.handle_error(exc)

    def start_compression(self, codec: StreamCodec) -> None:
        """From this point of the stream on, both directions pass through codec (see the module docstring).

        Call it right after the frame that names the switch (from that frame's callback): output queued
        before leaves as it is; received bytes past that frame are decoded by codec. Raises UpgradeError when
        the connection is not open or already compressed, or in the middle of a frame.
        """
        with self._write_lock:
            self._start_codec(codec)

    def _start_codec(self, codec: StreamCodec) -> None:
        state = self._state
        if state is not READY and state is not HANDSHAKE:
            raise UpgradeError(f"{self} cannot start {codec.name} in the {state.name.lower()} state")
        if self._codec is not None:
            raise UpgradeError(f"{self} is already compressed ({self._codec.name})")
        try:
            early = self._splitter.take_buffered()
        except ValueError as exc:
            raise UpgradeError(f"{self} cannot start {codec.name}: {exc}") from None
        self._codec = codec
        self._raw = memoryview(bytearray(self._recv_size))
        if early:
            codec.feed(early)
            self.loop.call_soon(self.dispatch_frames)

    # ---- output ----------------------------------------------------------------------------------

    def enqueue(self, data: Any) -> int:
        """Queue one bytes-like object, or a list/tuple of them, for writing; returns the byte count.

        The objects are written as they are, without copies: do not modify them until written. The
        write happens at the end of this loop iteration.
        """
        with self._write_lock:
            return self._enqueue(data)

    def _enqueue(self, data: Any) -> int:
        kind = type(data)
        if self._codec is not None:
            plain = b"".join(data) if kind is list or kind is tuple else data
            data = self._codec.encode(plain) if len(plain) else b""   # nothing to send: not even a flush marker
            kind = bytes
        if kind is list or kind is tuple:
            parts = [as_buffer(part) for part in data]
            size = 0
            for part in parts:
                size += len(part)
            if size:
                self._out.extend(part for part in parts if len(part))
        else:
            part = data if kind is bytes else as_buffer(data)
            size = len(part)
            if size:
                self._out.append(part)
        self._out_bytes += size
        self._queued += size
        if not self._flush_scheduled:
            self._schedule_flush()
        return size

    def send_frame(self, data: Any) -> None:
        """Queue one frame outside the request/response bookkeeping: a server's push (a message for a
        subscriber, a heartbeat), or a client's answer to a request its server sent.

        Loop thread only (from others: loop.call_soon_threadsafe(stream.send_frame, data)). A server's
        pushed frame does not wait behind the connection's unanswered requests.
        """
        state = self._state
        if state is CLOSED:
            raise ConnectionClosedError(f"{self} is closed: {self.close_error}")
        if state < TLS_HANDSHAKE:
            raise NotReadyError(f"{self} is not connected yet ({state.name.lower()})")
        self.enqueue(data)

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.schedule_flush(self)

    def flush(self) -> None:
        """Write as much queued output as the socket takes now (called by the loop)."""
        with self._write_lock:
            self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        state = self._state
        if not self._out or not (state is READY or state is HANDSHAKE):
            return  # closed, or still connecting: output waits for the transport
        if self._tls:
            self._write_tls()
        else:
            self._write_plain()
        if self._state is not CLOSED:
            self._update_events()

    def _write_plain(self) -> None:
        out = self._out
        sock = self._sock
        batch: Sequence[Any]    # the queued parts themselves, or a copy of the first IOV_MAX of them
        # More than IOV_MAX parts take several sendmsg calls; stop at the first short write.
        for _ in range(_WRITES_PER_FLUSH):
            if len(out) <= IOV_MAX:
                batch, batch_bytes = out, self._out_bytes
            else:
                batch = list(islice(out, IOV_MAX))
                batch_bytes = sum(len(part) for part in batch)
            try:
                sent = sock.sendmsg(batch)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._write_failed(exc)
                return
            if sent:
                self._consume_output(sent)
            if sent < batch_bytes or not out:
                return

    def _write_failed(self, exc: OSError) -> None:
        # A peer that refuses a request (a message over its size limit, say) may answer and close before it has
        # read the rest of it: the write then fails with a reset, but the answer is already in the receive queue,
        # where the kernel keeps it readable. Read it first, so that the request fails with the peer's own error.
        if not self._tls:
            self._read_if_open()
        if self._state is not CLOSED:
            self.close(ConnectionClosedError(f"writing to {self} failed: {exc.strerror or exc}"))

    def _write_tls(self) -> None:
        out = self._out
        sock = self._sock
        while out:
            if not self._tls_retry and len(out) > 1 and len(out[0]) < TLS_COALESCE:
                count = total = 0
                for part in out:
                    if count and total + len(part) > TLS_COALESCE:
                        break
                    total += len(part)
                    count += 1
                if count > 1:
                    joined = b"".join([out.popleft() for _ in range(count)])
                    out.appendleft(joined)
            try:
                sent = sock.send(out[0])
            except (ssl.SSLWantWriteError, BlockingIOError):
                self._tls_retry = True
                return
            except ssl.SSLWantReadError:
                self._tls_retry = True
                self._tls_write_wants_read = True
                return
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError) as exc:
                # A peer that refused us (TLS 1.3 client authentication fails after our handshake
                # finished) has usually said why in an alert still waiting to be read.
                self._read()
                self.close(ConnectionClosedError(f"writing to {self} failed: {exc}"))
                return
            except ssl.SSLError as exc:
                self.close(TLSError(f"TLS error writing to {self}: {exc.reason or exc}"))
                return
            except OSError as exc:
                self.close(ConnectionClosedError(f"writing to {self} failed: {exc.strerror or exc}"))
                return
            self._tls_retry = False
            self._consume_output(sent)

    def _consume_output(self, sent: int) -> None:
        self._written += sent
        self.metrics.bytes_out += sent
        if self.idle_expiry is not None:
            self.idle_expiry.touch(self, self.loop.now)
        out = self._out
        if sent == self._out_bytes:
            out.clear()
            self._out_bytes = 0
        else:
            self._out_bytes -= sent
            while sent:
                head = out[0]
                size = len(head)
                if size <= sent:
                    out.popleft()
                    sent -= size
                else:
                    out[0] = memoryview(head)[sent:]
                    sent = 0
        self._complete_write_marks()

    def _complete_write_marks(self) -> None:
        marks = self._write_marks
        if marks and marks[0][0] <= self._written:
            written = self._written
            while marks and marks[0][0] <= written:
                callback = marks.popleft()[1]
                if callback is not None:
                    self._run_callback(callback, None, None)
            # An in-flight slot is free again: the loop's hooks run once more before it sleeps (the write
            # may have finished in the flush that follows them, where no socket event would wake the loop).
            self.loop.wakeup()

    def _run_callback(self, callback: Callable[[Any, Any], Any], result: Any, error: Any) -> None:
        try:
            callback(result, error)
        except Exception:
            _log.exception("completion callback %r of %s failed", callback, self)

    # ---- input -----------------------------------------------------------------------------------

    def _read(self) -> None:
        # Skipped while a client thread reads its own response here (it hands reading back to the loop when done).
        if self._caller_reading or not self._read_lock.acquire(False):
            return
        try:
            self._receive()
        finally:
            self._read_lock.release()

    def _receive(self) -> None:
        splitter = self._splitter
        sock = self._sock
        for _ in range(_TLS_READS_PER_EVENT if self._tls else 1):
            codec = self._codec
            target = splitter.writable(self._recv_size) if codec is None else self._raw
            try:
                received = sock.recv_into(target)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            except ssl.SSLWantWriteError:
                self._tls_read_wants_write = True
                self._update_events()
                return
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                received = 0
            except ssl.SSLError as exc:
                self.close(TLSError(f"TLS error reading from {self}: {exc.reason or exc}"))
                return
            except ProtocolError as exc:
                self._protocol_error(exc)
                return
            except OSError as exc:
                self.close(ConnectionClosedError(f"reading from {self} failed: {exc.strerror or exc}"))
                return
            if not received:
                self.close(ConnectionClosedError(f"{self} was closed by the peer"))
                return
            if codec is None:
                splitter.commit(received)
            else:
                assert target is not None, "start_compression() made the receive buffer along with the codec"
                codec.feed(target[:received])
            self.metrics.bytes_in += received
            if self.idle_expiry is not None:
                self.idle_expiry.touch(self, self.loop.now)
            if self._tls_write_wants_read:
                self._tls_write_wants_read = False
                self._schedule_flush()
            self.dispatch_frames()
            if (self._state is CLOSED or not self._reading or not self._tls or self._sock is not sock
                    or not sock.pending()):
                return  # (a frame may have started a TLS upgrade: the socket object is then another)
        self.loop.call_soon(self._read_if_open)

    def _read_if_open(self) -> None:
        if self._reading and (self._state is READY or self._state is HANDSHAKE):
            self._read()

    def dispatch_frames(self) -> None:
        """Hand every complete buffered frame to _on_frame, while open and reading; with a codec, decode
        the next piece of received bytes whenever the splitter has no whole frame left."""
        splitter = self._splitter
        next_frame = splitter.next_frame
        on_frame = self._on_frame
        while self._reading and (self._state is READY or self._state is HANDSHAKE):
            try:
                frame = next_frame()
                if frame is None:
                    codec = self._codec
                    piece = codec.read() if codec is not None else None
                    if not piece:
                        return
                    splitter.feed(piece)
                    continue
                on_frame(frame)
            except ProtocolError as exc:
                self._protocol_error(exc)
                return

    def _on_frame(self, frame: Any) -> None:  # pragma: no cover - overridden by both subclasses
        raise NotImplementedError

    def _protocol_error(self, error: ProtocolError) -> None:
        _log.warning("closing %s: %s", self, error)
        closing = ConnectionClosedError(f"{self} closed after a protocol error: {error}")
        closing.__cause__ = error
        self.close(closing)

    # ---- close -----------------------------------------------------------------------------------

    def close(self, error: BaseException | None = None) -> None:
        """Close now; everything pending fails with `error` (default: ConnectionClosedError). Idempotent."""
        if self._state is CLOSED:
            return
        with self._write_lock:
            previous = self._shut(error)
        error = self.close_error
        assert error is not None        # set by _shut
        if self.idle_expiry is not None:
            self.idle_expiry.remove(self)
            self.idle_expiry = None
        self.metrics.connections_closed += 1
        marks = list(self._write_marks)
        self._write_marks.clear()
        for _, callback, _ in marks:
            if callback is not None:
                self._run_callback(callback, None, error)
        self._closed(previous, error)

    def _shut(self, error: BaseException | None) -> ConnectionState:
        # The state becomes CLOSED and the socket goes under the write lock: a thread writing a request itself
        # either finished before (its request is failed with the others) or sees CLOSED. Closing during an
        # in-place TLS upgrade: the connection was in the state it would return to.
        previous = self._state if self._upgrade_resume is None else self._upgrade_resume
        self._state = CLOSED
        self._upgrade_resume = self._upgrade_done = self._pending_tls = None
        self._plain_prefix.clear()
        if self._upgrade_timer is not None:
            self._upgrade_timer.cancel()
            self._upgrade_timer = None
        if error is None:
            error = ConnectionClosedError(f"{self} was closed")
        self.close_error = error
        sock = self._sock
        if sock is not None:
            self.loop.remove_handler(self._fd)
            try:
                if sock is self._caller_socket:
                    # A client thread is polling it: a shutdown wakes that thread, which then closes the socket (closed
                    # here, its descriptor could be reused under that thread's poll).
                    sock.shutdown(socket.SHUT_RDWR)
                else:
                    sock.close()
            except OSError:
                pass
        self._out.clear()
        self._out_bytes = 0
        return previous

    def _closed(self, previous: ConnectionState, error: BaseException) -> None:
        """Subclass hook, run once by close() after the socket is gone."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._state.name}>"
