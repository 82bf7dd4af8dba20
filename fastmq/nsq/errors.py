"""NSQ's exceptions: one class per error code nsqd (vanilla and Youzan's) puts in an error frame.

An error frame's data is "E_CODE description". `fatal` says whether nsqd closes the connection after it
(E_FIN_FAILED, E_REQ_FAILED and E_TOUCH_FAILED are the only ones that leave it open); `lookup_again` says whether
the client should close the connection and look the topic up again (Youzan's leader moved, the partition is not
writable, or the topic is gone). for_frame() maps error frame data to an instance; unknown codes get NSQServerError.

The compiled codec imports this module, so it imports nothing from fastmq except fastmq.errors.
"""
from __future__ import annotations

from fastmq.errors import FastMQError


class NSQError(FastMQError):
    """Base class of every NSQ exception."""


class NSQConfigurationError(NSQError, ValueError):
    """A setting or an argument the protocol cannot carry (a bad topic name, a body too large, ...)."""


class NSQNoConnectionsError(NSQError):
    """No nsqd is connected that could take this request (none found by lookup, or all down)."""


class NSQServerError(NSQError):
    """An error frame from nsqd: .code (E_...) and .description."""

    code = "E_UNKNOWN"
    fatal = True
    lookup_again = False

    def __init__(self, description: str = "", code: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.description = description
        super().__init__(f"{self.code} {description}".rstrip())


_NON_FATAL = ("E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED")
_LOOKUP_AGAIN = ("E_FAILED_ON_NOT_LEADER", "E_FAILED_ON_NOT_WRITABLE", "E_TOPIC_NOT_EXIST")
_KNOWN_CODES = (
    "E_INVALID", "E_BAD_BODY", "E_BAD_TOPIC", "E_BAD_CHANNEL", "E_BAD_MESSAGE", "E_PUB_FAILED", "E_MPUB_FAILED",
    "E_DPUB_FAILED", "E_SUB_FAILED", "E_IDENTIFY_FAILED", "E_AUTH_FIRST", "E_AUTH_FAILED", "E_UNAUTHORIZED",
    "E_AUTH_DISABLED", *_NON_FATAL, *_LOOKUP_AGAIN, "E_BAD_PARTITION", "E_SUB_ORDER_IS_MUST", "E_SUB_EXTEND_NEED",
    "E_SUB_EXTEND_FORBIDDON", "E_SUB_CHANNEL_NOT_REGISTERED", "E_PUB_TOO_MUCH_WAITING", "E_EXT_NOT_SUPPORT",
    "E_INVALID_JSON_HEADER",
)


def _class_name(code: str) -> str:
    return "NSQ" + "".join(part.capitalize() for part in code[2:].split("_")) + "Error"


ERROR_CLASSES: dict[str, type[NSQServerError]] = {
    code: type(_class_name(code), (NSQServerError,), {
        "code": code, "fatal": code not in _NON_FATAL, "lookup_again": code in _LOOKUP_AGAIN,
        "__doc__": f"nsqd answered {code}.", "__module__": __name__})
    for code in _KNOWN_CODES
}
globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})


def for_frame(data: bytes) -> NSQServerError:
    """The exception for an error frame's data ("E_CODE description")."""
    text = data.decode("utf-8", "replace")
    code, _, description = text.partition(" ")
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return NSQServerError(description, code=code or "E_UNKNOWN")
    return cls(description)
