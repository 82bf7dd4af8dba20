"""fastmq.io: the protocol-agnostic network engine shared by every client and the embedded broker.

IOLoop (one epoll thread), Connection (client side, pipelined requests matched by correlation id or
FIFO, frames that answer no request to on_push), ConnectionPool (one connection per node, backoff, idle
reaping), Listener/ServerConnection (server side, replies in request order, send_frame for pushes),
ProtocolAdapter with HandshakeStep (what a protocol tells the engine, and how a connection gets ready),
in-place upgrades of a live stream (Stream.start_tls, Stream.start_compression with the codecs of
fastmq.io.codecs), tls and sasl helpers; fastmq.io.errors holds the one error tree.
"""
from __future__ import annotations

from fastmq.io.adapter import HandshakeStep, ProtocolAdapter
from fastmq.io.codecs import DeflateStream, SnappyStream, StreamCodec
from fastmq.io.connection import DEFAULT_SOCKET_OPTIONS, Connection
from fastmq.io.errors import (
    AuthenticationError,
    ConnectFailedError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EngineError,
    IdleConnectionClosedError,
    LoopClosedError,
    NetworkError,
    NotReadyError,
    RequestTimeoutError,
    TLSError,
    TooManyInFlightError,
    UpgradeError,
)
from fastmq.io.loop import IOLoop, TimerHandle
from fastmq.io.metrics import IOMetrics
from fastmq.io.pool import ConnectionPool, ReconnectBackoff
from fastmq.io.server import DEFAULT_MAX_CONNECTIONS, Listener, Reply, ServerConnection, ServerHandler
from fastmq.io.stream import ConnectionState

__all__ = [
    "AuthenticationError", "ConnectFailedError", "Connection", "ConnectionClosedError", "ConnectionPool",
    "ConnectionState", "ConnectTimeoutError", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_SOCKET_OPTIONS", "DeflateStream",
    "EngineError", "HandshakeStep", "IOLoop", "IOMetrics", "IdleConnectionClosedError", "Listener",
    "LoopClosedError", "NetworkError", "NotReadyError", "ProtocolAdapter", "ReconnectBackoff", "Reply",
    "RequestTimeoutError", "ServerConnection", "ServerHandler", "SnappyStream", "StreamCodec", "TLSError",
    "TimerHandle", "TooManyInFlightError", "UpgradeError",
]
