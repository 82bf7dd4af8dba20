"""fastmq.io: the protocol-agnostic network engine shared by every client and the embedded broker.

IOLoop (one epoll thread), Connection (client side, pipelined requests matched by correlation id or
FIFO), ConnectionPool (one connection per node, backoff, idle reaping), Listener/ServerConnection
(server side), ProtocolAdapter (what a protocol tells the engine), tls and sasl helpers.
"""
from __future__ import annotations

from fastmq.io.adapter import ProtocolAdapter
from fastmq.io.connection import DEFAULT_SOCKET_OPTIONS, Connection
from fastmq.io.errors import (
    AuthenticationError,
    ConnectFailedError,
    ConnectionClosedError,
    ConnectTimeoutError,
    IdleConnectionClosedError,
    LoopClosedError,
    NetworkError,
    NotReadyError,
    RequestTimeoutError,
    TLSError,
    TooManyInFlightError,
)
from fastmq.io.loop import IOLoop, TimerHandle
from fastmq.io.metrics import IOMetrics
from fastmq.io.pool import ConnectionPool, ReconnectBackoff
from fastmq.io.server import Listener, Reply, ServerConnection, ServerHandler
from fastmq.io.stream import ConnectionState

__all__ = [
    "AuthenticationError", "ConnectFailedError", "Connection", "ConnectionClosedError", "ConnectionPool",
    "ConnectionState", "ConnectTimeoutError", "DEFAULT_SOCKET_OPTIONS", "IOLoop", "IOMetrics",
    "IdleConnectionClosedError", "Listener", "LoopClosedError", "NetworkError", "NotReadyError",
    "ProtocolAdapter", "ReconnectBackoff", "Reply", "RequestTimeoutError", "ServerConnection",
    "ServerHandler", "TLSError", "TimerHandle", "TooManyInFlightError",
]
