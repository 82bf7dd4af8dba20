"""NSQ channels on the store: a channel is a consumer group of a topic with its own read position per partition.

A topic is a broker topic; each partition is a store queue. A channel reads every partition from its cursor
(the first channel of a topic from the start of what is kept, later ones from the end, as nsqd gives a new
channel only what arrives after it), and hands messages to its subscribers while they have RDY room, round
robin. A delivered message is in flight until FIN; REQ puts it back (at once, or after a delay: a timer
heap), and so does the expiry of its msg_timeout (TOUCH restarts that). Every delivery adds one attempt.
A PUB_EXT message's JSON header is kept as NSQ_EXT_HEADER and sent to subscribers that
IDENTIFY'd with extend_support (ext version 4). A DPUB message is stored at once, marked NSQ_DEFER_UNTIL (ms since the epoch): a channel that reads it early
holds it in the delay heap until then.

Ordered subscribers (SUB_ORDERED) get one message at a time from their partition, and a requeued message comes
back before any later one. Youzan's dispatch tags and ext filters (fastmq.broker.nsq.filters) choose which
subscriber gets a PUB_EXT message, and skip the ones a subscriber's filter refuses. Loop thread only.

In-flight state lives in memory; what survives a restart is each partition's position (positions()): the lowest
queue offset not finished yet, which the front end commits as the channel's consumer offset. A channel that comes
back starts there: messages that were in flight or read ahead when the broker stopped are delivered again
(at least once, as nsqd's disk queue does after a crash).
"""
from __future__ import annotations

import heapq
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from fastmq.broker.nsq.filters import Filter, message_tag, parse_header
from fastmq.nsq._native import codec

DEFER_PROPERTY = "NSQ_DEFER_UNTIL"
MAX_DEFER_MS = 3_600_000           # nsqd's --max-req-timeout: the longest DPUB defer and REQ timeout
EXT_PROPERTY = "NSQ_EXT_HEADER"      # a PUB_EXT message's JSON header
READ_BATCH = 256


def message_id(partition: int, offset: int) -> bytes:
    """16 hex digits, as vanilla nsqd's ids: the partition (4) and the queue offset (12)."""
    return b"%04x%012x" % (partition, offset)


def parse_message_id(raw: bytes) -> tuple[int, int]:
    text = raw.decode("ascii", "replace")
    try:
        return int(text[:4], 16), int(text[4:], 16)
    except ValueError:
        raise KeyError(raw) from None


@dataclass
class Pending:
    """A message read from the store, waiting for or in delivery."""

    partition: int
    offset: int
    body: bytes
    timestamp_ns: int
    ext: bytes = b""
    header: Any = False            # the parsed JSON ext header, once a tag or a filter needed it
    attempts: int = 0
    deadline: float = 0.0
    subscriber: Any = None


@dataclass(eq=False)
class Subscriber:
    """One subscribed connection: send(frame) pushes a message frame; rdy its in-flight limit."""

    send: Callable[[bytes], None]
    partition: int | None          # None: every partition
    ordered: bool = False
    msg_timeout: float = 60.0
    flags: int = 0
    tag: str = ""                  # Youzan's desired_tag
    ext_filter: Filter | None = None
    rdy: int = 0
    in_flight: int = 0

    def room(self) -> int:
        limit = min(self.rdy, 1) if self.ordered else self.rdy
        return limit - self.in_flight


@dataclass(eq=False)
class Channel:
    topic: str
    name: str
    store: Any
    partitions: int
    cursors: list[int]
    subscribers: list[Subscriber] = field(default_factory=list)
    in_flight: dict[tuple[int, int], Pending] = field(default_factory=dict)
    ready: list[deque[Pending]] = field(default_factory=list)           # per partition: requeued, then read ahead
    delayed: list[tuple[float, int, int, Pending]] = field(default_factory=list)
    tags: dict[str, int] = field(default_factory=dict)          # desired tag -> subscribers with it
    _turn: int = 0

    def __post_init__(self) -> None:
        self.ready = [deque() for _ in range(self.partitions)]

    def seek(self, partition: int, offset: int) -> None:
        """Read the partition from this queue offset on (SUB_ADVANCED); what was read ahead is dropped."""
        store = self.store
        self.cursors[partition] = max(store.get_min_offset(self.topic, partition),
                                      min(offset, store.get_max_offset(self.topic, partition)))
        self.ready[partition].clear()

    def grow(self, partitions: int) -> None:
        while self.partitions < partitions:
            self.ready.append(deque())
            self.cursors.append(0)
            self.partitions += 1

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.append(subscriber)
        if subscriber.tag:
            self.tags[subscriber.tag] = self.tags.get(subscriber.tag, 0) + 1

    def positions(self) -> list[int]:
        """Per partition, the lowest queue offset not finished yet: where this channel resumes after a restart."""
        floors = list(self.cursors)
        waiting = [pending for queue in self.ready for pending in queue]
        waiting.extend(self.in_flight.values())
        waiting.extend(entry[3] for entry in self.delayed)
        for pending in waiting:
            if pending.offset < floors[pending.partition]:
                floors[pending.partition] = pending.offset
        return floors

    # ---- delivery ------------------------------------------------------------------------------------

    def _next(self, partition: int, now_ms: float) -> Pending | None:
        queue = self.ready[partition]
        while not queue:
            if not self._read(partition, now_ms):
                return None
        return queue.popleft()

    def _read(self, partition: int, now_ms: float) -> bool:
        result = self.store.get_messages(self.topic, partition, self.cursors[partition], READ_BATCH)
        messages = result.messages
        if not messages:
            if result.next_begin_offset > self.cursors[partition]:
                self.cursors[partition] = result.next_begin_offset
                return True
            return False
        for stored in messages:
            properties = stored.properties or {}
            pending = Pending(partition, stored.queue_offset, stored.body, stored.born_timestamp * 1_000_000,
                              properties.get(EXT_PROPERTY, "").encode())
            defer = properties.get(DEFER_PROPERTY)
            if defer is not None and float(defer) > now_ms:
                due = time.monotonic() + (float(defer) - now_ms) / 1000.0
                heapq.heappush(self.delayed, (due, partition, stored.queue_offset, pending))
            else:
                self.ready[partition].append(pending)
        self.cursors[partition] = result.next_begin_offset
        return True

    def dispatch(self) -> None:
        """Give messages to every subscriber with room, round robin (one message per turn)."""
        now = time.monotonic()
        now_ms = time.time() * 1000.0
        self._release_delayed(now)
        subscribers = self.subscribers
        while True:
            given = False
            count = len(subscribers)
            for step in range(count):
                subscriber = subscribers[(self._turn + step) % count]
                if subscriber.room() <= 0:
                    continue
                partitions = range(self.partitions) if subscriber.partition is None else (subscriber.partition,)
                for partition in partitions:
                    if partition >= self.partitions:
                        continue
                    if subscriber.ordered and any(p.partition == partition for p in self.in_flight.values()):
                        continue
                    if self._give(subscriber, partition, now, now_ms):
                        given = True
                        break
            self._turn += 1
            if not given:
                return

    def _give(self, subscriber: Subscriber, partition: int, now: float, now_ms: float) -> bool:
        """Deliver the partition's next message this subscriber may have; False when there is none."""
        while True:
            pending = self._next(partition, now_ms)
            if pending is None:
                return False
            if subscriber.ext_filter is None and not (self.tags and pending.ext):
                break
            if pending.header is False:
                pending.header = parse_header(pending.ext)
            if subscriber.ext_filter is not None and not subscriber.ext_filter(pending.header):
                continue                  # refused by the filter: finished for the channel
            tag = message_tag(pending.header)
            if tag and tag != subscriber.tag and tag in self.tags:
                self.ready[partition].appendleft(pending)     # it waits for a subscriber with its tag
                return False
            break
        self._deliver(subscriber, pending, now)
        return True

    def _deliver(self, subscriber: Subscriber, pending: Pending, now: float) -> None:
        pending.attempts += 1
        pending.deadline = now + subscriber.msg_timeout
        pending.subscriber = subscriber
        subscriber.in_flight += 1
        self.in_flight[(pending.partition, pending.offset)] = pending
        flags = subscriber.flags
        subscriber.send(codec.encode_message(pending.timestamp_ns, min(pending.attempts, 0xFFFF),
                                             message_id(pending.partition, pending.offset), pending.body,
                                             flags, codec.EXT_JSON_HEADER if pending.ext else codec.EXT_NONE,
                                             pending.ext, pending.offset, len(pending.body)))

    # ---- answers -------------------------------------------------------------------------------------

    def _take(self, subscriber: Subscriber, raw_id: bytes) -> Pending:
        key = parse_message_id(raw_id)
        pending = self.in_flight.get(key)
        if pending is None or pending.subscriber is not subscriber:
            raise KeyError(raw_id)
        del self.in_flight[key]
        subscriber.in_flight -= 1
        pending.subscriber = None
        return pending

    def finish(self, subscriber: Subscriber, raw_id: bytes) -> None:
        self._take(subscriber, raw_id)

    def requeue(self, subscriber: Subscriber, raw_id: bytes, delay_ms: int) -> None:
        pending = self._take(subscriber, raw_id)
        self._put_back(pending, delay_ms / 1000.0)

    def touch(self, subscriber: Subscriber, raw_id: bytes) -> None:
        pending = self.in_flight.get(parse_message_id(raw_id))
        if pending is None or pending.subscriber is not subscriber:
            raise KeyError(raw_id)
        pending.deadline = time.monotonic() + subscriber.msg_timeout

    def _put_back(self, pending: Pending, delay: float) -> None:
        if delay > 0:
            heapq.heappush(self.delayed, (time.monotonic() + delay, pending.partition, pending.offset, pending))
        else:
            # Before what was read ahead: the oldest first, and ordered partitions keep their order.
            self.ready[pending.partition].appendleft(pending)

    def _release_delayed(self, now: float) -> None:
        delayed = self.delayed
        while delayed and delayed[0][0] <= now:
            _, partition, _, pending = heapq.heappop(delayed)
            self.ready[partition].appendleft(pending)

    def expire(self) -> None:
        """Put back the in-flight messages whose timeout passed (as nsqd's queue scan does)."""
        now = time.monotonic()
        for key, pending in list(self.in_flight.items()):
            if pending.deadline <= now:
                del self.in_flight[key]
                pending.subscriber.in_flight -= 1
                pending.subscriber = None
                self._put_back(pending, 0)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """A connection went away: its in-flight messages go back at once."""
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)
            if subscriber.tag:
                left = self.tags.pop(subscriber.tag) - 1
                if left:
                    self.tags[subscriber.tag] = left
        for key, pending in list(self.in_flight.items()):
            if pending.subscriber is subscriber:
                del self.in_flight[key]
                pending.subscriber = None
                self._put_back(pending, 0)
        subscriber.in_flight = 0

    def depth(self) -> int:
        waiting = sum(len(queue) for queue in self.ready) + len(self.delayed)
        for partition in range(self.partitions):
            waiting += max(0, self.store.get_max_offset(self.topic, partition) - self.cursors[partition])
        return waiting
