"""The protocol adapter: the few protocol facts the network engine needs (one small class per protocol).

The engine knows nothing about any wire format. An adapter tells it how to cut the byte stream into
frames (make_splitter), which pending request a received frame answers (correlation_id, or FIFO order
for protocols without ids), what to do with frames that answer nothing (on_unsolicited: pushed
messages, heartbeats) and how to bring a fresh connection to the ready state (start_handshake: e.g.
Kafka's ApiVersions and SASL exchange, NSQ's magic and IDENTIFY).

One adapter instance serves one connection, so it may keep per-connection state (negotiated versions).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastmq.errors import ProtocolError

if TYPE_CHECKING:
    from fastmq.io.connection import Connection


class ProtocolAdapter:
    """Base class; subclasses override make_splitter and correlation_id, and usually start_handshake."""

    # True for protocols whose responses carry no id and come back in request order (NSQ): a frame for
    # which correlation_id() is not None then answers the oldest pending request.
    fifo: bool = False

    def make_splitter(self) -> Any:
        """A new frame splitter (fastmq._native.frames) with feed/writable/commit/next_frame."""
        raise NotImplementedError

    def correlation_id(self, frame: Any) -> int | None:
        """The id of the request this frame answers; None for a frame that answers no request.

        Raise ProtocolError for a frame too short to carry one: the connection is closed.
        """
        raise NotImplementedError

    def on_unsolicited(self, conn: "Connection", frame: Any) -> None:
        """A frame that answers no request arrived; by default that breaks the protocol."""
        raise ProtocolError(f"{conn} received a frame that answers no request ({len(frame)} bytes)")

    def start_handshake(self, conn: "Connection") -> None:
        """Called once the transport (TCP, then TLS) is up; the connection is in the HANDSHAKE state.

        Send handshake frames with conn.handshake_request() and, when the exchange has succeeded, call
        conn.handshake_done(); on failure call conn.close(error) (AuthenticationError for refused
        credentials). The connect timeout covers the whole handshake. The default has no handshake.
        """
        conn.handshake_done()
