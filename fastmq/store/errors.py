"""Exceptions of the message store.

`code` is the RocketMQ response code a broker answers with when the store refuses an operation
(SYSTEM_ERROR 1, MESSAGE_ILLEGAL 13, SERVICE_NOT_AVAILABLE 14). Bytes that do not decode as a record raise the
core's CorruptDataError / TruncatedError (fastmq.errors); damaged store files raise CorruptStoreError.
"""
from __future__ import annotations

from fastmq.errors import ConfigurationError, CorruptDataError, FastMQError, ProtocolError

SYSTEM_ERROR = 1
MESSAGE_ILLEGAL = 13
SERVICE_NOT_AVAILABLE = 14


class StoreError(FastMQError):
    """Base class of the store's exceptions."""

    code = SYSTEM_ERROR


class StoreConfigError(StoreError, ConfigurationError):
    """A MessageStoreConfig value is out of range, or the files on disk were written with other sizes."""


class StoreLockedError(StoreError):
    """Another process has the store directory open for writing (its `lock` file is held)."""


class ServiceNotAvailableError(StoreError):
    """The store does not accept writes now: it is closed, read-only, or a slave."""

    code = SERVICE_NOT_AVAILABLE


class StoreClosedError(ServiceNotAvailableError):
    """The store was closed."""


class ReadOnlyStoreError(ServiceNotAvailableError):
    """The store was opened read-only (or is an HA slave); only the master's replication writes to a slave."""


class DiskFullError(ServiceNotAvailableError):
    """Disk usage is above disk_space_warning_level_ratio: writes are refused until cleanup frees space."""

    retriable = True


class MessageIllegalError(StoreError, ValueError):
    """The message cannot be stored as given (too large, bad topic name, bad properties)."""

    code = MESSAGE_ILLEGAL


class CorruptStoreError(StoreError, CorruptDataError):
    """A store file (CommitLog, ConsumeQueue, index, checkpoint, config) is damaged beyond what recovery repairs.
    The message names the file; move it aside or restore it from a replica."""


class HAProtocolError(StoreError, ProtocolError):
    """The replication stream between master and slave broke its framing or its offsets; the connection closes."""
