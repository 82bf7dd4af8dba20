"""What the proxy needs from a broker, whatever its protocol: produce, the queues of a topic with their offsets,
and a pull of one queue from an offset. A backend names its queues "<broker>:<number>" (Kafka: "kafka:<partition>";
RocketMQ: "<brokerName>:<queueId>"), the first two parts of an ack token. Two backends: kafka_backend (fastmq.kafka)
and rocketmq_backend (fastmq.rocketmq)."""
from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from fastmq.errors import FastMQError
from fastmq.proxy.state import QueueBounds


class BackendError(FastMQError):
    """The broker refused or could not be reached (the HTTP layer answers 502, or 404 for an unknown topic)."""

    def __init__(self, message: str, *, unknown_topic: bool = False, bad_message: bool = False) -> None:
        super().__init__(message)
        self.unknown_topic = unknown_topic
        self.bad_message = bad_message          # the broker's protocol cannot carry what was asked (400)


@dataclass(slots=True)
class OutgoingMessages:
    """The messages of one produce request, as columns (a Python object per message would cost more than its
    send): values[i], and keys, headers and tags when a message has one (None otherwise: then every entry is
    None, or an entry holds None for a message without)."""

    values: list[bytes]
    keys: list[bytes | None] | None = None
    headers: list[list[tuple[str, bytes]] | None] | None = None
    tags: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def message(self, index: int) -> tuple[bytes, bytes | None, list[tuple[str, bytes]], str | None]:
        """Message `index`'s value, key, headers and tags."""
        return (self.values[index], None if self.keys is None else self.keys[index],
                (None if self.headers is None else self.headers[index]) or [],
                None if self.tags is None else self.tags[index])


@dataclass(slots=True)
class SentMessages:
    """Where the broker put a produce request's messages: `results` is the JSON text of an array with one object
    per message, in order: {"queue", "offset", "timestamp" (-1 when the broker answered no time), and "id" where
    the protocol gives messages ids (RocketMQ's msgId)}. A backend writes it as it likes (Kafka's from the
    producer's records in C: a Python object per message would cost more than its send)."""

    results: bytes
    count: int


@dataclass(slots=True)
class PulledMessage:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(slots=True)
class PullResult:
    """Messages from `offset` on, the offset after them (it may pass offsets that hold no message, such as
    transaction markers), and the queue's end offset as the broker answered it."""

    messages: list[PulledMessage]
    next_offset: int
    high: int


class Backend(ABC):
    """A broker behind the proxy. Coroutines run on the proxy's event loop and never block it.

    The queues' offsets that every /message starts from are kept here per topic: asked of the broker (fetch_bounds)
    when older than the caller allows, by one task per topic at a time, and moved on by what pulls and produces
    learn (observed). queues() hands out the same list object until the bounds change (ConsumerState encodes a
    list's script arguments once)."""

    def __init__(self) -> None:
        # topic -> (monotonic time learnt, {queue: [low, high]})
        self._bounds: dict[str, tuple[float, dict[str, list[int]]]] = {}
        self._refreshing: dict[str, asyncio.Future[None]] = {}
        self._answers: dict[str, list[QueueBounds]] = {}
        self.broker_requests = 0

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None:
        """Send what is queued, then close."""

    @abstractmethod
    async def produce(self, topic: str, messages: OutgoingMessages) -> SentMessages:
        """Send the messages (in order) and wait for the broker's answer to each."""

    @abstractmethod
    async def fetch_bounds(self, topic: str) -> dict[str, tuple[int, int]]:
        """Ask the broker: queue -> (first offset, end offset) of every queue of the topic."""

    @abstractmethod
    async def pull(self, topic: str, queue: str, offset: int, max_messages: int, max_bytes: int) -> PullResult:
        """Up to max_messages messages (about max_bytes at most, but at least one) from offset on."""

    @abstractmethod
    async def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[str, int]:
        """Per queue, the first offset whose message is at or after the time (the end offset when none is)."""

    async def _refresh_bounds(self, topic: str) -> None:
        fetched = await self.fetch_bounds(topic)
        known = self._bounds.get(topic, (0.0, {}))[1]
        bounds = {queue: [low, max(high, known.get(queue, [0, 0])[1])] for queue, (low, high) in fetched.items()}
        self._bounds[topic] = (time.monotonic(), bounds)
        self._answers.pop(topic, None)

    async def queues(self, topic: str, max_age: float) -> list[QueueBounds]:
        """Every queue of the topic with its first and end offsets, known within the last max_age seconds."""
        learnt = self._bounds.get(topic)
        if learnt is None or time.monotonic() - learnt[0] > max_age:
            running = self._refreshing.get(topic)
            if running is None:
                running = asyncio.ensure_future(self._refresh_bounds(topic))
                self._refreshing[topic] = running
                running.add_done_callback(lambda _: self._refreshing.pop(topic, None))
            await asyncio.shield(running)
        answer = self._answers.get(topic)
        if answer is None:
            answer = self._answers[topic] = [QueueBounds(queue, low, high)
                                             for queue, (low, high) in self._bounds[topic][1].items()]
        return answer

    def observed(self, topic: str, queue: str, high: int) -> None:
        """A newer end offset of a queue, learnt from a pull or a produce."""
        learnt = self._bounds.get(topic)
        if learnt is not None:
            bounds = learnt[1].get(queue)
            if bounds is not None and high > bounds[1]:
                bounds[1] = high
                self._answers.pop(topic, None)

    def forget(self, topic: str) -> None:
        """Ask the broker again next time (a pull found the queues moved)."""
        self._bounds.pop(topic, None)
