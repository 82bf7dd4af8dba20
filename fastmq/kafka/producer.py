"""fastmq.kafka.Producer: the idiomatic Kafka producer.

    with Producer("127.0.0.1:9092", linger_ms=5, compression_type="lz4") as producer:
        future = producer.send("events", b"payload", key=b"user-1")
        producer.send_many("events", values)          # bulk: one call for many records
        producer.flush()
        print(future.get(10).offset)

send() encodes the record straight into its partition's open batch (compiled accumulator) and returns a
FutureRecordMetadata at once; the sender on the client's I/O thread compresses, sends and retries. The
producer is idempotent by default (acks=all, sequence numbers: retries never duplicate or reorder) and safe to
share between threads.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

from fastmq.closeable import Closeable
from fastmq.kafka._native.accumulator import FutureRecordMetadata, ProducerBatch, RecordAccumulator
from fastmq.client import NodeHealth
from fastmq.kafka import errors as kerrors
from fastmq.kafka.client import CLIENT_OPTIONS, ClientConfig, KafkaClient
from fastmq.kafka.sender import Sender
from fastmq.kafka.transactions import TransactionManager

_log = logging.getLogger(__name__)

CODECS = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Headers = Sequence[tuple[str, bytes | None]] | None
Partitioner = Callable[[str, bytes | None, Any, list[int], list[int]], int]


class Producer(Closeable):
    """A Kafka producer (see the module docstring). Options not listed here are ClientConfig's."""

    def __init__(
        self,
        bootstrap_servers: str | list[str] = "localhost",
        *,
        acks: int | str = -1,
        compression_type: str | None = None,
        compression_level: int = -1,
        batch_size: int = 16384,
        linger_ms: float = 0,
        buffer_memory: int = 33554432,
        max_block_ms: float = 60000,
        max_request_size: int = 1048576,
        request_timeout_ms: float = 30000,
        delivery_timeout_ms: float = 120000,
        retries: float = float("inf"),
        retry_backoff_ms: float = 100,
        enable_idempotence: bool = True,
        max_in_flight_requests_per_connection: int = 5,
        partitioner: Partitioner | None = None,
        key_serializer: Callable[[Any], bytes | None] | None = None,
        value_serializer: Callable[[Any], bytes | None] | None = None,
        avoid_failing_brokers_after: int = 3,
        avoid_failing_brokers_ms: float = 10000,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        **client_options: Any,
    ) -> None:
        unknown = set(client_options) - CLIENT_OPTIONS
        if unknown:
            raise kerrors.KafkaConfigurationError(f"Unrecognized configs: {sorted(unknown)}")
        if acks == "all":
            acks = -1
        if acks not in (0, 1, -1):
            raise kerrors.KafkaConfigurationError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if compression_type not in CODECS:
            raise kerrors.KafkaConfigurationError(f"Not supported codec: {compression_type!r}")
        if transactional_id is not None and not enable_idempotence:
            raise kerrors.KafkaConfigurationError("Cannot set transactional_id without enable_idempotence.")
        if enable_idempotence:
            if acks != -1:
                raise kerrors.KafkaConfigurationError("enable_idempotence needs acks='all'")
            if max_in_flight_requests_per_connection > 5:
                raise kerrors.KafkaConfigurationError("enable_idempotence allows at most 5 requests in flight")
            if retries == 0:
                raise kerrors.KafkaConfigurationError("enable_idempotence needs retries > 0")
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise kerrors.KafkaConfigurationError(
                "delivery_timeout_ms must be at least linger_ms + request_timeout_ms")
        self.max_block = max_block_ms / 1000.0
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._partitioner = partitioner
        self._closed = False
        config = ClientConfig(bootstrap_servers=bootstrap_servers, request_timeout_ms=request_timeout_ms,
                              max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
                              retry_backoff_ms=retry_backoff_ms, **client_options)
        self.client = KafkaClient(config, name=f"fastmq-producer-{config.client_id or id(self):x}"
                                  if config.client_id is None else f"fastmq-producer-{config.client_id}")
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, compression_type=CODECS[compression_type],
            compression_level=compression_level, buffer_memory=buffer_memory, max_block_ms=max_block_ms,
            delivery_timeout_ms=delivery_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            idempotent=enable_idempotence, max_in_flight=max_in_flight_requests_per_connection,
            wakeup=self.client.loop.wakeup, batch_full=self.client.loop.give_turn)
        self._txn = None
        if transactional_id is not None:
            self._txn = TransactionManager(self.client, self._accumulator, transactional_id,
                                           transaction_timeout_ms=transaction_timeout_ms,
                                           retry_backoff_ms=retry_backoff_ms, flush=self.flush)
        self._sender = Sender(self.client, self._accumulator, acks=acks, max_request_size=max_request_size,
                              request_timeout_ms=request_timeout_ms, retries=retries,
                              idempotent=enable_idempotence, retry_backoff_ms=retry_backoff_ms,
                              node_health=NodeHealth(avoid_failing_brokers_after, avoid_failing_brokers_ms / 1000.0),
                              transactions=self._txn)
        self.client.loop.add_poll_hook(self._sender.poll)
        self._accumulator.unknown_topic = self._send_slow
        if (type(self).send is Producer.send and key_serializer is None and value_serializer is None
                and partitioner is None and self._txn is None):
            # send() below, compiled: a record that needs nothing before the accumulator costs no Python frame.
            self.send = self._accumulator.send_record  # type: ignore[method-assign]
        self._started = time.monotonic()

    # ---- sending --------------------------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Headers = None,
             partition: int | None = None, timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Queue one record; returns its future at once (blocks only for metadata or buffer memory)."""
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(value)
        if partition is None and self._partitioner is not None:
            partition = self._choose_partition(self._partitioner, topic, key, value)
        if self._txn is None:
            # The common case straight into the accumulator, not through _append: a Python call per record
            # is a sixth of what the user thread spends on one.
            future = self._accumulator.send(topic, partition, key, value, headers, timestamp_ms)
            if future is not None:
                return future
        return self._append(topic, value, key, headers, partition, timestamp_ms)

    def _append(self, topic: str, value: Any, key: Any, headers: Headers, partition: int | None,
                timestamp_ms: int | None) -> FutureRecordMetadata:
        """Serialized record -> accumulator (fetching metadata first if needed); joins the record's
        partition to the transaction of a transactional producer."""
        if self._txn is not None:
            self._txn.check_can_send()
        future = self._accumulator.send(topic, partition, key, value, headers, timestamp_ms)
        if future is None:
            future = self._send_slow(topic, value, key, headers, partition, timestamp_ms)
        if self._txn is not None:
            self._txn.register({future.topic_partition}, self.max_block)
        return future

    def send_many(self, topic: str, values: Any, *, keys: Any = None, partition: int | None = None,
                  timestamp_ms: int | None = None) -> "BulkSendResult":
        """Queue many records in one call, without a future per record: values (and keys) are sequences of
        bytes-like objects or None, or pyarrow binary/string arrays (their buffers are read in place).
        Serializers apply; a custom partitioner is not used (keys hash as the default partitioner does).
        Returns a BulkSendResult that completes when every record is acknowledged."""
        if self._key_serializer is not None and keys is not None:
            keys = [None if k is None else self._key_serializer(k) for k in keys]
        if self._value_serializer is not None:
            values = [None if v is None else self._value_serializer(v) for v in values]
        if self._txn is not None:
            self._txn.check_can_send()
        batches = self._with_metadata(topic, self._accumulator.send_bulk, partition, values, keys, timestamp_ms)
        if self._txn is not None:
            self._txn.register({batch.topic_partition for batch in batches}, self.max_block)
        return BulkSendResult(batches, len(values))

    def send_built(self, topic: str, partition: int, builder: Any, record_count: int, size: int,
                   data_bytes: int) -> Any:
        """Queue a whole batch encoded through RecordAccumulator.open_builder()'s builder (AIOKafkaProducer's
        send_batch) on one partition, after the records queued there before; returns its ProducerBatch. Blocks
        only for metadata, buffer memory or AddPartitionsToTxn, as send() does."""
        if self._txn is not None:
            self._txn.check_can_send()
        batch = self._with_metadata(topic, self._accumulator.send_built, partition, builder, record_count, size,
                                    data_bytes)
        if self._txn is not None:
            self._txn.register({batch.topic_partition}, self.max_block)
        return batch

    def _with_metadata(self, topic: str, append: Callable[..., Any], *args: Any) -> Any:
        """append(topic, *args), an accumulator call that answers None while the topic's partitions are not known:
        once more after fetching them, if it did."""
        appended = append(topic, *args)
        return self._after_metadata(topic, append, *args) if appended is None else appended

    def _after_metadata(self, topic: str, append: Callable[..., Any], *args: Any) -> Any:
        """append(topic, *args) once the topic's partitions are fetched (the broker creates the topic when it
        auto-creates topics); KafkaTimeoutError when they are still not known."""
        info = self.client.topic_metadata(topic, self.max_block)
        self._accumulator.update_topic(topic, info.leaders)
        appended = append(topic, *args)
        if appended is None:
            raise kerrors.KafkaTimeoutError(f"Failed to update metadata for {topic!r} after {self.max_block:.1f} secs.")
        return appended

    def _send_slow(self, topic: str, value: Any, key: Any, headers: Headers, partition: int | None,
                   timestamp_ms: int | None) -> FutureRecordMetadata:
        """The topic's partitions are not known yet: fetch metadata (creating the topic when the broker
        auto-creates), then append."""
        if self._closed:
            raise kerrors.IllegalStateError("Producer already closed")
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        size = (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
        if size > self.max_request_size or size > self.buffer_memory:
            raise kerrors.MessageSizeTooLargeError(
                f"The message is {size} bytes, larger than max_request_size or buffer_memory")
        future: FutureRecordMetadata = self._after_metadata(topic, self._accumulator.send, partition, key, value,
                                                            headers, timestamp_ms)
        return future

    def _choose_partition(self, partitioner: Partitioner, topic: str, key: Any, value: Any) -> int:
        info = self.client.cluster.topics.get(topic)
        if info is None:
            info = self.client.topic_metadata(topic, self.max_block)
        partitions = [p.partition for p in info.partitions]
        available = [p.partition for p in info.partitions if p.leader >= 0]
        return partitioner(topic, key, value, partitions, available)

    # ---- transactions ------------------------------------------------------------------------------------------

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise kerrors.IllegalStateError("transactions need a producer with a transactional_id")
        return self._txn

    def init_transactions(self, timeout: float | None = None) -> None:
        """Take this transactional id's producer id and epoch (fencing older producers of the id)."""
        self._transactions().init_transactions(self.max_block if timeout is None else timeout)

    def begin_transaction(self) -> None:
        self._transactions().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: Any, timeout: float | None = None) -> None:
        """Commit consumer offsets as part of the transaction. group: a group id, or a consumer's
        ConsumerGroupMetadata (group_id, generation_id, member_id, group_instance_id)."""
        txn = self._transactions()
        timeout = self.max_block if timeout is None else timeout
        if isinstance(group, str):
            txn.send_offsets_to_transaction(offsets, group, timeout=timeout)
        else:
            txn.send_offsets_to_transaction(offsets, group.group_id, group.generation_id, group.member_id,
                                            group.group_instance_id, timeout=timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records, then make them visible atomically."""
        self._transactions().commit_transaction(self.max_block if timeout is None else timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the transaction's unsent records and mark the sent ones aborted."""
        self._transactions().abort_transaction(self.max_block if timeout is None else timeout)

    # ---- flush and close -----------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it is acknowledged (or failed)."""
        pending = self._accumulator.begin_flush()
        try:
            wait_for_batches(pending, timeout)
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop. With timeout=0, unsent records fail at once (records appended by
        other threads while closing included) and nothing waits."""
        if self._closed:
            return
        self._closed = True
        acc = self._accumulator
        error = kerrors.KafkaError("Producer is closed forcefully.")
        if timeout == 0:
            acc.abort(error)        # before anything is made urgent: nothing unsent goes out now
        else:
            acc.begin_close()       # everything unsent is ready now, linger or not
            deadline = None if timeout is None else time.monotonic() + timeout
            while acc.has_incomplete() and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.005)
        forced = acc.has_incomplete()
        if forced:
            acc.abort(error)
            if timeout != 0:
                _log.warning("producer closed with records unacknowledged after %.1f s", timeout or 0)
        self._sender.closing = True
        self.client.loop.remove_poll_hook(self._sender.poll)
        self.client.close()
        if forced:
            acc.abort(error, in_flight=True)     # requests the closed connections left unanswered

    # ---- information ------------------------------------------------------------------------------------------

    def partitions_for(self, topic: str) -> set[int]:
        """The partition ids of a topic (fetching metadata if needed)."""
        info = self.client.cluster.topics.get(topic) or self.client.topic_metadata(topic, self.max_block)
        return {p.partition for p in info.partitions}

    def metrics(self) -> dict[str, dict[str, float]]:
        """Throughput and health figures since the producer started (kafka-python's grouping)."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        m = self._sender.metrics
        acc = self._accumulator
        return {"producer-metrics": {
            "record-send-total": float(m.records),
            "record-send-rate": m.records / elapsed,
            "byte-total": float(m.bytes),
            "byte-rate": m.bytes / elapsed,
            "records-appended-total": float(acc.records_appended),
            "batch-size-avg": m.bytes / m.batches if m.batches else 0.0,
            "records-per-request-avg": m.records / m.requests if m.requests else 0.0,
            "request-total": float(m.requests),
            "request-latency-avg": m.latency_total / m.responses * 1000 if m.responses else 0.0,
            "request-latency-max": m.latency_max * 1000,
            "record-retry-total": float(m.retries),
            "record-error-total": float(m.errors),
            "buffer-available-bytes": float(acc.buffer_memory - acc.used_memory),
            "outgoing-byte-total": float(self.client.metrics.bytes_out),
        }}


class BulkSendResult:
    """The outcome of Producer.send_many(): complete when every batch holding its records is."""

    def __init__(self, batches: list[ProducerBatch], count: int) -> None:
        self._batches = batches
        self.count = count

    def _leaves(self) -> list[ProducerBatch]:
        return [leaf for batch in self._batches for leaf in batch.leaves()]

    @property
    def is_done(self) -> bool:
        return all(batch.is_done for batch in self._leaves())

    @property
    def exception(self) -> BaseException | None:
        """The first error among the records' batches (None while pending or when all succeeded)."""
        for batch in self._leaves():
            if batch.is_done and batch.error is not None:
                return batch.error
        return None

    def get(self, timeout: float | None = None) -> int:
        """Wait until every record is acknowledged; returns how many were sent, raises the first error."""
        for batch in wait_for_batches(self._batches, timeout):
            if batch.error is not None:
                raise batch.error
        return self.count


def wait_for_batches(batches: list[Any], timeout: float | None) -> list[Any]:
    """Wait until these batches are done (following batches split after a too-large refusal to the smaller
    ones that took their records); returns the done batches. KafkaTimeoutError when time runs out."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pending, done = list(batches), []
    while pending:
        batch = pending.pop()
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not batch._wait(remaining):
            waiting = [batch] + [other for other in pending if not other.is_done]
            raise kerrors.KafkaTimeoutError(f"Timeout after waiting for {timeout} secs: {len(waiting)} batches not "
                                            f"done, as {batch!r}")
        if batch.is_done:
            done.append(batch)
        else:
            pending.extend(batch.leaves())
    return done
