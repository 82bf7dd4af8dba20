"""RocketMQ errors: a broker's or namesrv's response code as an exception, and which ones a retry may cure."""
from __future__ import annotations

from fastmq.errors import FastMQError
from fastmq.rocketmq.protocol import ResponseCode


class RocketMQError(FastMQError):
    """A RocketMQ peer answered with an error code (`code`, with its `remark`), or the client gave up."""

    code: int | None = None

    def __init__(self, message: str, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.remark = remark


class BrokerError(RocketMQError):
    """A broker refused a request; retriable for codes that a retry (on another broker) may cure."""


class TopicNotFoundError(RocketMQError):
    """The namesrv knows no route for the topic (create it, or enable autoCreateTopicEnable on the broker)."""

    code = ResponseCode.TOPIC_NOT_EXIST


class SendFailedError(RocketMQError):
    """Every attempt of a send failed within its timeout; __cause__ is the last failure."""


class SendBufferFullError(RocketMQError):
    """The client's unfinished requests held max_pending_bytes for the whole send timeout (the broker takes them
    slower than they are sent)."""

    retriable = True


# Codes for which Java's producer retries on another broker (DefaultMQProducerImpl.sendDefaultImpl).
RETRIABLE_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION, ResponseCode.SYSTEM_BUSY, ResponseCode.SUBSCRIPTION_NOT_EXIST,
    ResponseCode.SUBSCRIPTION_NOT_LATEST,
})


def broker_error(code: int, remark: str | None, what: str) -> BrokerError:
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = f"code {code}"
    error = BrokerError(f"{what} failed: {name}: {remark or 'no remark'}", code, remark)
    error.retriable = code in RETRIABLE_CODES
    return error
