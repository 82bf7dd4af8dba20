"""The server side of the engine (the embedded broker's front ends): listening sockets and the
connections they accept, on the same IOLoop as the clients.

A ServerConnection cuts request frames with the protocol's splitter and hands each one to the handler
with a Reply. The handler answers through the Reply at once or later, from any thread; responses are
written in request order whatever order the answers come in (Kafka clients rely on it). A connection
with max_pending_replies unanswered requests stops reading until answers arrive, so a client cannot
make the server buffer without bound. A ProtocolError (from the splitter or raised by the handler)
closes that one connection; others are not disturbed.
"""
from __future__ import annotations

import errno
import logging
import socket
import ssl
from collections import deque
from typing import Any, Callable

from fastmq.errors import ProtocolError
from fastmq.io.errors import ConnectionClosedError, LoopClosedError
from fastmq.io.idle import IdleReaper
from fastmq.io.limits import ensure_open_file_limit
from fastmq.io.loop import EPOLLIN, IOLoop, TimerHandle
from fastmq.io.metrics import IOMetrics
from fastmq.io.stream import CLOSED, READY, ConnectionState, Stream, as_buffer

_log = logging.getLogger(__name__)

# Accepts per readiness event, so that a connection storm does not starve established connections.
_ACCEPTS_PER_EVENT = 64
# When accept() fails for lack of descriptors, the listening socket stays readable; stop polling it for
# this long instead of spinning.
_ACCEPT_PAUSE = 0.1
_PENDING = object()
# Apache Kafka serves thousands of connections per broker (5000 were measured against it); the limit is
# a guard against descriptor exhaustion, not a capacity plan.
DEFAULT_MAX_CONNECTIONS = 10_000


class ServerHandler:
    """What a Listener calls on the loop thread; subclass it (frame_received is required)."""

    def connection_made(self, conn: "ServerConnection") -> None:
        """A client connected (after its TLS handshake). conn.session is free for per-connection state."""

    def frame_received(self, conn: "ServerConnection", frame: Any, reply: "Reply") -> None:
        """One request frame. Answer with reply(data) now or later, from any thread, exactly once.

        Raise ProtocolError for a malformed request: the connection is closed.
        """
        raise NotImplementedError

    def connection_lost(self, conn: "ServerConnection", error: BaseException) -> None:
        """The connection closed; pending replies are dropped."""


class Reply:
    """The one answer a request gets. reply(data) sends data (bytes-like or a list of them);
    reply(None) ends the request without a response (e.g. Kafka produce with acks=0)."""

    __slots__ = ("_conn", "_data", "_answered")

    def __init__(self, conn: "ServerConnection") -> None:
        self._conn = conn
        self._data: Any = _PENDING
        self._answered = False

    def __call__(self, data: Any = None) -> None:
        if self._answered:
            raise RuntimeError("this request was already answered; call a Reply once")
        if data is not None:
            # Check the buffers in the caller, where a TypeError can be understood.
            data = [as_buffer(part) for part in data] if type(data) in (list, tuple) else as_buffer(data)
        self._answered = True
        conn = self._conn
        # A closed loop closed its connections already: nobody is left to answer.
        conn.loop.call_or_hand_over(conn._answer, self, data)

    send = __call__

    @property
    def answered(self) -> bool:
        return self._answered


class ServerConnection(Stream):
    """One accepted client connection."""

    def __init__(self, listener: "Listener", sock: socket.socket, peer: Any) -> None:
        super().__init__(listener.loop, listener.splitter_factory(), metrics=listener.metrics,
                         recv_size=listener.recv_size)
        self.listener = listener
        self.handler = listener.handler
        self.peer = peer
        self.session: Any = None  # free for the handler: authenticated principal, negotiated versions, ...
        self.max_pending_replies = listener.max_pending_replies
        self._replies: deque[Reply] = deque()
        self._handshake_timer: TimerHandle | None = None
        sock.setblocking(False)
        # Responses leave as soon as they are flushed, as requests do on the client side.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._register(sock, EPOLLIN)

    def start(self) -> None:
        self.metrics.connections_created += 1
        context = self.listener.ssl_context
        if context is not None:
            self._handshake_timer = self.loop.call_later(self.listener.handshake_timeout, self._handshake_timed_out)
            self._start_tls(context, True, None)
        else:
            self._become_ready()

    def _tls_established(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self._become_ready()

    def start_tls(self, context: ssl.SSLContext, *, server_side: bool = True, server_hostname: str | None = None,
                  on_done: Callable[[], Any] | None = None, timeout: float | None = None) -> None:
        """Stream.start_tls; a client that does not finish the handshake within the listener's
        handshake_timeout (unless timeout says otherwise) is disconnected."""
        super().start_tls(context, server_side=server_side, server_hostname=server_hostname, on_done=on_done,
                          timeout=self.listener.handshake_timeout if timeout is None else timeout)

    def _become_ready(self) -> None:
        self._state = READY
        self._update_events()
        if self.listener.idle_reaper is not None:
            self.listener.idle_reaper.track(self)
        try:
            self.handler.connection_made(self)
        except Exception as exc:
            _log.exception("connection_made of %r failed for %s", self.handler, self)
            self.handle_error(exc)

    def _handshake_timed_out(self) -> None:
        self._handshake_timer = None
        if self._state is not READY:
            self.close(ConnectionClosedError(
                f"{self} did not finish the TLS handshake within {self.listener.handshake_timeout:.3g} s"))

    @property
    def pending_replies(self) -> int:
        return len(self._replies)

    def _on_frame(self, frame: Any) -> None:
        reply = Reply(self)
        replies = self._replies
        replies.append(reply)
        try:
            self.handler.frame_received(self, frame, reply)
        except ProtocolError:
            raise
        except Exception as exc:
            _log.exception("request handler %r failed on %s", self.handler, self)
            self.handle_error(exc)
            return
        # Checked after the handler, so that requests answered at once never toggle the epoll mask.
        if len(replies) >= self.max_pending_replies:
            self.pause_reading()

    def send_answer(self, data: Any) -> None:
        """send_frame for an answer made on the loop thread, written at once unless another request of this
        connection is already buffered (its answer will share the write): the answer leaves before the rest of
        the loop's turn (other connections' events, timers, callbacks, poll hooks), which a client waiting for
        it would otherwise wait through. Loop thread only."""
        self.send_frame(data)
        if self._codec is None and not self._splitter.buffered:
            self.flush()

    def _answer(self, reply: Reply, data: Any) -> None:
        if self._state is CLOSED:
            return
        reply._data = data
        replies = self._replies
        if replies[0] is not reply:
            return  # an earlier request is still unanswered; responses leave in request order
        while replies and replies[0]._data is not _PENDING:
            done = replies.popleft()
            if done._data is not None:
                self.enqueue(done._data)
            done._data = None
        if not self._reading and len(replies) < self.max_pending_replies:
            self.resume_reading()

    def _closed(self, previous: ConnectionState, error: BaseException) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self._replies.clear()
        self.listener._forget(self)
        if previous is READY:
            try:
                self.handler.connection_lost(self, error)
            except Exception:
                _log.exception("connection_lost of %r failed for %s", self.handler, self)
        else:
            _log.info("%s closed before it was ready: %s", self, error)

    def __str__(self) -> str:
        host, port = self.peer[:2] if isinstance(self.peer, tuple) else (self.peer, "")
        return f"connection from {host}:{port}"

    def __repr__(self) -> str:
        return f"<ServerConnection {self.peer!r} {self._state.name} pending_replies={len(self._replies)}>"


class Listener:
    """A listening TCP socket on an IOLoop; accepted connections get a splitter and the handler.

    At most max_connections are open at once (more are accepted and closed at once, counted in
    metrics.connections_rejected); the constructor makes sure the process may open that many files
    (fastmq.io.limits) and raises ConfigurationError when it may not.

    The socket is bound in the constructor (so `address` is known at once, port 0 picks a free one)
    and registered with the loop through call_soon_threadsafe: a Listener may be created from any
    thread, before or after the loop starts.
    """

    def __init__(
        self,
        loop: IOLoop,
        splitter_factory: Callable[[], Any],
        handler: ServerHandler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_pending_replies: int = 64,
        handshake_timeout: float = 10.0,
        connections_max_idle_ms: int | None = None,
        backlog: int = 128,
        recv_size: int = 65536,
        metrics: IOMetrics | None = None,
    ) -> None:
        if max_pending_replies < 1:
            raise ValueError(f"max_pending_replies must be at least 1, got {max_pending_replies}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        ensure_open_file_limit(max_connections)
        self.loop = loop
        self.splitter_factory = splitter_factory
        self.handler = handler
        self.ssl_context = ssl_context
        self.max_connections = max_connections
        self.max_pending_replies = max_pending_replies
        self.handshake_timeout = handshake_timeout
        self.recv_size = recv_size
        self.metrics = metrics if metrics is not None else IOMetrics()
        self.idle_reaper = (IdleReaper(loop, connections_max_idle_ms / 1000.0)
                            if connections_max_idle_ms else None)
        self.connections: set[ServerConnection] = set()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=backlog)
        self._sock.setblocking(False)
        self._fd = self._sock.fileno()
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        self._closed = False
        self._registered = False
        loop.call_soon_threadsafe(self._register)

    def _register(self) -> None:
        if not self._closed:
            self.loop.add_handler(self._fd, self, EPOLLIN)
            self._registered = True

    def handle_events(self, events: int) -> None:
        for _ in range(_ACCEPTS_PER_EVENT):
            try:
                sock, peer = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    _log.warning("%s cannot accept: %s; pausing accepts for %.1f s", self, exc, _ACCEPT_PAUSE)
                    self.loop.modify_handler(self._fd, 0)
                    self.loop.call_later(_ACCEPT_PAUSE, self._resume_accepting)
                return  # ECONNABORTED and friends concern one client only
            if len(self.connections) >= self.max_connections:
                self.metrics.connections_rejected += 1
                _log.warning("%s: connection from %s refused, max_connections=%d reached",
                             self, peer, self.max_connections)
                sock.close()
                continue
            try:
                conn = ServerConnection(self, sock, peer)
            except OSError as exc:
                _log.warning("%s: setting up the connection from %s failed: %s", self, peer, exc)
                sock.close()
                continue
            self.connections.add(conn)
            conn.start()

    def _resume_accepting(self) -> None:
        if not self._closed:
            self.loop.modify_handler(self._fd, EPOLLIN)

    def handle_error(self, error: BaseException) -> None:
        _log.error("%s failed; closing it", self, exc_info=error)
        self._close()

    def loop_stopped(self) -> None:
        self._close()

    def _forget(self, conn: ServerConnection) -> None:
        self.connections.discard(conn)
        if self.idle_reaper is not None:
            self.idle_reaper.untrack(conn)

    def close(self) -> None:
        """Stop listening and close every accepted connection (any thread; waits for the loop)."""
        if self.loop.in_loop_thread() or not self.loop.running:
            self._close()
            return
        try:
            self.loop.run_in_loop(self._close)
        except LoopClosedError:
            pass  # the loop's shutdown closed everything already

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._registered:
            self.loop.remove_handler(self._fd)
        self._sock.close()
        for conn in list(self.connections):
            conn.close(ConnectionClosedError(f"{conn} closed because its listener closed"))
        if self.idle_reaper is not None:
            self.idle_reaper.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __str__(self) -> str:
        return f"listener on {self.address[0]}:{self.address[1]}"

    def __repr__(self) -> str:
        return f"<Listener {self.address[0]}:{self.address[1]} connections={len(self.connections)}>"
