"""What a consumer reads: its subscription (topics or pattern), or its own assignment, and per partition the
position and the fetch state.

Two threads share this state. The user's thread (poll, seek, commit) owns the consumed `position`; the I/O
loop thread (the fetcher) owns the fetch offset that runs ahead of it. A partition's `epoch` ties them
together: every seek, offset reset, pause or reassignment bumps it, and fetched data stamped with an older
epoch is dropped instead of handed out. Changes of position and epoch happen under `lock`, so that the loop
thread (offset resets) and the user's thread (seeks) never interleave half-way. A partition's state
(PartitionState) is compiled, with the fetcher's loops over many partitions (fastmq/kafka/_native/fetch_state.pyx).
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from enum import Enum
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka._native.fetch_state import PartitionState as PartitionState
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition

EARLIEST = -2       # ListOffsets timestamps: the log start ...
LATEST = -1         # ... and the log end

_RESET_STRATEGIES = {"earliest": EARLIEST, "latest": LATEST, "none": None}


def reset_strategy(name: str) -> int | None:
    """'earliest' / 'latest' / 'none' (kafka-python also takes 'smallest' / 'largest')."""
    key = {"smallest": "earliest", "largest": "latest"}.get(name, name)
    if key not in _RESET_STRATEGIES:
        raise kerrors.KafkaConfigurationError(
            f"auto_offset_reset must be 'earliest', 'latest' or 'none', not {name!r}")
    return _RESET_STRATEGIES[key]


class SubscriptionType(Enum):
    NONE = 0
    TOPICS = 1          # subscribe(topics): group-managed
    PATTERN = 2         # subscribe(pattern=...): group-managed, topics follow the metadata
    USER = 3            # assign(): no group management


class SubscriptionState:
    """The consumer's subscription and assignment. Methods are for the user's thread unless noted."""

    def __init__(self, default_reset: int | None, on_change: Any = None) -> None:
        self.lock = threading.RLock()
        # Called after every change the fetcher must act on (the I/O loop's wakeup: it may be asleep).
        self.on_change = on_change if on_change is not None else (lambda: None)
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self.topics: set[str] = set()               # subscribed topics (for a pattern: the matches)
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None
        # Replaced whole on every change, so the loop thread can iterate a snapshot without the lock.
        self.assignment: dict[TopicPartition, PartitionState] = {}
        # Bumped (under the lock) by every change of the assignment, a position, a pause or a lookup: the
        # fetcher looks at every partition again only then, else at those its own events touched.
        self.changes = 0
        self.user_assignment: set[TopicPartition] = set()
        # A partition lacks both a position and a lookup only when it is newly assigned: missing_positions(),
        # called on every poll, looks at the whole assignment only after one was.
        self._maybe_missing = False

    # ---- subscribing -------------------------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.type not in (SubscriptionType.NONE, kind):
            raise kerrors.IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive")
        self.type = kind

    def subscribe(self, topics: Iterable[str] = (), pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> bool:
        """Returns True when the set of subscribed topics changed."""
        topics = list(topics) if topics else []
        if not topics and not pattern:
            raise ValueError("Must provide topics or pattern")
        if topics and pattern:
            raise kerrors.IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        with self.lock:
            if pattern:
                self._set_type(SubscriptionType.PATTERN)
                self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
                changed = bool(self.topics)
                self.topics = set()
            else:
                for topic in topics:
                    if not isinstance(topic, str) or not topic:
                        raise TypeError(f"topic names must be non-empty strings, not {topic!r}")
                self._set_type(SubscriptionType.TOPICS)
                changed = set(topics) != self.topics
                self.topics = set(topics)
            self.listener = listener
        return changed

    def match_pattern(self, available: Iterable[str], exclude_internal: bool = True) -> bool:
        """Pattern subscriptions: take the matching topics; True when they changed."""
        if self.type is not SubscriptionType.PATTERN or self.pattern is None:
            return False
        matched = {t for t in available if self.pattern.match(t)
                   and not (exclude_internal and t.startswith("__"))}
        if matched == self.topics:
            return False
        self.topics = matched
        return True

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = set(partitions)
        for tp in partitions:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"partitions must be TopicPartition namedtuples, not {tp!r}")
        with self.lock:
            self._set_type(SubscriptionType.USER)
            self.user_assignment = partitions
            self._set_assignment(partitions)

    def unsubscribe(self) -> None:
        with self.lock:
            self.type = SubscriptionType.NONE
            self.topics = set()
            self.pattern = None
            self.listener = None
            self.user_assignment = set()
            self._set_assignment(())

    @property
    def group_managed(self) -> bool:
        return self.type in (SubscriptionType.TOPICS, SubscriptionType.PATTERN)

    # ---- assignment ----------------------------------------------------------------------------------

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        current = self.assignment
        new: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            state = current.get(tp)
            if state is None:
                state = PartitionState(tp)
                self._maybe_missing = True
            new[tp] = state
        for tp, state in current.items():
            if tp not in new:
                state.epoch += 1        # in-flight and buffered data of a dropped partition is stale
        self.assignment = new
        self.changes += 1
        self.on_change()

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None:
        with self.lock:
            self._set_assignment(partitions)

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self.assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.assignment

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.assignment.get(tp)
        if state is None:
            raise kerrors.IllegalStateError(f"No current assignment for partition {tp}")
        return state

    # ---- positions -------------------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        with self.lock:
            state = self.state(tp)
            state.position = offset
            state.leader_epoch = leader_epoch
            state.reset_to = None
            state.epoch += 1
            self.changes += 1
        self.on_change()

    def request_reset(self, tp: TopicPartition, strategy: int | None = None) -> None:
        """Look the position up by strategy (EARLIEST / LATEST; default: auto_offset_reset)."""
        strategy = self.default_reset if strategy is None else strategy
        with self.lock:
            state = self.state(tp)
            if strategy is None:
                raise kerrors.NoOffsetForPartitionError(
                    f"no committed offset for {tp} and auto_offset_reset is 'none': seek() it first")
            state.position = None
            state.reset_to = strategy
            state.retry_at = 0.0
            state.epoch += 1
            self.changes += 1
        self.on_change()

    def complete_reset(self, state: PartitionState, epoch: int, offset: int, leader_epoch: int = -1) -> bool:
        """Loop thread: an offset lookup for `state` sent at `epoch` came back; False when it is stale."""
        with self.lock:
            if state.epoch != epoch or state.reset_to is None or self.assignment.get(state.tp) is not state:
                return False
            state.position = offset
            state.leader_epoch = leader_epoch
            state.reset_to = None
            state.epoch += 1
            self.changes += 1
            return True

    def pause(self, tp: TopicPartition) -> None:
        with self.lock:
            state = self.state(tp)
            if not state.paused:
                state.paused = True
                state.epoch += 1        # buffered records of a paused partition are fetched again later
                self.changes += 1

    def resume(self, tp: TopicPartition) -> None:
        with self.lock:
            self.state(tp).paused = False
            self.changes += 1
        self.on_change()

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, state in self.assignment.items() if state.paused}

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions with neither a position nor a pending offset lookup."""
        if not self._maybe_missing:
            return []
        with self.lock:
            missing = [tp for tp, state in self.assignment.items()
                       if state.position is None and state.reset_to is None]
            self._maybe_missing = bool(missing)
        return missing

    def has_all_positions(self) -> bool:
        return all(state.position is not None for state in self.assignment.values())

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What a commit of the current positions sends."""
        return {tp: OffsetAndMetadata(state.position, "", state.leader_epoch)
                for tp, state in self.assignment.items() if state.position is not None}
