"""TubeMQ errors: the result codes of TErrCodeConstants, and the exceptions that carry them."""
from __future__ import annotations

import enum

from fastmq.errors import FastMQError


class ErrorCode(enum.IntEnum):
    """TubeMQ's TErrCodeConstants: the errCode of every response."""

    SUCCESS = 200
    NOT_READY = 201
    MOVED = 301
    BAD_REQUEST = 400
    UNAUTHORIZED = 401
    FORBIDDEN = 403
    NOT_FOUND = 404
    ALL_PARTITION_FROZEN = 405
    NO_PARTITION_ASSIGNED = 406
    ALL_PARTITION_WAITING = 407
    ALL_PARTITION_INUSE = 408
    PARTITION_OCCUPIED = 410
    HB_NO_NODE = 411
    DUPLICATE_PARTITION = 412
    CERTIFICATE_FAILURE = 415
    SERVER_RECEIVE_OVERFLOW = 419
    CLIENT_SHUTDOWN = 420
    CLIENT_HIGH_FREQUENCY_REQUEST = 421
    PARTITION_UNSUBSCRIBABLE = 422
    PARTITION_UNPUBLISHABLE = 423
    TOPIC_NOT_DEPLOYED = 431
    CONSUME_GROUP_FORBIDDEN = 450
    SERVER_CONSUME_SPEED_LIMIT = 452
    CONSUME_CONTENT_FORBIDDEN = 455
    INTERNAL_SERVER_ERROR = 500
    SERVICE_UNAVAILABLE = 503


# The Java client's pause after a getMessage answered with these codes (seconds).
GET_MESSAGE_BACKOFF = {ErrorCode.NOT_FOUND: 0.4, ErrorCode.FORBIDDEN: 2.0, ErrorCode.SERVICE_UNAVAILABLE: 0.3,
                       ErrorCode.MOVED: 0.2}
# getMessage codes after which the Java client gives the partition up.
GET_MESSAGE_DROPS_PARTITION = frozenset({ErrorCode.HB_NO_NODE, ErrorCode.CERTIFICATE_FAILURE,
                                         ErrorCode.DUPLICATE_PARTITION})


class TubeMQError(FastMQError):
    """A TubeMQ server answered with an error code (`code`, an ErrorCode when TubeMQ defines it)."""

    def __init__(self, code: int, message: str) -> None:
        try:
            code = ErrorCode(code)
        except ValueError:
            pass
        self.code = code
        name = code.name if isinstance(code, ErrorCode) else "unknown code"
        super().__init__(f"TubeMQ error {int(code)} ({name}): {message}")


class RemoteException(FastMQError):
    """A server answered a request with an exception response (its Java exception class and stack trace)."""

    def __init__(self, exception_name: str, stack_trace: str = "") -> None:
        self.exception_name = exception_name
        self.stack_trace = stack_trace
        first_line = stack_trace.strip().splitlines()[0] if stack_trace.strip() else ""
        super().__init__(f"{exception_name}: {first_line}" if first_line else exception_name)

    @staticmethod
    def from_exception(exception_name: str, stack_trace: str = "") -> RemoteException:
        if "StandbyException" in exception_name:
            return StandbyError(exception_name, stack_trace)
        return RemoteException(exception_name, stack_trace)


class StandbyError(RemoteException):
    """The master asked is a standby: the client moves on to the next master of its list."""


class NoMasterError(FastMQError):
    """No master of the list answered as the active one."""
