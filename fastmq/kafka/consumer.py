"""fastmq.kafka.Consumer: the idiomatic Kafka consumer.

    with Consumer("invoices", bootstrap_servers="127.0.0.1:9092", group_id="billing",
                  auto_offset_reset="earliest", consumer_timeout_ms=10000) as consumer:
        for record in consumer:                         # or consumer.poll(1.0) / consumer.consume(10000, 1.0)
            handle(record.value)

Topics given first are subscribed (or call subscribe() / assign() later). A group without committed offsets
starts where auto_offset_reset says: "latest" (the default) means the end of each partition as it is when the
group first joins, so records produced before that are not seen; "earliest" reads them. Iteration ends after
consumer_timeout_ms without a record (by default it waits for ever).

Partitions that cannot be fetched (no such topic or partition, no leader, an unreachable leader) are logged
as warnings and listed by unavailable_partitions(); polls meanwhile sleep until data, new metadata or their
timeout. at_end() says whether every assigned partition was read up to its end (for "exit at the end" tools).

Records are kafka-python's ConsumerRecord namedtuples, decoded by compiled code on the client's I/O thread
while the previous records are processed (prefetching); headers are an immutable tuple of (key, value) pairs.
Deserializers are called with the bytes of non-null keys and values only. Timeouts of methods are in
seconds; configuration keys keep kafka-python's names (and *_ms units). Like kafka-python's, a consumer is
used from one thread at a time; its group membership and heartbeats run on the I/O thread, so processing may
take up to max_poll_interval_ms between polls.

Beyond kafka-python: consume rate limiting (max_records_per_second, max_bytes_per_second, token buckets
applied as poll() hands records out) and pull-frequency control (empty_fetch_backoff_ms: how long a broker
is left alone after a fetch that returned nothing), from TubeMQ's consumer.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal, overload

import fastmq
from fastmq.client import RateLimiter
from fastmq.closeable import Closeable
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.assignors import PartitionAssignor, make_assignors
from fastmq.kafka.client import CLIENT_OPTIONS, ClientConfig, KafkaClient
from fastmq.kafka.fetcher import FetchConfig, Fetcher, make_decoder
from fastmq.kafka.group import GroupCoordinator
from fastmq.kafka.group_config import GroupConfig
from fastmq.kafka.structs import (
    ConsumerGroupMetadata, ConsumerRecord, MemberState, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition,
)
from fastmq.kafka.subscription import EARLIEST, LATEST, SubscriptionState, reset_strategy

_log = logging.getLogger(__name__)

Records = dict[TopicPartition, list[ConsumerRecord]]


@dataclass
class ConsumerConfig:
    """The consumer's own options (the connection's are ClientConfig's), with kafka-python's names."""

    group_id: str | None = None
    group_instance_id: str | None = None
    key_deserializer: Callable[..., Any] | None = None
    value_deserializer: Callable[..., Any] | None = None
    enable_incremental_fetch_sessions: bool = True
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: float = 5000
    check_crcs: bool = True
    isolation_level: str = "read_uncommitted"
    partition_assignment_strategy: Iterable[Any] = ("range", "roundrobin")
    max_poll_records: int = 500
    max_poll_interval_ms: int = 300000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    consumer_timeout_ms: float = float("inf")
    exclude_internal_topics: bool = True
    client_rack: str = ""
    # fastmq's own:
    max_records_per_second: float | None = None
    max_bytes_per_second: float | None = None
    empty_fetch_backoff_ms: float = 0
    # How records come out (the compat layer sets kafka-python's behaviour).
    tuple_headers: bool = True
    deserialize_null: bool = False
    deserializer_context: bool = False
    default_offset_commit_callback: Callable[[Any, Any], Any] | None = None

    def validate(self, client: ClientConfig) -> None:
        reset_strategy(self.auto_offset_reset)
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise kerrors.KafkaConfigurationError(
                f"isolation_level must be 'read_uncommitted' or 'read_committed', not {self.isolation_level!r}")
        if not (self.fetch_max_wait_ms < client.request_timeout_ms < client.connections_max_idle_ms):
            raise kerrors.KafkaConfigurationError(
                f"connections_max_idle_ms ({client.connections_max_idle_ms}) must be larger than "
                f"request_timeout_ms ({client.request_timeout_ms}) which must be larger than "
                f"fetch_max_wait_ms ({self.fetch_max_wait_ms}).")
        if self.max_poll_records < 1:
            raise kerrors.KafkaConfigurationError("max_poll_records must be at least 1")
        if self.group_instance_id is not None:
            if self.group_id is None:
                raise kerrors.KafkaConfigurationError("group_instance_id requires group_id")
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", self.group_instance_id) or \
                    self.group_instance_id in (".", ".."):
                raise kerrors.KafkaConfigurationError(
                    f"group_instance_id {self.group_instance_id!r} is illegal: use 1-249 ASCII letters, digits, "
                    "'.', '_' and '-'")
        for name in ("max_records_per_second", "max_bytes_per_second"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise kerrors.KafkaConfigurationError(f"{name} must be positive, not {value!r}")


_CONSUMER_KEYS = {f.name for f in fields(ConsumerConfig)}


class Wakeup(threading.Condition):
    """The condition poll() sleeps on; the fetcher and the group notify it (under its lock) when records
    arrive, an offset lookup finishes or the group has news. Listeners added here are called then too, on
    the notifying thread: how an event loop (fastmq.kafka.aio) learns that polling again is worth it."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[Callable[[], Any]] = []

    def notify_all(self) -> None:
        super().notify_all()
        for listener in self.listeners:
            listener()


class Consumer(Closeable):
    """A Kafka consumer (see the module docstring). Options not in ConsumerConfig are ClientConfig's."""

    def __init__(self, *topics: str, bootstrap_servers: str | list[str] = "localhost", **options: Any) -> None:
        unknown = set(options) - _CONSUMER_KEYS - CLIENT_OPTIONS
        if unknown:
            raise kerrors.KafkaConfigurationError(f"Unrecognized configs: {sorted(unknown)}")
        config = ConsumerConfig(**{k: v for k, v in options.items() if k in _CONSUMER_KEYS})
        client_options = {k: v for k, v in options.items() if k in CLIENT_OPTIONS}
        client_options.setdefault("client_id", f"fastmq-{fastmq.__version__}")
        client_config = ClientConfig(bootstrap_servers=bootstrap_servers, **client_options)
        # A fetch response may exceed fetch_max_bytes by one partition's worth (the first batch always comes).
        client_config.receive_message_max_bytes = max(
            client_config.receive_message_max_bytes, config.fetch_max_bytes + config.max_partition_fetch_bytes + 65536)
        config.validate(client_config)
        self.config = config
        self._closed = False
        self.assignors: list[PartitionAssignor] = make_assignors(config.partition_assignment_strategy)
        self.client = KafkaClient(client_config, name=f"fastmq-consumer-{client_config.client_id}")
        try:
            self._wakeup = Wakeup()
            self._subscriptions = SubscriptionState(reset_strategy(config.auto_offset_reset), self.client.loop.wakeup)
            decoder = make_decoder(
                check_crcs=config.check_crcs, read_committed=config.isolation_level == "read_committed",
                key_deserializer=config.key_deserializer, value_deserializer=config.value_deserializer,
                with_context=config.deserializer_context, deserialize_null=config.deserialize_null,
                tuple_headers=config.tuple_headers)
            self._fetcher = Fetcher(self.client, self._subscriptions, FetchConfig(
                fetch_min_bytes=config.fetch_min_bytes, fetch_max_bytes=config.fetch_max_bytes,
                max_partition_fetch_bytes=config.max_partition_fetch_bytes, fetch_max_wait_ms=config.fetch_max_wait_ms,
                isolation_level=config.isolation_level, check_crcs=config.check_crcs,
                enable_incremental_fetch_sessions=config.enable_incremental_fetch_sessions,
                retry_backoff_ms=client_config.retry_backoff_ms, client_rack=config.client_rack,
                empty_fetch_backoff_ms=config.empty_fetch_backoff_ms), decoder, self._wakeup)
            self._coordinator: GroupCoordinator | None = None
            if config.group_id is not None:
                self._coordinator = GroupCoordinator(self.client, self._subscriptions, GroupConfig(
                    group_id=config.group_id, group_instance_id=config.group_instance_id,
                    session_timeout_ms=config.session_timeout_ms, heartbeat_interval_ms=config.heartbeat_interval_ms,
                    max_poll_interval_ms=config.max_poll_interval_ms, retry_backoff_ms=client_config.retry_backoff_ms,
                    request_timeout_ms=client_config.request_timeout_ms, enable_auto_commit=config.enable_auto_commit,
                    auto_commit_interval_ms=config.auto_commit_interval_ms, client_rack=config.client_rack or None),
                    self.assignors, self._wakeup)
        except BaseException:
            self.client.close()
            raise
        self._request_timeout = client_config.request_timeout_ms / 1000.0
        self._record_limiter = RateLimiter(config.max_records_per_second) if config.max_records_per_second else None
        self._byte_limiter = RateLimiter(config.max_bytes_per_second) if config.max_bytes_per_second else None
        self._metadata_version = -1
        self._committed_request: tuple[frozenset[Any], Future[Any]] | None = None
        self._iteration: list[Any] = []        # [tp, records, index, epoch, final position] of the iterator
        self._consumer_timeout_at = float("inf")
        if topics:
            self.subscribe(topics)

    # ---- subscriptions ---------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        """Join the group for these topics (or every topic matching pattern); replaces the subscription.
        Without a group_id (as kafka-python) every partition of the topics is consumed, without commits."""
        self._check_open()
        if isinstance(topics, str):
            raise TypeError("topics must be a list of topic names, not a str")
        changed = self._subscriptions.subscribe(topics, pattern, listener)
        self._metadata_version = -1
        if pattern is not None:
            self.client.set_all_topics(True)
        else:
            self.client.add_topics(self._subscriptions.topics)
        if changed and self._coordinator is not None:
            self._coordinator.request_rejoin()

    def unsubscribe(self) -> None:
        """Drop the subscription or assignment; a group member commits (with auto-commit), calls its
        listener's on_partitions_revoked and leaves the group."""
        self._check_open()
        self._abandon_iteration()
        if self._coordinator is not None and self._subscriptions.group_managed:
            self._coordinator.unsubscribe(self._request_timeout)
        self._subscriptions.unsubscribe()
        self.client.set_all_topics(False)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume these partitions, without group management (commits still use group_id when set)."""
        self._check_open()
        partitions = list(partitions)
        if not partitions:
            self.unsubscribe()
            return
        self._abandon_iteration()
        self._subscriptions.assign_from_user(partitions)
        self.client.add_topics({tp.topic for tp in partitions})

    def assignment(self) -> set[TopicPartition]:
        return self._subscriptions.assigned_partitions()

    def subscription(self) -> set[str] | None:
        return set(self._subscriptions.topics) if self._subscriptions.group_managed else None

    # ---- polling -----------------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> Records:
        """Records of the assigned partitions, up to max_records (default max_poll_records); waits up to
        timeout seconds for some when none are buffered. Empty on timeout."""
        if timeout < 0:
            raise ValueError("timeout must not be negative")
        if max_records is None:
            max_records = self.config.max_poll_records
        if max_records < 1:
            raise ValueError("max_records must be positive")
        self._check_open()
        self._abandon_iteration()
        deadline = time.monotonic() + timeout
        while True:
            records = self._poll_once(deadline, max_records)
            if records or time.monotonic() >= deadline or self._closed:
                return records

    def consume(self, max_records: int | None = None, timeout: float = 0.0) -> list[ConsumerRecord]:
        """poll(), flattened: one list of records (partitions one after another)."""
        records = self.poll(timeout, max_records)
        if len(records) == 1:
            return next(iter(records.values()))
        return [record for chunk in records.values() for record in chunk]

    def _poll_once(self, deadline: float, max_records: int) -> Records:
        coordinator = self._coordinator
        if coordinator is not None:
            self._match_pattern()
            coordinator.check_metadata()
            coordinator.ensure_active(deadline)
        elif self._subscriptions.group_managed:
            self._assign_subscribed_partitions()
            if not self._subscriptions.assignment:
                # Nothing to fetch until the metadata lists the topics: wait for it, not for records.
                self.client.wait_for_metadata(self._metadata_version, max(0.0, deadline - time.monotonic()))
                self._assign_subscribed_partitions()
        self._update_positions(deadline)
        if coordinator is not None:
            coordinator.maybe_auto_commit()
        records: Records = {}
        limit = self._rate_limit(max_records)
        if limit > 0:
            taken, nbytes = self._fetcher.drain(limit, records, self._byte_budget())
            if taken:
                if self._record_limiter is not None:
                    self._record_limiter.take(taken)
                if self._byte_limiter is not None:
                    self._byte_limiter.take(nbytes)
                return records
        wait = deadline - time.monotonic()
        if wait <= 0:
            return records
        if limit <= 0:
            wait = min(wait, self._rate_wait())
        elif coordinator is not None:
            wait = min(wait, coordinator.time_to_auto_commit())
        with self._wakeup:
            if (limit <= 0 or not self._fetcher.has_buffered()) and not (coordinator is not None
                                                                         and coordinator.has_news()):
                self._wakeup.wait(max(wait, 0.0))
        return records

    def _rate_limit(self, max_records: int) -> int:
        limit = max_records
        if self._record_limiter is not None:
            limit = min(limit, int(self._record_limiter.available()))
        if self._byte_limiter is not None and self._byte_limiter.available() < 1:
            limit = 0
        return limit

    def _byte_budget(self) -> float:
        return self._byte_limiter.tokens if self._byte_limiter is not None else float("inf")

    def _rate_wait(self) -> float:
        wait = 0.0
        if self._record_limiter is not None:
            wait = max(wait, self._record_limiter.wait_for(1))
        if self._byte_limiter is not None:
            wait = max(wait, self._byte_limiter.wait_for(1))
        return max(wait, 0.001)

    def _match_pattern(self) -> None:
        subscriptions = self._subscriptions
        if subscriptions.pattern is None or self._metadata_version == self.client.cluster.version:
            return
        self._metadata_version = self.client.cluster.version
        if subscriptions.match_pattern(self.client.cluster.topics, self.config.exclude_internal_topics):
            _log.info("pattern %r now matches %s", subscriptions.pattern.pattern, sorted(subscriptions.topics))
            if self._coordinator is not None:   # a pattern subscription always has a group
                self._coordinator.request_rejoin()

    def _assign_subscribed_partitions(self) -> None:
        """A subscription without a group: every partition of the subscribed (or matching) topics that the
        metadata lists, taken again when the metadata changes."""
        cluster = self.client.cluster
        if self._metadata_version == cluster.version:
            return
        self._metadata_version = cluster.version
        subscriptions = self._subscriptions
        subscriptions.match_pattern(cluster.topics, self.config.exclude_internal_topics)
        partitions = {TopicPartition(topic, p.partition) for topic in subscriptions.topics if topic in cluster.topics
                      for p in cluster.topics[topic].partitions}
        if partitions != subscriptions.assigned_partitions():
            subscriptions.assign_from_group(partitions)

    def _update_positions(self, deadline: float) -> None:
        """Give every assigned partition without a position one: its committed offset, else a lookup by
        auto_offset_reset (done by the fetcher on the I/O thread)."""
        missing = self._subscriptions.missing_positions()
        if not missing:
            return
        coordinator = self._coordinator
        if coordinator is None:
            for tp in missing:
                self._subscriptions.request_reset(tp)
            return
        if self._committed_request is None or not self._committed_request[0] >= set(missing):
            self._committed_request = (frozenset(missing), coordinator.fetch_committed_async(missing))
        partitions, future = self._committed_request
        try:
            committed = future.result(max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return                                  # a later poll() picks the answer up
        except kerrors.KafkaError as exc:
            self._committed_request = None
            if exc.retriable:
                _log.debug("fetching committed offsets failed: %s; retrying", exc)
                return
            raise
        self._committed_request = None
        for tp in partitions:
            state = self._subscriptions.assignment.get(tp)
            if state is None or state.position is not None or state.reset_to is not None:
                continue
            meta = committed.get(tp)
            if meta is not None:
                self._subscriptions.seek(tp, meta.offset, meta.leader_epoch)
            else:
                self._subscriptions.request_reset(tp)

    def add_wakeup_listener(self, listener: Callable[[], Any]) -> None:
        """Call listener() (on the I/O thread, quickly, without blocking) whenever records arrive, an offset
        lookup finishes or the group has news: a poll() that returned nothing may now return something."""
        self._wakeup.listeners.append(listener)

    def poll_may_block(self) -> bool:
        """Whether poll(0) may block the calling thread: a group (re)join is due to start or to be applied,
        which commits and calls the rebalance listener on the caller's thread. False: poll(0) returns at once."""
        coordinator = self._coordinator
        return (coordinator is not None and self._subscriptions.group_managed
                and (coordinator.has_news() or coordinator.state != MemberState.STABLE))

    # ---- iteration ---------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        if self._closed:
            raise StopIteration("the consumer is closed")
        if not self._iteration:
            self._consumer_timeout_at = time.monotonic() + self.config.consumer_timeout_ms / 1000.0
        while True:
            record = self._next_buffered()
            if record is not None:
                return record
            remaining = self._consumer_timeout_at - time.monotonic()
            if remaining <= 0:
                raise StopIteration()
            records = self.poll(min(remaining, 3600.0))
            if self._closed:
                raise StopIteration("the consumer is closed")
            self._iteration = [[tp, chunk, 0, self._subscriptions.assignment[tp].epoch,
                                self._subscriptions.assignment[tp].position]
                               for tp, chunk in records.items() if tp in self._subscriptions.assignment]
            if self._iteration:
                self._consumer_timeout_at = time.monotonic() + self.config.consumer_timeout_ms / 1000.0

    def _next_buffered(self) -> ConsumerRecord | None:
        # Positions advance record by record, so a commit inside the loop covers exactly what was seen.
        while self._iteration:
            entry = self._iteration[0]
            tp, chunk, index, epoch, final = entry
            state = self._subscriptions.assignment.get(tp)
            if state is None or state.epoch != epoch or state.paused:
                self._iteration.pop(0)
                continue
            if index >= len(chunk):
                state.position = final
                self._iteration.pop(0)
                continue
            record: ConsumerRecord = chunk[index]
            entry[2] = index + 1
            state.position = record.offset + 1
            state.leader_epoch = record.leader_epoch
            return record
        return None

    def _abandon_iteration(self) -> None:
        # Records the iterator did not hand out are fetched again: seek to where it stopped.
        for tp, chunk, index, epoch, final in self._iteration:
            state = self._subscriptions.assignment.get(tp)
            if state is not None and state.epoch == epoch and state.position is not None and state.position != final:
                self._subscriptions.seek(tp, state.position, state.leader_epoch)
        self._iteration = []

    # ---- positions ------------------------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if not isinstance(partition, TopicPartition):
            raise TypeError("partition must be a TopicPartition namedtuple")
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("Offset must be int >= 0")
        if partition not in self._subscriptions.assignment:
            raise ValueError(f"Unassigned partition {partition}")
        self._abandon_iteration()
        self._subscriptions.seek(partition, offset)

    def _reset(self, partitions: tuple[TopicPartition, ...], strategy: int) -> None:
        if not all(isinstance(p, TopicPartition) for p in partitions):
            raise TypeError("partitions must be TopicPartition namedtuples")
        assigned = self._subscriptions.assigned_partitions()
        if not partitions:
            if not assigned:
                raise ValueError("No partitions are currently assigned")
            partitions = tuple(assigned)
        for tp in partitions:
            if tp not in assigned:
                raise ValueError(f"Unassigned partition: {tp}")
        self._abandon_iteration()
        for tp in partitions:
            self._subscriptions.request_reset(tp, strategy)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, LATEST)

    def position(self, partition: TopicPartition, timeout: float | None = None) -> int | None:
        """The offset of the next record poll() hands out for this partition, looking it up (committed
        offset, else auto_offset_reset) when unknown; None if that did not finish within timeout."""
        if not isinstance(partition, TopicPartition):
            raise TypeError("partition must be a TopicPartition namedtuple")
        state = self._subscriptions.assignment.get(partition)
        if state is None:
            raise kerrors.IllegalStateError(f"Partition {partition} is not assigned")
        deadline = time.monotonic() + (self._request_timeout if timeout is None else timeout)
        while state.position is None:
            self._update_positions(deadline)
            remaining = deadline - time.monotonic()
            if state.position is not None or remaining <= 0:
                break
            with self._wakeup:
                if state.position is None:
                    self._wakeup.wait(min(remaining, 0.1))
        return state.position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark from the last fetch response (None before one arrived)."""
        if not isinstance(partition, TopicPartition):
            raise TypeError("partition must be a TopicPartition namedtuple")
        return self._subscriptions.state(partition).highwater

    def at_end(self, *partitions: TopicPartition) -> bool:
        """Whether every given partition (default: every assigned one) was handed out up to its end: its
        position has reached the high watermark of the last fetch (the last stable offset with
        read_committed). False while a position or the end is not known yet, and when nothing is assigned."""
        if not all(isinstance(p, TopicPartition) for p in partitions):
            raise TypeError("partitions must be TopicPartition namedtuples")
        states = [self._subscriptions.state(tp) for tp in partitions] if partitions else \
            list(self._subscriptions.assignment.values())
        read_committed = self.config.isolation_level == "read_committed"
        for state in states:
            end = state.last_stable_offset if read_committed else state.highwater
            if end is None or state.position is None or state.position < end:
                return False
        return bool(states)

    def unavailable_partitions(self) -> dict[TopicPartition, str]:
        """Assigned partitions that cannot be fetched now, with why (no such topic or partition, no leader,
        an unreachable leader, no broker answering). They are retried as new metadata arrives."""
        return dict(self._fetcher.unavailable)

    def pause(self, *partitions: TopicPartition) -> None:
        if not all(isinstance(p, TopicPartition) for p in partitions):
            raise TypeError("partitions must be TopicPartition namedtuples")
        self._abandon_iteration()
        for tp in partitions:
            self._subscriptions.pause(tp)

    def resume(self, *partitions: TopicPartition) -> None:
        if not all(isinstance(p, TopicPartition) for p in partitions):
            raise TypeError("partitions must be TopicPartition namedtuples")
        for tp in partitions:
            self._subscriptions.resume(tp)

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused_partitions()

    # ---- commits -----------------------------------------------------------------------------------------

    def _need_group(self) -> GroupCoordinator:
        if self._coordinator is None:
            raise kerrors.IllegalStateError("Requires group_id")
        return self._coordinator

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata] | None = None,
               timeout: float | None = None) -> None:
        """Commit offsets (default: the current positions) and wait for the coordinator's answer."""
        coordinator = self._need_group()
        if offsets is None:
            offsets = self._subscriptions.consumed_offsets()
        coordinator.commit(offsets, self._request_timeout if timeout is None else timeout)

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata] | None = None,
                     callback: Callable[[Any, Any], Any] | None = None) -> Future[Any]:
        """Commit without waiting; callback(offsets, result or exception) runs in a later poll(), commit() or
        close() on this thread. Returns a concurrent.futures.Future."""
        coordinator = self._need_group()
        if offsets is None:
            offsets = self._subscriptions.consumed_offsets()
        if callback is None:
            callback = self.config.default_offset_commit_callback
        return coordinator.commit_async(offsets, callback)

    @overload
    def committed(self, partition: TopicPartition, metadata: Literal[False] = False,
                  timeout: float | None = None) -> int | None: ...

    @overload
    def committed(self, partition: TopicPartition, metadata: Literal[True],
                  timeout: float | None = None) -> OffsetAndMetadata | None: ...

    @overload
    def committed(self, partition: TopicPartition, metadata: bool,
                  timeout: float | None = None) -> int | OffsetAndMetadata | None: ...

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout: float | None = None) -> int | OffsetAndMetadata | None:
        """The group's committed offset of a partition (None when nothing was committed)."""
        coordinator = self._need_group()
        if not isinstance(partition, TopicPartition):
            raise TypeError("partition must be a TopicPartition namedtuple")
        committed = coordinator.fetch_committed([partition], self._request_timeout if timeout is None else timeout)
        meta = committed.get(partition)
        if meta is None:
            return None
        return meta if metadata else meta.offset

    def group_metadata(self) -> ConsumerGroupMetadata:
        if self._coordinator is None:
            return ConsumerGroupMetadata(group_id=None)
        return self._coordinator.group_metadata()

    # ---- offsets by time -------------------------------------------------------------------------------------

    def offsets_for_times(self, timestamps: dict[TopicPartition, int],
                          timeout: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is at or after the given one (ms), per partition; None where
        no such record exists."""
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. The target time cannot be negative.")
        found = self._fetcher.list_offsets({tp: int(ts) for tp, ts in timestamps.items()},
                                           self._request_timeout if timeout is None else timeout)
        return {tp: None if found[tp][0] < 0 else OffsetAndTimestamp(*found[tp]) for tp in timestamps}

    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout: float | None = None) -> dict[TopicPartition, int]:
        found = self._fetcher.list_offsets({tp: EARLIEST for tp in partitions},
                                           self._request_timeout if timeout is None else timeout)
        return {tp: value[0] for tp, value in found.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout: float | None = None) -> dict[TopicPartition, int]:
        """The offset the next record will get, per partition (the last stable offset with read_committed)."""
        found = self._fetcher.list_offsets({tp: LATEST for tp in partitions},
                                           self._request_timeout if timeout is None else timeout)
        return {tp: value[0] for tp, value in found.items()}

    # ---- metadata ---------------------------------------------------------------------------------------------

    def partitions_for_topic(self, topic: str, timeout: float | None = None) -> set[int]:
        partitions = self.client.cluster.partitions_for(topic)
        if partitions is None:
            try:
                info = self.client.topic_metadata(topic, self._request_timeout if timeout is None else timeout)
            except kerrors.UnknownTopicOrPartitionError:
                return set()
            partitions = {p.partition for p in info.partitions}
        return partitions

    def topics(self, timeout: float | None = None) -> set[str]:
        """Every topic the broker lists (internal ones too unless exclude_internal_topics)."""
        response = self.client.request(None, kp.MetadataRequest(topics=None, allow_auto_topic_creation=False),
                                       self._request_timeout if timeout is None else timeout)
        return {t.name for t in response.topics
                if t.name and not t.error_code and not (self.config.exclude_internal_topics and t.is_internal)}

    def metrics(self) -> dict[str, dict[str, float]]:
        io = self.client.metrics
        return {"consumer-fetch-manager-metrics": {
            "fetch-total": self._fetcher.fetch_requests,
            "fetch-partitions-total": self._fetcher.partitions_requested,
            "buffered-bytes": self._fetcher.buffered_bytes(),
            "buffered-bytes-max": self._fetcher.max_bytes_buffered,
            "partitions-visited-total": self._fetcher.partitions_visited,
            "records-consumed-total": self._fetcher.records_fetched,
        }, "consumer-node-metrics": io.snapshot()}

    # ---- closing -----------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise kerrors.IllegalStateError("the consumer is closed")

    def close(self, autocommit: bool = True, timeout: float | None = None) -> None:
        """Commit (with auto-commit, unless autocommit=False), leave the group and close the connections,
        within timeout seconds (default request_timeout_ms)."""
        if self._closed:
            return
        self._closed = True
        timeout = self._request_timeout if timeout is None else timeout
        try:
            self._abandon_iteration()
            if self._coordinator is not None:
                self._coordinator.close(autocommit, timeout)
        finally:
            self._fetcher.close()
            self.client.close()
            with self._wakeup:
                self._wakeup.notify_all()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        # After an exception the last record may not have been processed: do not commit it.
        self.close(autocommit=exc_type is None)
