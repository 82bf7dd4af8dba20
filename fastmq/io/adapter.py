"""The protocol adapter: the few protocol facts the network engine needs (one small class per protocol).

The engine knows nothing about any wire format. An adapter tells it how to cut the byte stream into
frames (make_splitter), which pending request a received frame answers (correlation_id, or FIFO order
for protocols without ids), what to do with frames that answer nothing (on_unsolicited: by default the
connection's push callback gets them: pushed messages, heartbeats, requests the server sends) and how to
bring a fresh connection to the ready state (start_handshake, by default the handshake_steps() in order:
magic bytes, Kafka's ApiVersions, NSQ's IDENTIFY with its TLS and compression upgrades, SASL).

One adapter instance serves one connection, so it may keep per-connection state (negotiated versions).
This module names the connection only through AdapterConnection, what an adapter may do with it, so
that it does not import fastmq.io.connection (which imports it).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from fastmq.errors import ProtocolError

Callback = Callable[[Any, BaseException | None], Any]


class AdapterConnection(Protocol):
    """What an adapter and its handshake steps may use of a connection (fastmq.io.Connection is one)."""

    on_push: Callable[[Any, Any], Any] | None

    def next_correlation_id(self) -> int: ...

    def handshake_request(self, data: Any, callback: Callback | None = None, correlation_id: int | None = None,
                          *, expect_response: bool = True, timeout: float | None = None) -> None: ...

    def expect_frame(self, callback: Callback | None, correlation_id: int | None = None, *,
                     timeout: float | None = None) -> None: ...

    def send_frame(self, data: Any) -> None: ...

    def start_tls(self, context: Any, *, server_side: bool, server_hostname: str | None = None,
                  on_done: Callable[[], Any] | None = None, timeout: float | None = None) -> None: ...

    def start_compression(self, codec: Any) -> None: ...

    def handshake_done(self) -> None: ...

    def close(self, error: BaseException | None = None) -> None: ...


class HandshakeStep:
    """One stage of a connection's handshake: start() sends what it needs with conn.handshake_request()
    and calls done() once its exchange succeeded, or conn.close(error) when it failed (AuthenticationError
    for refused credentials). Steps may upgrade the stream (conn.start_tls, conn.start_compression)."""

    def start(self, conn: AdapterConnection, done: Callable[[], None]) -> None:
        raise NotImplementedError


def run_handshake_steps(conn: AdapterConnection, steps: Sequence[HandshakeStep], finished: Callable[[], None]) -> None:
    """Start steps[0]; each step's done() starts the next; finished() runs after the last one."""
    if not steps:
        finished()
        return
    rest = steps[1:]
    steps[0].start(conn, lambda: run_handshake_steps(conn, rest, finished))


class ProtocolAdapter:
    """Base class; subclasses override make_splitter and correlation_id, and usually handshake_steps."""

    # True for protocols whose responses carry no id and come back in request order (NSQ): a frame for
    # which correlation_id() is not None then answers the oldest pending request.
    fifo: bool = False

    def make_splitter(self) -> Any:
        """A new frame splitter (fastmq._native.frames) with feed/writable/commit/next_frame/take_buffered."""
        raise NotImplementedError

    def correlation_id(self, frame: Any) -> int | None:
        """The id of the request this frame answers; None for a frame that answers no request.

        Raise ProtocolError for a frame too short to carry one: the connection is closed.
        """
        raise NotImplementedError

    def on_unsolicited(self, conn: AdapterConnection, frame: Any) -> None:
        """A frame that answers no request arrived: it goes to conn.on_push, the callback the connection's
        owner set for pushed frames; without one, the frame breaks the protocol."""
        if conn.on_push is None:
            raise ProtocolError(f"{conn} received a frame that answers no request ({len(frame)} bytes)")
        conn.on_push(conn, frame)

    def handshake_steps(self) -> Sequence[HandshakeStep]:
        """The steps that bring a fresh connection to READY, in order; none by default."""
        return ()

    def start_handshake(self, conn: AdapterConnection) -> None:
        """Called once the transport (TCP, then TLS) is up; the connection is in the HANDSHAKE state.

        Runs handshake_steps() in order, then conn.handshake_done(). An adapter may override it instead and
        call conn.handshake_done() itself. The connect timeout covers the whole handshake.
        """
        run_handshake_steps(conn, self.handshake_steps(), conn.handshake_done)
