"""Reading one offset range of one partition as Arrow record batches of the Spark schema (on executors).

Fetch requests go straight to the partition's leader through fastmq's KafkaClient, one ahead of the batch
being handed to Spark (the next response arrives while Spark takes the current one). Each response's record
set is decoded by the columnar reader (fastmq.kafka.columnar) with no Python object per record; only the
batch headers are walked in Python, once per record batch, for what the columnar reader leaves out: the
timestamp type, control batches and, under read_committed, the batches of aborted transactions.

Record batch header (v2, big-endian), as walked here:
    baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16,
    lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64, producerId int64, producerEpoch int16,
    baseSequence int32, recordCount int32                               (61 bytes; batchLength counts from
                                                                        partitionLeaderEpoch on)
attributes: bits 0-2 compression, bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional, bit 5 control.

Ranges that are gone (deleted by retention, a truncated or recreated topic) raise DataLossError with the
lost range when failOnDataLoss is true; else they are logged and skipped.
"""
from __future__ import annotations

import atexit
import logging
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import ClientConfig, KafkaClient
from fastmq.kafka.columnar import read_table
from fastmq.kafka.protocol.schema import ZERO_UUID
from fastmq.kafka.structs import TopicPartition
from fastmq.spark.offsets import shared_consumer
from fastmq.spark.options import KafkaOptions
from fastmq.spark.schema import ConstantColumns, numpy_to_arrow, spark_batch

_log = logging.getLogger(__name__)

_HEADER = struct.Struct(">qiibIhiqqqhii")
LOG_OVERHEAD = 12                       # baseOffset + batchLength
TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, CONTROL_BIT = 0x08, 0x10, 0x20
FETCH_MAX_WAIT_MS = 200
DEFAULT_PARTITION_FETCH_BYTES = 8 << 20     # ~70k records of 100 B per response: Spark prefers large batches
TOPIC_ID_MIN_VERSION = 13


class DataLossError(RuntimeError):
    """Records a query should read are gone (failOnDataLoss=true)."""


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one partition; picklable, part of an InputPartition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def data_loss(options: KafkaOptions, message: str) -> None:
    """Raise or log, as failOnDataLoss says."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. Some data may have been lost because they are not available in Kafka any "
                            "more; either the data was aged out by Kafka or the topic may have been deleted before "
                            "all the data in the topic was processed. If you don't want your query to fail in such "
                            "cases, set the source option failOnDataLoss to false.")
    _log.warning("%s (skipped: failOnDataLoss is false)", message)


# ---- one client per executor process and configuration (Python workers are reused across tasks) ---------------

_clients: dict[tuple[Any, ...], KafkaClient] = {}
_clients_lock = threading.Lock()


def shared_client(options: KafkaOptions) -> KafkaClient:
    key = (options.bootstrap_servers, options.client)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            config = ClientConfig(**options.client_config(), client_id="fastmq-spark")
            config.receive_message_max_bytes = max(config.receive_message_max_bytes,
                                                   _partition_fetch_bytes(options) * 2 + (1 << 20))
            client = _clients[key] = KafkaClient(config, name="fastmq-spark")
        return client


@atexit.register
def _close_clients() -> None:
    with _clients_lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


def _partition_fetch_bytes(options: KafkaOptions) -> int:
    return int(dict(options.reader).get("max_partition_fetch_bytes", DEFAULT_PARTITION_FETCH_BYTES))


# ---- the read ------------------------------------------------------------------------------------------------

class _AbortedTransactions:
    """Kafka's read_committed filter: a transactional batch is dropped when its producer has an aborted
    transaction that began at or before it and whose abort marker (a control batch) has not passed yet."""

    def __init__(self, aborted: list[Any] | None) -> None:
        self.pending = sorted(((a.first_offset, a.producer_id) for a in aborted or ()), reverse=True)
        self.active: set[int] = set()

    def is_aborted(self, last_offset: int, producer_id: int, attributes: int) -> bool:
        while self.pending and self.pending[-1][0] <= last_offset:
            self.active.add(self.pending.pop()[1])
        if attributes & CONTROL_BIT:
            self.active.discard(producer_id)      # the marker that ends its transaction
            return False
        return bool(attributes & TRANSACTIONAL_BIT) and producer_id in self.active


def batch_headers(records: Any) -> Iterator[tuple[int, int, int, int, int]]:
    """(position, first offset, last offset, attributes, producer id) of every complete batch of a record set;
    a truncated last batch, normal at the end of a fetch, ends it."""
    view = memoryview(records)
    size = len(view)
    pos = 0
    while pos + _HEADER.size <= size:
        (base, length, _, magic, _, attributes, last_delta, _, _, producer_id, _, _, _) = _HEADER.unpack_from(view, pos)
        if pos + LOG_OVERHEAD + length > size:
            return
        if magic != 2:
            raise kerrors.UnsupportedVersionError(f"record batch magic {magic}: fastmq's Spark source reads v2 only")
        yield pos, base, base + last_delta, attributes, producer_id
        pos += LOG_OVERHEAD + length


def walk_batches(records: Any, aborted: Any | None) -> tuple[int, list[tuple[int, int, int]]]:
    """(offset after the last complete batch or -1 when none, [(first, last offset, timestamp type or -1 for
    dropped)] of every complete data batch). aborted: None, or what says which batches to drop, with
    is_aborted(last offset, producer id, attributes) called for every batch in order, control batches too."""
    next_offset = -1
    batches: list[tuple[int, int, int]] = []
    for _, base, last, attributes, producer_id in batch_headers(records):
        next_offset = last + 1
        dropped = aborted is not None and aborted.is_aborted(last, producer_id, attributes)
        if attributes & CONTROL_BIT:
            continue
        batches.append((base, last, -1 if dropped else int(bool(attributes & TIMESTAMP_TYPE_BIT))))
    return next_offset, batches


def records_to_spark(records: Any, batches: list[tuple[int, int, int]], start: int, end: int, topic: str,
                     partition: int, include_headers: bool, constants: ConstantColumns) -> pa.RecordBatch | None:
    """The records of a record set (v2 batches, walked by walk_batches into `batches`) within [start, end)
    as one Spark-schema RecordBatch, without the records of dropped (aborted) batches; None when none."""
    table = read_table(records, view_types=False)
    count = table.num_rows
    if not count:
        return None
    kinds = {kind for _, _, kind in batches}
    offsets = np.frombuffer(table.column("offset").chunk(0).buffers()[1], dtype=np.int64, count=count)
    keep: np.ndarray | None = None
    if len(kinds) == 1 and -1 not in kinds:
        timestamp_types = constants.get(kinds.pop(), pa.int32(), count)
    else:                                        # mixed timestamp types, or records of aborted transactions
        firsts = np.fromiter((b[0] for b in batches), dtype=np.int64, count=len(batches))
        types = np.fromiter((b[2] for b in batches), dtype=np.int32, count=len(batches))
        record_types = types[np.searchsorted(firsts, offsets, side="right") - 1]
        if -1 in kinds:
            keep = record_types >= 0
        timestamp_types = numpy_to_arrow(record_types, pa.int32())
    batch = spark_batch(table, topic=topic, partition=partition, timestamp_types=timestamp_types,
                        include_headers=include_headers, constants=constants)
    # A compressed batch comes whole even when the fetch began inside it; the range may end inside one.
    in_range = (offsets >= start) & (offsets < end)
    keep = in_range if keep is None else keep & in_range
    if keep.all():
        return batch
    first, stop = int(np.searchsorted(offsets, start)), int(np.searchsorted(offsets, end))
    if keep[first:stop].all() and keep.sum() == stop - first:
        return batch.slice(first, stop - first)
    return batch.filter(numpy_to_arrow(keep, pa.bool_()))


class PartitionReader:
    """Fetches one OffsetRange and yields its records as Spark-schema RecordBatches."""

    def __init__(self, options: KafkaOptions, offsets: OffsetRange) -> None:
        self.options = options
        self.range = offsets
        self.tp = TopicPartition(offsets.topic, offsets.partition)
        self.client = shared_client(options)
        self.read_committed = options.read_committed
        self.partition_bytes = _partition_fetch_bytes(options)
        self.deadline_s = options.poll_timeout_ms / 1000.0
        self.constants = ConstantColumns()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        offset, end = self.range.start, self.range.end
        if offset >= end:
            return
        pending = self._fetch(offset)
        waited_since = time.monotonic()
        while offset < end:
            data = self._result(pending)
            if data.error_code == kerrors.OffsetOutOfRangeError.errno:
                offset = self._out_of_range(offset, end)
                if offset >= end:
                    return
                pending = self._fetch(offset)
                continue
            if data.error_code:
                error = kerrors.for_code(data.error_code)
                if error.invalid_metadata or error.retriable:
                    self._check_deadline(waited_since, offset, error.__name__)
                    self.client.request_update()
                    time.sleep(0.1)
                    pending = self._fetch(offset)
                    continue
                raise error(f"fetch of {self.tp} at offset {offset}")
            records = data.records
            next_offset, batches = (walk_batches(records, _AbortedTransactions(data.aborted_transactions)
                                                  if self.read_committed else None)
                                    if records is not None and len(records) else (-1, []))
            if next_offset < 0:                    # nothing there (yet)
                high = data.last_stable_offset if self.read_committed and data.last_stable_offset >= 0 \
                    else data.high_watermark
                if high <= offset < end and not self.read_committed:
                    data_loss(self.options, f"{self.tp}: offsets [{high}, {end}) are gone (the partition ends at "
                              f"{high})")
                    return
                self._check_deadline(waited_since, offset, "no records")
                pending = self._fetch(offset)
                continue
            waited_since = time.monotonic()
            if next_offset < end:
                pending = self._fetch(next_offset)      # the next response comes while Spark takes this one
            batch = records_to_spark(records, batches, offset, end, self.tp.topic, self.tp.partition,
                                     self.options.include_headers, self.constants)
            offset = next_offset
            if batch is not None and batch.num_rows:
                yield batch

    # ---- requests ----------------------------------------------------------------------------------------------

    def _fetch(self, offset: int) -> tuple[Any, int]:
        client = self.client
        leader = self._leader()
        topic_info = client.cluster.topics.get(self.tp.topic)
        topic_id = topic_info.topic_id if topic_info is not None and topic_info.topic_id is not None else ZERO_UUID
        F = kp.FetchRequest
        request = F(max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=self.partition_bytes,
                    isolation_level=1 if self.read_committed else 0, session_id=0, session_epoch=-1,
                    topics=[F.FetchTopic(topic=self.tp.topic, topic_id=topic_id, partitions=[F.FetchPartition(
                        partition=self.tp.partition, fetch_offset=offset, partition_max_bytes=self.partition_bytes)])],
                    forgotten_topics_data=[], rack_id="")
        timeout = client.config.request_timeout_ms / 1000.0 + FETCH_MAX_WAIT_MS / 1000.0
        return client.call(leader, request, timeout), offset

    def _leader(self) -> int:
        """The partition's leader, refreshing metadata while it is unknown: this process's client may have
        metadata from before partitions were added to the topic."""
        client = self.client
        deadline = time.monotonic() + self.deadline_s
        while True:
            leader = client.cluster.leader_for(self.tp)
            if leader >= 0:
                return leader
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise kerrors.UnknownTopicOrPartitionError(f"{self.tp}: no such partition, or no leader for it, "
                                                           f"within {self.deadline_s:.0f} s")
            client.topic_metadata(self.tp.topic, remaining)
            if client.cluster.leader_for(self.tp) < 0:
                client.wait_for_metadata(client.request_update(f"leader of {self.tp}"), min(1.0, remaining))

    def _result(self, pending: tuple[Any, int]) -> Any:
        future, offset = pending
        limit = self.client.config.request_timeout_ms / 1000.0 + FETCH_MAX_WAIT_MS / 1000.0 + 1.0
        try:
            response = future.result(limit)
        except TimeoutError:
            raise kerrors.KafkaTimeoutError(f"no answer to a fetch of {self.tp} at {offset} within {limit:.0f} s; "
                                            f"{self.client.connection_trouble()}") from None
        if response.error_code:
            raise kerrors.for_code(response.error_code)(f"fetch of {self.tp} at offset {offset}")
        for topic in response.responses:
            for data in topic.partitions:
                if data.partition_index == self.tp.partition:
                    return data
        raise kerrors.KafkaProtocolError(f"the fetch response for {self.tp} does not name it")

    def _out_of_range(self, offset: int, end: int) -> int:
        """The range starts before the log's start (records deleted) or beyond its end: where to go on."""
        consumer = shared_consumer(self.options)
        earliest = consumer.beginning_offsets([self.tp], self.deadline_s)[self.tp]
        latest = consumer.end_offsets([self.tp], self.deadline_s)[self.tp]
        if offset < earliest:
            data_loss(self.options, f"{self.tp}: offsets [{offset}, {min(earliest, end)}) were deleted (the log "
                      f"starts at {earliest})")
            return earliest
        data_loss(self.options, f"{self.tp}: offsets [{max(offset, latest)}, {end}) are gone (the partition ends at "
                  f"{latest})")
        return end

    def _check_deadline(self, since: float, offset: int, why: str) -> None:
        if time.monotonic() - since > self.deadline_s:
            raise kerrors.KafkaTimeoutError(
                f"{self.tp}: no records at offset {offset} (range end {self.range.end}) for "
                f"{self.deadline_s:.0f} s ({why}); kafkaConsumer.pollTimeoutMs sets this limit")
