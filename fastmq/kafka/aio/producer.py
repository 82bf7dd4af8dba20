"""AIOKafkaProducer: aiokafka's producer API on fastmq's engine.

    async with AIOKafkaProducer(bootstrap_servers="127.0.0.1:9092") as producer:
        await producer.send_and_wait("events", b"payload")

send() encodes the record into its partition's batch on the calling (loop) thread, as fastmq's Producer
does, and returns an asyncio future; send_many() appends many records and returns one asyncio future for all
of them (send_batch(), aiokafka's batch API, goes through it); send_placed() appends many in one compiled
call and answers where each went, with no object per record. fastmq's I/O thread completes the batch; the
futures of its records are settled on the loop through a LoopHandoff (one loop wake-up per burst of
acknowledgements). What may wait for the broker (the first metadata of a topic, a full buffer,
AddPartitionsToTxn, flush, transactions, stop) runs on a worker thread, so the event loop never blocks.
"""
from __future__ import annotations

import asyncio
from functools import partial
from itertools import repeat
from typing import Any, Callable, Iterable, Sequence, TypeVar, overload

from fastmq.kafka import errors as kerrors
from fastmq.kafka.aio.config import REQUEST_TIMEOUT_MS, bound_loop, client_options
from fastmq.kafka.aio.errors import ProducerClosed
from fastmq.kafka.aio.handoff import LoopHandoff
from fastmq.kafka.aio.lifetime import Lifetime, start_engine
from fastmq.kafka._native.aio_batch import BatchBuilder
from fastmq.kafka._native.aio_futures import RecordFutures
from fastmq.kafka._native.aio_send import SendPath
from fastmq.kafka.producer import Producer
from fastmq.kafka.structs import RecordMetadata, TopicPartition

_MISSING = object()

Headers = Sequence[tuple[str, bytes | None]] | None
Outcome = TypeVar("Outcome")

# What the accumulator reserves at most per record beyond its key and value, and per header beyond its name and
# value (fastmq/_native/accumulator.pyx: RECORD_OVERHEAD, HEADER_OVERHEAD).
_RECORD_BOUND = 64
_HEADER_BOUND = 10
_MEMORY_POLL_S = 0.005      # how often a send waiting for buffer memory looks again


class AIOKafkaProducer(Lifetime[Producer]):
    """aiokafka.AIOKafkaProducer's constructor and methods (see the module docstring); stop() sends what is
    queued and waits for its acknowledgements. Keyword arguments beyond aiokafka's are fastmq.kafka.Producer's
    (buffer_memory, delivery_timeout_ms, max_block_ms, ...); api_version has no effect."""

    what = "producer"
    stopped_error = ProducerClosed

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None,
                 bootstrap_servers: str | list[str] = "localhost", client_id: str | None = None,
                 metadata_max_age_ms: int = 300000, request_timeout_ms: int = REQUEST_TIMEOUT_MS,
                 api_version: Any = None, acks: Any = _MISSING,
                 key_serializer: Callable[[Any], bytes] | None = None,
                 value_serializer: Callable[[Any], bytes] | None = None,
                 compression_type: str | None = None, max_batch_size: int = 16384,
                 partitioner: Callable[[bytes | None, list[int], list[int]], int] | None = None,
                 max_request_size: int = 1048576, linger_ms: float = 0, retry_backoff_ms: float = 100,
                 security_protocol: str = "PLAINTEXT", ssl_context: Any = None,
                 connections_max_idle_ms: int = 540000, enable_idempotence: bool = False,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60000,
                 sasl_mechanism: str = "PLAIN", sasl_plain_password: str | None = None,
                 sasl_plain_username: str | None = None, sasl_kerberos_service_name: str = "kafka",
                 sasl_kerberos_domain_name: str | None = None, sasl_oauth_token_provider: Any = None,
                 **fastmq_options: Any) -> None:
        arguments = dict(locals())             # before any other local: the settings as given
        super().__init__()
        self._loop = bound_loop(loop)
        if transactional_id is not None:
            enable_idempotence = True           # as aiokafka: a transactional producer is idempotent
        if acks is _MISSING:
            acks = "all" if enable_idempotence else 1
        elif enable_idempotence and acks not in ("all", -1):
            raise kerrors.KafkaConfigurationError("acks must be 'all' when enable_idempotence is set")
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._max_batch_size = max_batch_size
        self._transactional = transactional_id is not None
        self._options = dict(
            client_options(arguments),
            acks=acks, compression_type=compression_type, batch_size=max_batch_size,
            max_request_size=max_request_size, linger_ms=linger_ms, enable_idempotence=enable_idempotence,
            transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
            partitioner=None if partitioner is None else _keyed_partitioner(partitioner), **fastmq_options)
        self._request_timeout = request_timeout_ms / 1000.0
        self._futures = RecordFutures(LoopHandoff(self._loop))
        self._batch_waiters: BatchWaiters | None = None     # send_placed()'s, made with the engine
        self._send_path: SendPath | None = None     # send()'s common case, made with the engine

    # ---- lifetime -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and fetch the cluster's metadata (KafkaConnectionError when no bootstrap server answers);
        a transactional producer also takes its producer id."""
        if self._engine is None:
            self._engine = await start_engine(lambda: Producer(**self._options), self._request_timeout,
                                              lambda producer: producer.close(0),
                                              Producer.init_transactions if self._transactional else None)
            self._send_path = SendPath(self._engine, self._futures, self._key_serializer, self._value_serializer,
                                       self._max_batch_size, self._transactional)

    # ---- sending -----------------------------------------------------------------------------------------

    async def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                   timestamp_ms: int | None = None, headers: Headers = None) -> asyncio.Future[RecordMetadata]:
        """Queue a record; returns (once it is in a batch) an asyncio future of its RecordMetadata."""
        producer = self.engine()
        # Producer.send() could wait for the topic's metadata, for AddPartitionsToTxn, or for buffer memory
        # (when a new batch might not fit): then the record takes the slower way, serialized. The common case is
        # one compiled call (fastmq/kafka/_native/aio_send.pyx).
        assert self._send_path is not None      # made with the engine
        sent = self._send_path(topic, value, key, partition, timestamp_ms, headers)
        if not isinstance(sent, tuple):
            return sent
        value, key = sent
        return await self._queue_waiting(producer, topic, value, key, partition, timestamp_ms, headers)

    async def _append_waiting(self, producer: Producer, topic: str, value: Any, key: Any, partition: int | None,
                              timestamp_ms: int | None, headers: Headers) -> Any:
        """Producer.send() when it could wait: returns the record (fastmq FutureRecordMetadata). Metadata and
        AddPartitionsToTxn are waited for on a worker thread; buffer memory on the loop, until acknowledgements
        free some."""
        if self._transactional or topic not in producer.client.cluster.topics:
            return await asyncio.to_thread(producer.send, topic, value, key, headers, partition, timestamp_ms)
        await self._room_for(producer, self._max_batch_size + (len(key) if key is not None else 0)
                             + (len(value) if value is not None else 0))
        return producer.send(topic, value, key, headers, partition, timestamp_ms)

    async def _queue_waiting(self, producer: Producer, topic: str, value: Any, key: Any, partition: int | None,
                             timestamp_ms: int | None, headers: Headers) -> asyncio.Future[Any]:
        """send() when Producer.send() could wait (see _append_waiting)."""
        return self._futures.track(await self._append_waiting(producer, topic, value, key, partition, timestamp_ms,
                                                              headers))

    @overload
    async def send_many(self, topic: str, values: Sequence[Any], *, keys: Sequence[Any] | None = None,
                        headers: Sequence[Headers] | None = None, partition: int | None = None,
                        timestamp_ms: int | None = None, outcome: None = None
                        ) -> asyncio.Future[list[RecordMetadata]]: ...

    @overload
    async def send_many(self, topic: str, values: Sequence[Any], *, keys: Sequence[Any] | None = None,
                        headers: Sequence[Headers] | None = None, partition: int | None = None,
                        timestamp_ms: int | None = None, outcome: Callable[[list[Any]], Outcome]
                        ) -> asyncio.Future[Outcome]: ...

    async def send_many(self, topic: str, values: Sequence[Any], *, keys: Sequence[Any] | None = None,
                        headers: Sequence[Headers] | None = None, partition: int | None = None,
                        timestamp_ms: int | None = None,
                        outcome: Callable[[list[Any]], Any] | None = None) -> asyncio.Future[Any]:
        """Queue many records in order (keys and headers, when given, hold one entry per value, None for none).
        Returns, once every record is in a batch, one asyncio future of their RecordMetadata in the same order:
        set when all are acknowledged, or failing with the first record's error once all are done. No asyncio
        future is made per record: the records cost about what fastmq's Producer.send() costs. Given `outcome`,
        the future is set to outcome(records) instead (the records are fastmq FutureRecordMetadata, all done),
        or fails with what it raises: a caller that wants less than a RecordMetadata per record."""
        producer = self.engine()
        count = len(values)
        for name, column in (("keys", keys), ("headers", headers)):
            if column is not None and len(column) != count:
                raise ValueError(f"{len(column)} {name} for {count} values")
        values, keys = self._serialized(values, keys)
        nothing = repeat(None)
        rows = zip(nothing if keys is None else keys, values, nothing if headers is None else headers,
                   repeat(timestamp_ms))
        return RecordGroup(await self._append_rows(producer, topic, partition, rows,
                                                   _size_bound(values, keys, headers)), self._futures, outcome).future

    def _serialized(self, values: Sequence[Any], keys: Sequence[Any] | None) -> tuple[Any, Any]:
        """values and keys through the producer's serializers (keys all None when there are none to give)."""
        if self._key_serializer is not None:
            keys = [self._key_serializer(key) for key in (keys if keys is not None else [None] * len(values))]
        if self._value_serializer is not None:
            values = [self._value_serializer(value) for value in values]
        return values, keys

    async def send_placed(self, topic: str, values: list[Any], *, keys: Sequence[Any] | None = None,
                          headers: Sequence[Headers] | None = None, partition: int | None = None,
                          timestamp_ms: int | None = None,
                          outcome: Callable[[list[Any], bytearray], Outcome]) -> asyncio.Future[Outcome]:
        """send_many() for a caller that answers per record and wants no object per record (the HTTP proxy):
        the records go into the accumulator in one compiled call, and the future is set to
        outcome(batches, places) once every batch holding them is done (or fails with what outcome raises).
        batches are fastmq ProducerBatch objects; places holds, per record, two native int32: its batch's
        position in `batches` and its index in that batch (RecordAccumulator.send_placed). Keys hash as the
        default partitioner does: not for a producer with a custom partitioner or transactions."""
        producer = self.engine()
        if self._transactional or self._options["partitioner"] is not None:
            raise kerrors.IllegalStateError("send_placed() is for a producer without transactions or a custom "
                                            "partitioner: use send_many()")
        values, keys = self._serialized(values, keys)
        return await self._place(producer, topic, partition, values, keys, headers, timestamp_ms,
                                 _size_bound(values, keys, headers), outcome)

    async def _place(self, producer: Producer, topic: str, partition: int | None, values: Any, keys: Any,
                     headers: Any, timestamp_ms: int | None, size: int,
                     outcome: Callable[[list[Any], bytearray], Outcome]) -> asyncio.Future[Outcome]:
        """RecordAccumulator.send_placed() of serialized records (`size` bytes at most in the accumulator), and the
        future set to outcome(batches, places) once every batch holding them is done."""
        placed: tuple[list[Any], bytearray] | None = None
        if self._fits_now(producer, topic, size):
            placed = producer._accumulator.send_placed(topic, partition, values, keys, headers, timestamp_ms)
        if placed is None:      # metadata to fetch, or memory to wait for: on a worker thread
            placed = await asyncio.to_thread(_place_waiting, producer, topic, partition, values, keys, headers,
                                             timestamp_ms)
        if self._batch_waiters is None:
            self._batch_waiters = BatchWaiters(producer._accumulator, self._futures)
        return PlacedGroup(*placed, self._batch_waiters, outcome).future

    async def _append_rows(self, producer: Producer, topic: str, partition: int | None,
                           rows: Iterable[tuple[Any, Any, Headers, int | None]], size: int) -> list[Any]:
        """Append (key, value, headers, timestamp_ms) rows, `size` bytes at most in the accumulator; returns
        the records (fastmq FutureRecordMetadata). All at once when they fit now, else one at a time, waiting."""
        if self._fits_now(producer, topic, size):
            append = self._appender(producer, topic, partition)
            return [append(key, value, headers, timestamp_ms) for key, value, headers, timestamp_ms in rows]
        return [await self._append_waiting(producer, topic, value, key, partition, timestamp_ms, headers)
                for key, value, headers, timestamp_ms in rows]

    def _appender(self, producer: Producer, topic: str, partition: int | None) -> Callable[..., Any]:
        """append(key, value, headers, timestamp_ms) -> the record (fastmq FutureRecordMetadata), for records
        that fit now: straight into the accumulator when Producer.send() would add nothing to that (no custom
        partitioner, the topic's partitions known; transactions and serializers are handled before), which
        saves two Python calls a record."""
        accumulator = producer._accumulator
        if self._options["partitioner"] is None and accumulator.topic(topic).partition_count:
            return partial(accumulator.send, topic, partition)

        def send(key: Any, value: Any, headers: Headers, timestamp_ms: int | None) -> Any:
            return producer.send(topic, value, key, headers, partition, timestamp_ms)
        return send

    def _fits_now(self, producer: Producer, topic: str, size: int) -> bool:
        """Whether Producer.send() takes records of `size` bytes (a bound: _size_bound) without waiting: the
        topic's metadata is known, no transaction needs AddPartitionsToTxn, and buffer memory holds them even if
        every partition of the topic opens a batch and each of them fills."""
        info = producer.client.cluster.topics.get(topic)
        if self._transactional or info is None:
            return False
        batches = len(info.partitions) + size // self._max_batch_size + 1
        accumulator = producer._accumulator
        return accumulator.used_memory + size + batches * self._max_batch_size <= accumulator.buffer_memory

    async def _room_for(self, producer: Producer, need: int) -> None:
        """Wait until `need` more bytes fit in buffer memory, so that the accumulator never blocks the loop;
        KafkaTimeoutError after max_block_ms, as Producer.send() raises."""
        accumulator = producer._accumulator
        deadline = self._loop.time() + producer.max_block
        progress = self._futures.progress
        while accumulator.used_memory and accumulator.used_memory + need > accumulator.buffer_memory:
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                raise kerrors.KafkaTimeoutError(f"Failed to allocate memory within {producer.max_block:.1f} secs.")
            progress.clear()
            try:
                # Not only until `progress`: the records a send_many() is still appending are watched by no
                # future yet, and their acknowledgements free memory too.
                await asyncio.wait_for(progress.wait(), min(remaining, _MEMORY_POLL_S))
            except asyncio.TimeoutError:
                pass

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                            timestamp_ms: int | None = None, headers: Headers = None) -> RecordMetadata:
        """send(), then wait for the acknowledgement."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    def create_batch(self) -> BatchBuilder:
        """An empty batch of up to max_batch_size bytes, for send_batch(): its records are encoded as they are
        appended."""
        return BatchBuilder(self.engine()._accumulator.open_builder(), self._key_serializer, self._value_serializer)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[RecordMetadata]:
        """Send a batch's records to one partition, after the records sent there before; returns a future of the
        first record's RecordMetadata (the batch's base offset), failing if the batch fails. The batch is queued
        whole (Producer.send_built): nothing is done per record."""
        producer = self.engine()
        batch.close()
        if not batch.record_count():
            raise ValueError("the batch holds no records")
        built = batch.take()
        if self._fits_now(producer, topic, built[2]):
            sent = producer.send_built(topic, partition, *built)
        else:   # metadata to fetch, memory to wait for, or AddPartitionsToTxn: on a worker thread
            sent = await asyncio.to_thread(producer.send_built, topic, partition, *built)
        if self._batch_waiters is None:
            self._batch_waiters = BatchWaiters(producer._accumulator, self._futures)
        return PlacedGroup([sent], bytearray(), self._batch_waiters,
                           lambda batches, _places: batch.first_metadata(batches[0])).future

    async def flush(self) -> None:
        """Send everything queued now and wait for the acknowledgements."""
        await asyncio.to_thread(self.engine().flush)

    async def partitions_for(self, topic: str) -> set[int]:
        return await asyncio.to_thread(self.engine().partitions_for, topic)

    # ---- transactions ------------------------------------------------------------------------------------

    async def begin_transaction(self) -> None:
        self.engine().begin_transaction()

    async def commit_transaction(self) -> None:
        await asyncio.to_thread(self.engine().commit_transaction)

    async def abort_transaction(self) -> None:
        await asyncio.to_thread(self.engine().abort_transaction)

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, Any], group_id: str) -> None:
        """Commit a consumer group's offsets ({tp: offset or OffsetAndMetadata}) with the transaction."""
        await asyncio.to_thread(self.engine().send_offsets_to_transaction, offsets, group_id)

    def transaction(self) -> "TransactionContext":
        """`async with producer.transaction():` begins a transaction, commits it when the block ends, and
        aborts it when the block raises (unless the producer was fenced: then there is nothing to abort)."""
        return TransactionContext(self)


class RecordGroup:
    """One asyncio future for many records (fastmq FutureRecordMetadata), set once all are done to what
    `outcome(records)` answers (by default every record's RecordMetadata), or failed with what it raises.

    One record is watched at a time, the first not done yet: when its batch completes, the I/O thread hands one
    call to the loop, which passes over every record done by then (the rest of that batch, usually) and watches
    the next one still pending. A group costs a callback per batch it waits for, not one per record."""

    __slots__ = ("future", "_records", "_next", "_futures", "_outcome")

    def __init__(self, records: list[Any], futures: RecordFutures,
                 outcome: Callable[[list[Any]], Any] | None = None) -> None:
        self.future: asyncio.Future[Any] = futures.handoff.loop.create_future()
        self._records = records
        self._next = 0                      # the records before it are done
        self._futures = futures             # its handoff, and its progress event (memory may be free now)
        self._outcome = outcome or _metadata_of_all
        self._watch_next()

    def _watch_next(self, outcome: Any = None) -> None:
        # Loop thread (a completion is handed over by the I/O thread).
        records = self._records
        position = self._next
        self._futures.progress.set()
        while position < len(records):
            record = records[position]
            if not record.is_done:
                self._next = position
                record.add_both(self._futures.handoff.submit, self._watch_next)
                return
            position += 1
        self._next = position
        if self.future.done():              # cancelled by its waiter
            return
        try:
            result = self._outcome(records)
        except Exception as error:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


class BatchWaiters:
    """The calls waiting for batches to be done, on the loop: one watch of the accumulator per batch however many
    send_placed() groups wait for it (a batch holds the records of several requests), one call handed over when it
    is done."""

    def __init__(self, accumulator: Any, futures: RecordFutures) -> None:
        self._accumulator = accumulator
        self.futures = futures              # its handoff, and its progress event (memory may be free now)
        self._waiting: dict[Any, list[Callable[[], None]]] = {}
        self._done = partial(futures.handoff.submit, self._batch_done)

    def add(self, batch: Any, wake: Callable[[], None]) -> None:
        """Call wake() on the loop once `batch` is done (or, split, its first child)."""
        waiting = self._waiting.get(batch)
        if waiting is None:
            self._waiting[batch] = [wake]
            self._accumulator.watch(batch, self._done)
        else:
            waiting.append(wake)

    def _batch_done(self, batch: Any, outcome: Any) -> None:
        self.futures.progress.set()
        for wake in self._waiting.pop(batch):
            wake()


class PlacedGroup:
    """One asyncio future for the batches holding a send_placed()'s records, set to outcome(batches, places)
    once all are done. One batch is waited for at a time, the first not done yet (a split one stands for its
    leaves): nothing per record."""

    __slots__ = ("future", "_batches", "_places", "_pending", "_waiters", "_outcome")

    def __init__(self, batches: list[Any], places: bytearray, waiters: BatchWaiters,
                 outcome: Callable[[list[Any], bytearray], Any]) -> None:
        self.future: asyncio.Future[Any] = waiters.futures.handoff.loop.create_future()
        self._batches = batches
        self._places = places
        self._pending = batches[::-1]       # to look at, the next last
        self._waiters = waiters
        self._outcome = outcome
        self._wait_next()

    def _wait_next(self) -> None:
        # Loop thread (a completion is handed over by the I/O thread).
        pending = self._pending
        while pending:
            batch = pending[-1]
            if batch.is_done:
                pending.pop()
                continue
            leaves = batch.leaves()
            if leaves[0] is not batch:      # split: its children hold its records now
                pending.pop()
                pending.extend(reversed(leaves))
                continue
            self._waiters.add(batch, self._wait_next)
            return
        if self.future.done():              # cancelled by its waiter
            return
        try:
            result = self._outcome(self._batches, self._places)
        except Exception as error:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


def _place_waiting(producer: Producer, topic: str, partition: int | None, values: list[Any], keys: Any,
                   headers: Any, timestamp_ms: int | None) -> tuple[list[Any], bytearray]:
    """Worker thread: RecordAccumulator.send_placed() once the topic's partitions are known (fetching its
    metadata), waiting for buffer memory as Producer.send() does."""
    placed: tuple[list[Any], bytearray] = producer._with_metadata(
        topic, producer._accumulator.send_placed, partition, values, keys, headers, timestamp_ms)
    return placed


def _metadata_of_all(records: list[Any]) -> list[RecordMetadata]:
    """Every record's RecordMetadata; raises the first failed record's error."""
    results = [record.value for record in records]          # None for a record that failed
    if None in results:
        raise records[results.index(None)].exception
    return results


class TransactionContext:
    """What AIOKafkaProducer.transaction() returns."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def __aenter__(self) -> AIOKafkaProducer:
        await self._producer.begin_transaction()
        return self._producer

    async def __aexit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is None:
            await self._producer.commit_transaction()
        elif not isinstance(exc, (kerrors.ProducerFencedError, kerrors.InvalidProducerEpochError)):
            await self._producer.abort_transaction()


def _size_bound(values: Sequence[Any], keys: Sequence[Any] | None, headers: Sequence[Headers] | None) -> int:
    """At least the buffer memory the accumulator reserves for these records."""
    size = _RECORD_BOUND * len(values) + sum(map(len, filter(None, values)))        # None (and b"") left out
    if keys is not None:
        size += sum(map(len, filter(None, keys)))
    if headers is not None:
        size += sum(len(name) + (len(data) if data is not None else 0) + _HEADER_BOUND
                    for record_headers in headers if record_headers for name, data in record_headers)
    return size


def _keyed_partitioner(partitioner: Callable[[bytes | None, list[int], list[int]], int]) -> Callable[..., int]:
    """aiokafka's partitioner(key, all_partitions, available_partitions) as fastmq's
    partitioner(topic, key, value, all_partitions, available_partitions)."""
    def choose(topic: str, key: bytes | None, value: Any, partitions: list[int], available: list[int]) -> int:
        return partitioner(key, partitions, available)
    return choose
