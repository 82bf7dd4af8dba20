"""Fetch sessions (KIP-227) and the plan of a Fetch: which partitions it reads, from which offsets.

A consumer with many partitions need not send them all in every Fetch: its first (full) request, with session
epoch 0, creates a session that remembers each partition's fetch offset and size limit; later (incremental)
requests carry the session id, the next epoch, only the partitions whose offsets changed and the ones to forget.
An incremental answer holds only the partitions with something new: records, an error, or a high watermark,
last stable offset or log start that changed since the session last told it.

Request (session id, epoch), Kafka's rules:
    (0, -1)  a full fetch without a session (also every version before 7);
    (0, 0)   a full fetch that creates a session (none when the cache is full of sessions in use: id 0);
    (S, 0)   closes S, then as (0, 0);      (S, -1)  closes S, then as (0, -1);
    (S, E>0) incremental: S unknown is FETCH_SESSION_ID_NOT_FOUND, E not the session's next epoch
             INVALID_FETCH_SESSION_EPOCH (and the client starts over with a full fetch).
The cache holds max_sessions; when full, a new session takes the place of the least recently used one if that
one has been idle for eviction_seconds, else the client goes on without one.
"""
from __future__ import annotations

import dataclasses
import random
import time
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from fastmq.broker.kafka.metadata import ZERO_UUID, resolve_topic
from fastmq.broker.topics import Topic
from fastmq.kafka import errors as kerrors

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

SESSIONS_VERSION = 7
TOPIC_ID_VERSION = 13
FINAL_EPOCH = -1
FETCH_SESSION_ID_NOT_FOUND = kerrors.FetchSessionIdNotFoundError.errno
INVALID_FETCH_SESSION_EPOCH = kerrors.InvalidFetchSessionEpochError.errno

TopicPartition = tuple[str, int]


@dataclasses.dataclass
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    topic_id: uuid.UUID
    told: tuple[int, int, int] | None = None     # (log start, high watermark, last stable) last answered


class FetchSession:
    __slots__ = ("session_id", "epoch", "partitions", "last_used")

    def __init__(self, session_id: int, now: float) -> None:
        self.session_id = session_id
        self.epoch = 1                           # the epoch the next (incremental) request must carry
        self.partitions: dict[TopicPartition, SessionPartition] = {}
        self.last_used = now


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000, eviction_seconds: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.eviction_seconds = eviction_seconds
        self.clock = clock
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()   # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self) -> FetchSession | None:
        now = self.clock()
        if len(self._sessions) >= self.max_sessions:
            oldest = next(iter(self._sessions.values()), None)
            if oldest is None or now - oldest.last_used < self.eviction_seconds:
                return None
            del self._sessions[oldest.session_id]
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, 0x7FFFFFFF)
        session = self._sessions[session_id] = FetchSession(session_id, now)
        return session

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used = self.clock()
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)


@dataclasses.dataclass(slots=True)
class Target:
    """One partition a Fetch reads (or answers an error for)."""

    wire_name: str | None          # the topic as the request named it
    wire_id: uuid.UUID             # and its id (ZERO_UUID before v13)
    topic: Topic | None            # None: unknown
    partition: int
    fetch_offset: int
    max_bytes: int
    entry: SessionPartition | None = None    # its place in the fetch session, if it has one


@dataclasses.dataclass
class FetchPlan:
    targets: list[Target]
    session: FetchSession | None = None
    incremental: bool = False

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else 0


def _resolve(broker: Broker, by_id: bool, name: str | None, topic_id: uuid.UUID | None) -> Topic | None:
    return resolve_topic(broker, None if by_id else name, topic_id if by_id else None)


def plan_fetch(broker: Broker, cache: FetchSessionCache, version: int, body: Any) -> FetchPlan | int:
    """The plan of this Fetch, or the error code of the whole request."""
    by_id = version >= TOPIC_ID_VERSION
    requested = [Target(wanted.topic if not by_id else None, wanted.topic_id if by_id else ZERO_UUID,
                        _resolve(broker, by_id, wanted.topic, wanted.topic_id), part.partition, part.fetch_offset,
                        part.partition_max_bytes)
                 for wanted in body.topics for part in wanted.partitions]
    if version < SESSIONS_VERSION:
        return FetchPlan(requested)
    session_id, epoch = body.session_id, body.session_epoch
    if epoch <= 0:
        if session_id:
            cache.remove(session_id)
        session = cache.create() if epoch == 0 else None
        if session is not None:
            for target in requested:
                known = _known_topic(target)
                if known is not None:
                    target.entry = session.partitions[(known.name, target.partition)] = SessionPartition(
                        target.fetch_offset, target.max_bytes, known.topic_id)
        return FetchPlan(requested, session)
    session = cache.get(session_id)
    if session is None:
        return FETCH_SESSION_ID_NOT_FOUND
    if epoch != session.epoch:
        return INVALID_FETCH_SESSION_EPOCH
    session.epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
    for forgotten in body.forgotten_topics_data:
        gone = _resolve(broker, by_id, forgotten.topic, forgotten.topic_id)
        if gone is not None:
            for partition in forgotten.partitions:
                session.partitions.pop((gone.name, partition), None)
    errors = []
    for target in requested:
        known = _known_topic(target)
        if known is None:
            errors.append(target)                # answered with its error, not kept in the session
            continue
        key = (known.name, target.partition)
        entry = session.partitions.get(key)
        if entry is None:
            session.partitions[key] = SessionPartition(target.fetch_offset, target.max_bytes, known.topic_id)
        else:
            entry.fetch_offset, entry.max_bytes = target.fetch_offset, target.max_bytes
    targets = errors
    topics = broker.topics
    topic: Topic | None = None
    for (name, partition), entry in session.partitions.items():
        if topic is None or topic.name != name:          # a session lists a topic's partitions together
            topic = topics.get(name)
        targets.append(Target(name, entry.topic_id if by_id else ZERO_UUID, topic, partition, entry.fetch_offset,
                              entry.max_bytes, entry))
    return FetchPlan(targets, session, incremental=True)


def rotate_served(session: FetchSession, served: list[TopicPartition]) -> None:
    """Move the partitions an answer held records of to the end of the session's order, which is the order the
    next incremental Fetch reads them in: a response that fills up before its last partitions does not leave
    the same ones out every time (Kafka's broker does the same in an incremental fetch)."""
    partitions = session.partitions
    for key in served:
        entry = partitions.pop(key, None)
        if entry is not None:
            partitions[key] = entry


def _known_topic(target: Target) -> Topic | None:
    """The target's topic when the target names one of its partitions, else None."""
    topic = target.topic
    return topic if topic is not None and 0 <= target.partition < topic.partitions else None
