"""What the proxy needs from a broker, whatever its protocol: produce, the queues of a topic with their offsets,
and a pull of one queue from an offset. A backend names its queues "<broker>:<number>" (Kafka: "kafka:<partition>";
RocketMQ: "<brokerName>:<queueId>"), the first two parts of an ack token."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from fastmq.errors import FastMQError
from fastmq.proxy.state import QueueBounds


class BackendError(FastMQError):
    """The broker refused or could not be reached (the HTTP layer answers 502, or 404 for an unknown topic)."""

    def __init__(self, message: str, *, unknown_topic: bool = False) -> None:
        super().__init__(message)
        self.unknown_topic = unknown_topic


@dataclass(frozen=True)
class OutgoingMessage:
    value: bytes
    key: bytes | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    tags: str | None = None


@dataclass(frozen=True)
class SentMessage:
    """Where the broker put a message."""

    queue: str
    offset: int
    timestamp: int


@dataclass(frozen=True)
class PulledMessage:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class PullResult:
    """Messages from `offset` on, the offset after them (it may pass offsets that hold no message, such as
    transaction markers), and the queue's end offset as the broker answered it."""

    messages: list[PulledMessage]
    next_offset: int
    high: int


class Backend(ABC):
    """A broker behind the proxy. Coroutines run on the proxy's event loop and never block it."""

    broker: str
    """The first part of this backend's queue names."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None:
        """Send what is queued, then close."""

    @abstractmethod
    async def produce(self, topic: str, messages: list[OutgoingMessage]) -> list[SentMessage]:
        """Send the messages (in order) and wait for the broker's answer to each."""

    @abstractmethod
    async def queues(self, topic: str, max_age: float) -> list[QueueBounds]:
        """Every queue of the topic with its first and end offsets, known within the last max_age seconds."""

    @abstractmethod
    async def pull(self, topic: str, queue: str, offset: int, max_messages: int, max_bytes: int) -> PullResult:
        """Up to max_messages messages (about max_bytes at most, but at least one) from offset on."""

    @abstractmethod
    async def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[str, int]:
        """Per queue, the first offset whose message is at or after the time (the end offset when none is)."""

    def observed(self, topic: str, queue: str, high: int) -> None:
        """A newer end offset of a queue, learnt from a pull or a produce."""
