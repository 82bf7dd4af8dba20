"""The errors of fastmq.io, one tree under fastmq.errors.FastMQError; protocol packages map them onto their
own names (kafka-python's, ...).

    FastMQError
      EngineError                 everything fastmq.io raises on purpose (bad bytes: fastmq.errors.ProtocolError)
        NetworkError              retriable: connecting failed, the connection was lost, a request timed out
        TLSError, AuthenticationError, UpgradeError, LoopClosedError

`retriable` follows the root hierarchy in fastmq.errors: a retriable error means the same request may
succeed on a new connection (after the reconnect backoff); a non-retriable one needs a configuration fix.
"""
from __future__ import annotations

from fastmq.errors import FastMQError


class EngineError(FastMQError):
    """Base class of the errors of the network engine (fastmq.io)."""


class NetworkError(EngineError):
    """A connection could not be made or was lost. Retry: the client reconnects with backoff."""

    retriable = True


class ConnectFailedError(NetworkError):
    """The peer refused the connection or could not be reached (no route, name not resolved)."""


class ConnectTimeoutError(NetworkError):
    """The connection did not become ready (TCP, TLS and protocol handshake) within the connect timeout."""


class RequestTimeoutError(NetworkError):
    """No response arrived within the request timeout; the connection was closed, as Kafka's clients do,
    because a late response could no longer be told apart from the next one."""


class ConnectionClosedError(NetworkError):
    """The connection closed (by the peer, by a protocol error, by a timeout of another request or by
    close()) while this request was pending. Whether the request took effect is unknown."""


class IdleConnectionClosedError(ConnectionClosedError):
    """The client closed a connection that saw no traffic for connections_max_idle_ms; it reconnects
    on demand, without backoff."""


class NotReadyError(NetworkError):
    """A request was sent on a connection that is still connecting or already closed; wait until the
    connection is ready (ConnectionPool.is_ready) before sending."""


class TooManyInFlightError(NetworkError):
    """The connection already has max_in_flight requests awaiting responses; wait for one to complete
    (ConnectionPool.can_send says when sending is possible)."""


class TLSError(EngineError):
    """The TLS handshake failed for a reason a retry does not fix: an untrusted or expired certificate, a
    host name that does not match, no shared protocol or cipher. Check the ssl_* settings."""


class AuthenticationError(EngineError):
    """SASL authentication failed: wrong credentials, an unsupported mechanism, or a server that could not
    prove it knows the password. Check sasl_mechanism and the credentials."""


class UpgradeError(EngineError):
    """An in-place upgrade of a live connection (TLS, compression) was asked for at a point where it cannot
    happen: the connection is not open, the layer is already on, or the peer sent bytes past the upgrade
    point that the new layer cannot take. The connection is closed; check the protocol's handshake order."""


class LoopClosedError(EngineError):
    """Work was handed to an IOLoop that has stopped; create a new client (and with it a new loop)."""
