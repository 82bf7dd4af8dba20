"""The root of fastmq's exceptions.

Each protocol package (fastmq.kafka, fastmq.tubemq, ...) maps its wire error codes onto subclasses of
these. `retriable` says whether repeating the same operation may succeed.
"""
from __future__ import annotations


class FastMQError(Exception):
    """Base class of every exception fastmq raises on purpose."""

    retriable = False


class ConfigurationError(FastMQError, ValueError):
    """A setting is unknown, out of range, or inconsistent with another one."""


class ProtocolError(FastMQError):
    """Bytes that do not follow the wire or file format. The connection that produced them is closed."""


class TruncatedError(ProtocolError):
    """The input ended before the structure it announces did."""


class FrameTooLargeError(ProtocolError):
    """A length field announces more bytes than the configured maximum; nothing was allocated for it."""


class CorruptDataError(ProtocolError):
    """A checksum does not match, or a length or count contradicts the data around it."""


class CompressionError(CorruptDataError):
    """Compressed data could not be decompressed, or would decompress beyond the allowed size."""


class UnsupportedCodecError(FastMQError):
    """A compression codec is unknown, or its library is not installed."""


class IllegalStateError(FastMQError):
    """The operation is not allowed in the object's current state (e.g. sending after close())."""


class OperationTimeoutError(FastMQError):
    """An operation did not complete within its time limit (e.g. waiting for buffer memory)."""

    retriable = True
