"""AIOKafkaConsumer: aiokafka's consumer API on fastmq's engine.

    async with AIOKafkaConsumer("events", bootstrap_servers="127.0.0.1:9092", group_id="billing") as consumer:
        async for record in consumer:
            handle(record.value)

fastmq's I/O thread fetches and decodes records in the background; getmany() and getone() take what is
buffered with a non-blocking poll on the loop thread. When nothing is buffered they wait for the consumer's
wake-up (records arrived, an offset lookup or a rebalance finished), which the I/O thread hands to the loop
through a LoopHandoff. Everything that may wait for the broker or run a rebalance (applying a join with its
commit and listener calls, commit, committed, position, offset lookups, stop) runs on a worker thread; an
async rebalance listener is run on the loop while that worker waits for it, so it may await the consumer.
"""
from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any, Callable, Iterable

from fastmq.kafka import errors as kerrors
from fastmq.kafka.aio.config import REQUEST_TIMEOUT_MS, bound_loop, client_options
from fastmq.kafka.aio.errors import ConsumerStoppedError, IllegalOperation
from fastmq.kafka.aio.handoff import LoopHandoff
from fastmq.kafka.aio.lifetime import Lifetime, start_engine
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.structs import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

Records = dict[TopicPartition, list[ConsumerRecord]]

# getmany() without max_records and without max_poll_records hands out all that is buffered.
_UNLIMITED = 1 << 30
# Committed-offset lookups finish without a wake-up: an idle getmany() polls again at least this often.
_MAX_IDLE_WAIT = 0.1


class ConsumerRebalanceListener:
    """aiokafka's listener interface: subclass it and pass it to subscribe(). Both methods may be plain or
    async; they run on the event loop, revoked before partitions are taken away (commit there), assigned
    after the new ones are known."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        pass


class AIOKafkaConsumer(Lifetime[Consumer]):
    """aiokafka.AIOKafkaConsumer's constructor and methods (see the module docstring). Keyword arguments
    beyond aiokafka's are fastmq.kafka.Consumer's (max_records_per_second, empty_fetch_backoff_ms, ...);
    api_version, consumer_timeout_ms and rebalance_timeout_ms have no effect. Like aiokafka's, a consumer
    is used from one event loop; a subscription change made while a rebalance is being applied on the
    worker thread is not ordered against it."""

    what = "consumer"
    stopped_error = ConsumerStoppedError

    def __init__(self, *topics: str, loop: asyncio.AbstractEventLoop | None = None,
                 bootstrap_servers: str | list[str] = "localhost", client_id: str | None = None,
                 group_id: str | None = None, group_instance_id: str | None = None,
                 key_deserializer: Callable[[bytes], Any] | None = None,
                 value_deserializer: Callable[[bytes], Any] | None = None,
                 fetch_max_wait_ms: int = 500, fetch_max_bytes: int = 52428800, fetch_min_bytes: int = 1,
                 max_partition_fetch_bytes: int = 1048576, request_timeout_ms: int = REQUEST_TIMEOUT_MS,
                 retry_backoff_ms: int = 100, auto_offset_reset: str = "latest", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, check_crcs: bool = True, metadata_max_age_ms: int = 300000,
                 partition_assignment_strategy: Iterable[Any] = ("roundrobin",), max_poll_interval_ms: int = 300000,
                 rebalance_timeout_ms: int | None = None, session_timeout_ms: int = 10000,
                 heartbeat_interval_ms: int = 3000, consumer_timeout_ms: int = 200, max_poll_records: int | None = None,
                 ssl_context: Any = None, security_protocol: str = "PLAINTEXT", api_version: Any = None,
                 exclude_internal_topics: bool = True, connections_max_idle_ms: int = 540000,
                 isolation_level: str = "read_uncommitted", sasl_mechanism: str = "PLAIN",
                 sasl_plain_password: str | None = None, sasl_plain_username: str | None = None,
                 sasl_kerberos_service_name: str = "kafka", sasl_kerberos_domain_name: str | None = None,
                 sasl_oauth_token_provider: Any = None, client_rack: str | None = None,
                 **fastmq_options: Any) -> None:
        arguments = dict(locals())             # before any other local: the settings as given
        super().__init__()
        self._loop = bound_loop(loop)
        if max_poll_records is not None and max_poll_records < 1:
            raise ValueError("max_poll_records should be greater than 0")
        self._topics = topics
        self._group_id = group_id
        self._max_records = max_poll_records or _UNLIMITED
        self._options = dict(
            client_options(arguments),
            group_id=group_id, group_instance_id=group_instance_id, key_deserializer=key_deserializer,
            value_deserializer=value_deserializer, fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_max_bytes=fetch_max_bytes, fetch_min_bytes=fetch_min_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes, auto_offset_reset=auto_offset_reset,
            enable_auto_commit=enable_auto_commit, auto_commit_interval_ms=auto_commit_interval_ms,
            check_crcs=check_crcs, partition_assignment_strategy=tuple(partition_assignment_strategy),
            max_poll_interval_ms=max_poll_interval_ms, session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, max_poll_records=max_poll_records or 500,
            exclude_internal_topics=exclude_internal_topics, isolation_level=isolation_level,
            client_rack=client_rack or "", **fastmq_options)
        self._request_timeout = request_timeout_ms / 1000.0
        self._handoff = LoopHandoff(self._loop)
        self._news = asyncio.Event()
        self._stopping = False                  # stop() began: getmany()/getone() raise ConsumerStoppedError
        # Subscription changes that may block (unsubscribing from a group commits and calls the listener)
        # run on a worker thread; later ones, and every awaiting method, wait for them in order.
        self._changing: asyncio.Task[Any] | None = None

    # ---- lifetime -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and fetch the cluster's metadata (KafkaConnectionError when no bootstrap server answers);
        topics given to the constructor are subscribed to."""
        if self._engine is not None:
            return
        consumer = await start_engine(lambda: Consumer(**self._options), self._request_timeout,
                                      lambda consumer: consumer.close(False))
        consumer.add_wakeup_listener(self._wake)
        self._engine = consumer
        if self._topics:
            self.subscribe(self._topics)

    def _wake(self) -> None:
        # I/O thread: something changed that getmany() may be waiting for.
        self._handoff.submit(self._news.set)

    async def stop(self) -> None:
        """Commit (with auto-commit), leave the group and close the connections; waiting getmany() /
        getone() calls raise ConsumerStoppedError."""
        if self._engine is None or self._stopping:
            return
        await self._changes_done()
        self._stopping = True
        self._news.set()
        try:
            await asyncio.to_thread(self._engine.close)      # its revoke listener may still commit
        finally:
            self._closed = True

    def _group(self) -> Consumer:
        consumer = self.engine()
        if self._group_id is None:
            raise IllegalOperation("Requires group_id")
        return consumer

    # ---- subscriptions --------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group for these topics (or those matching pattern); replaces the subscription."""
        consumer = self._group()
        if isinstance(topics, str):
            raise TypeError("topics must be a list of topic names, not a str")
        if bool(topics) == (pattern is not None):
            raise ValueError("subscribe() needs either topics or a pattern")
        if pattern is not None:
            pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        wrapped = None if listener is None else _LoopListener(listener, self._loop)
        self._change(consumer.subscribe, list(topics), pattern, wrapped)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume these partitions without group management."""
        consumer = self.engine()
        partitions = list(partitions)
        if not all(isinstance(tp, TopicPartition) for tp in partitions):
            raise TypeError("partitions must be TopicPartition namedtuples")
        self._change(consumer.assign, partitions)

    def unsubscribe(self) -> None:
        """Drop the subscription (leaving the group) or the assignment."""
        consumer = self.engine()
        if consumer.subscription() is None and self._changing is None:
            consumer.unsubscribe()                  # a manual assignment: nothing to commit or revoke
        else:
            self._change(consumer.unsubscribe, blocking=True)

    def _change(self, function: Callable[..., Any], *args: Any, blocking: bool = False) -> None:
        """Apply a subscription change now when nothing is pending and it cannot block, else after the
        pending ones on a worker thread."""
        if self._changing is None and not blocking:
            function(*args)
            return
        previous = self._changing

        async def apply() -> None:
            try:
                if previous is not None:
                    await previous
            finally:
                await asyncio.to_thread(function, *args)
        task = self._changing = self._loop.create_task(apply())
        task.add_done_callback(self._change_done)

    def _change_done(self, task: asyncio.Task[Any]) -> None:
        if self._changing is task:
            self._changing = None

    async def _changes_done(self) -> None:
        """Wait for pending subscription changes; the first one that failed raises here."""
        if self._changing is not None:
            await self._changing

    def assignment(self) -> set[TopicPartition]:
        return self.engine().assignment()

    def subscription(self) -> frozenset[str]:
        return frozenset(self.engine().subscription() or ())

    # ---- records ------------------------------------------------------------------------------------------

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> Records:
        """Buffered records by partition (of these partitions only, if given), waiting up to timeout_ms for
        some when none are buffered; {} on timeout."""
        return await self._fetch(partitions, timeout_ms / 1000.0, max_records or self._max_records)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record (of these partitions only, if given), waiting as long as it takes."""
        records = await self._fetch(partitions, float("inf"), 1)
        return next(iter(records.values()))[0]

    def __aiter__(self) -> "AIOKafkaConsumer":
        return self

    async def __anext__(self) -> ConsumerRecord:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    async def _fetch(self, partitions: tuple[TopicPartition, ...], timeout: float, max_records: int) -> Records:
        consumer = self.engine()
        await self._changes_done()
        deadline = self._loop.time() + timeout
        while True:
            if self._stopping:
                raise ConsumerStoppedError("the consumer is stopped")
            self._news.clear()              # before polling: a wake-up during the poll is not lost
            if consumer.poll_may_block():
                records = await asyncio.to_thread(consumer.poll, 0, max_records)
            else:
                records = consumer.poll(0, max_records)
            if partitions and records:
                records = self._only(consumer, records, set(partitions))
            if records:
                return records
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return {}
            try:
                await asyncio.wait_for(self._news.wait(), min(remaining, _MAX_IDLE_WAIT))
            except asyncio.TimeoutError:
                pass

    @staticmethod
    def _only(consumer: Consumer, records: Records, wanted: set[TopicPartition]) -> Records:
        # Records of partitions not asked for go back: their position returns to the first of them.
        kept = {}
        for tp, chunk in records.items():
            if tp in wanted:
                kept[tp] = chunk
            else:
                consumer.seek(tp, chunk[0].offset)
        return kept

    # ---- positions ----------------------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        consumer = self.engine()
        if partition not in consumer.assignment():
            raise kerrors.IllegalStateError(f"No current assignment for partition {partition}")
        consumer.seek(partition, offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self.engine().seek_to_beginning(*partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        self.engine().seek_to_end(*partitions)

    async def seek_to_committed(self, *partitions: TopicPartition) -> dict[TopicPartition, int | None]:
        """Move to the committed offsets (partitions without one keep their position); returns them."""
        consumer = self._group()
        committed = {}
        for tp in partitions or tuple(consumer.assignment()):
            committed[tp] = offset = await asyncio.to_thread(consumer.committed, tp)
            if offset is not None:
                consumer.seek(tp, offset)
        return committed

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record getmany()/getone() hands out for this partition."""
        consumer = self.engine()
        await self._changes_done()
        offset = await asyncio.to_thread(consumer.position, partition)
        if offset is None:
            raise kerrors.KafkaTimeoutError(f"the position of {partition} was not found in time")
        return offset

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.engine().highwater(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self.engine().pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.engine().resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self.engine().paused()

    # ---- commits --------------------------------------------------------------------------------------------

    async def commit(self, offsets: dict[TopicPartition, Any] | None = None) -> None:
        """Commit offsets ({tp: offset, (offset, metadata) or OffsetAndMetadata}; default: the positions
        of what was handed out) and wait for the coordinator's answer."""
        consumer = self._group()
        await self._changes_done()
        if offsets is not None:
            offsets = {tp: _offset_and_metadata(tp, value) for tp, value in offsets.items()}
        await asyncio.to_thread(consumer.commit, offsets)

    async def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset of a partition (None when there is none)."""
        return await asyncio.to_thread(self._group().committed, partition)

    # ---- offsets and metadata ---------------------------------------------------------------------------

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await asyncio.to_thread(self.engine().beginning_offsets, list(partitions))

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await asyncio.to_thread(self.engine().end_offsets, list(partitions))

    async def offsets_for_times(self, timestamps: dict[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await asyncio.to_thread(self.engine().offsets_for_times, timestamps)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The topic's partitions as far as the cached metadata knows (None when it does not)."""
        return self.engine().client.cluster.partitions_for(topic)

    async def topics(self) -> set[str]:
        return await asyncio.to_thread(self.engine().topics)


def _offset_and_metadata(tp: TopicPartition, value: Any) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, int):
        return OffsetAndMetadata(value, "")
    if isinstance(value, tuple) and len(value) == 2:
        return OffsetAndMetadata(value[0], value[1])
    raise ValueError(f"the offset of {tp} must be an int, (offset, metadata) or OffsetAndMetadata, not {value!r}")


class _LoopListener:
    """A rebalance listener for fastmq's Consumer that runs an aiokafka listener's methods on the event loop.

    The consumer calls it on a worker thread (a join is applied there, see AIOKafkaConsumer._fetch), which
    waits for the method, plain or async, to finish on the loop: partitions are revoked only after the
    user's on_partitions_revoked has committed."""

    def __init__(self, listener: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.listener = listener
        self.loop = loop

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._call(self.listener.on_partitions_revoked, revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._call(self.listener.on_partitions_assigned, assigned)

    def _call(self, method: Callable[[set[TopicPartition]], Any], partitions: set[TopicPartition]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            # A join that finished between poll_may_block() and poll(): the loop cannot wait for itself,
            # so the method runs as a task of its own.
            self.loop.create_task(_call_on_loop(method, partitions))
            return
        asyncio.run_coroutine_threadsafe(_call_on_loop(method, partitions), self.loop).result()


async def _call_on_loop(method: Callable[[set[TopicPartition]], Any], partitions: set[TopicPartition]) -> None:
    result = method(partitions)
    if inspect.isawaitable(result):
        await result
