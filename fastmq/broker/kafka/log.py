"""Kafka partitions on the store: a partition is a store queue, an offset its ConsumeQueue logical offset.

PartitionLogs.append turns a produced record set into CommitLog messages (kafka_store.fill_batch, one compiled
call), checks the producer (idempotent sequences; for a transactional batch, that its transaction is open on the
partition: PartitionTransactions), appends, and counts; read() turns ConsumeQueue units into record batches
(scan_queue -> read_records -> kafka_store.build_batches). write_marker() appends a transaction's commit or abort
marker and closes it on the partition.

Offsets: the high watermark is the queue's maximum (a single node acknowledges what it stored); the last stable
offset is where the earliest open transaction starts, else the high watermark; the log start offset is the
queue's minimum, or where DeleteRecords moved it (config/kafkaLogStartOffsets.json; the store's cleanup removes
the files below it in its own time).

Offsets by timestamp follow the records' own timestamps, which need not grow with the offsets: a time index per
partition keeps, for every full window of WINDOW records, the largest timestamp up to the end of that window (a
non-decreasing sequence, as Kafka's time index). The first record at or after a time is in the first window whose
running maximum reaches it; only that window (or the unindexed tail) is read. The index is built lazily from the
log, so it costs appends nothing and survives restarts by being rebuilt.
"""
from __future__ import annotations

import bisect
import dataclasses
import logging
import time
from array import array

from pathlib import Path
from typing import Any, Callable

from fastmq.broker.kafka._native import kafka_store
from fastmq.broker.idempotence import ProducerStateManager, next_sequence
from fastmq.broker.kafka.errors import NONE, kafka_code
from fastmq.broker.partition_transactions import PartitionTransactions
from fastmq.broker.persist import ConfigWriter
from fastmq.broker.stats import BrokerStats
from fastmq.broker.kafka import topic_rules
from fastmq.broker.topics import Topic
from fastmq.errors import ProtocolError
from fastmq.kafka import errors as kerrors
from fastmq.store import MessageStore
from fastmq.store.config import ConfigManager, _require_dict
from fastmq.store.errors import MessageIllegalError, StoreError

log = logging.getLogger(__name__)

WINDOW = 4096                 # records per time-index window
MAX_UNITS_PER_READ = 65536    # ConsumeQueue units one read looks at
# A CommitLog record is larger than the Kafka record it came from (its fixed header is 90-odd bytes): reads
# select this many times the wanted Kafka bytes in CommitLog bytes, and the batch builder cuts exactly.
COMMITLOG_BYTES_PER_KAFKA_BYTE = 2

KAFKA_STORAGE_ERROR = kerrors.KafkaStorageError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = kerrors.TransactionalIdAuthorizationFailedError.errno
OUT_OF_ORDER_SEQUENCE_NUMBER = kerrors.OutOfOrderSequenceNumberError.errno
_PRODUCE_ERRORS = (kerrors.CorruptRecordError, kerrors.MessageSizeTooLargeError, kerrors.InvalidRecordError,
                   kerrors.UnsupportedForMessageFormatError)


@dataclasses.dataclass
class AppendResult:
    error: int = 0
    base_offset: int = -1
    log_start_offset: int = -1
    end_position: int = 0            # CommitLog offset that acks=all waits to be durable (0: nothing to wait for)
    message: str | None = None
    appended: bool = False
    log_append_time: int = -1        # ms: the records' timestamp in a LogAppendTime topic, else -1


class TimeIndex:
    __slots__ = ("starts", "maxima", "indexed_to")

    def __init__(self) -> None:
        self.starts = array("q")      # first offset of each full window
        self.maxima = array("q")      # largest timestamp from the log start to the end of each window
        self.indexed_to = -1          # offset after the last full window (-1: nothing indexed yet)


class LogStartFile(ConfigManager):
    """config/kafkaLogStartOffsets.json: {"p@topic": offset} for the partitions DeleteRecords moved."""

    file_name = "kafkaLogStartOffsets.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.offsets: dict[tuple[str, int], int] = {}
        self.snapshot: dict[str, int] = {}

    def encode(self) -> dict[str, int]:
        return self.snapshot

    def decode(self, obj: Any) -> None:
        for key, offset in _require_dict(obj, self.file_name).items():
            partition, _, topic = key.partition("@")
            self.offsets[(topic, int(partition))] = int(offset)


class PartitionLogs:
    def __init__(self, store: MessageStore, producers: ProducerStateManager, stats: BrokerStats,
                 writer: ConfigWriter, index_keys: bool = False) -> None:
        self.store = store
        self.producers = producers
        self.stats = stats
        self.writer = writer
        self.index_keys = index_keys
        self.transactions = PartitionTransactions()
        self._time_indexes: dict[tuple[str, int], TimeIndex] = {}
        # Records gathered for a fetch, reused from one read to the next (reads happen on one thread).
        self._read_buffer = bytearray()
        self._log_starts = LogStartFile(store.root / "config")
        self._log_starts.load()

    # -- offsets ----------------------------------------------------------------------------------------------

    def log_start_offset(self, topic: str, partition: int) -> int:
        return self._after_deleted_records(topic, partition, self.store.get_min_offset(topic, partition))

    def _after_deleted_records(self, topic: str, partition: int, start: int) -> int:
        # The store's first offset, or the log start DeleteRecords moved past it
        moved = self._log_starts.offsets.get((topic, partition))
        return start if moved is None else max(start, moved)

    def high_watermark(self, topic: str, partition: int) -> int:
        return self.store.get_max_offset(topic, partition)

    def last_stable_offset(self, topic: str, partition: int) -> int:
        return self.transactions.last_stable_offset((topic, partition), self.high_watermark(topic, partition))

    def offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(log start, high watermark, last stable offset) at once, as a Fetch answers them for every partition."""
        start, end = self.store.get_offset_range(topic, partition)
        return (self._after_deleted_records(topic, partition, start), end,
                self.transactions.last_stable_offset((topic, partition), end))

    def delete_records(self, entries: list[tuple[str, int, int]], on_durable: Callable[[bool], None]) -> list[int]:
        """Move the log starts of (topic, partition, offset) entries up to offset (-1: the high watermark); the
        new log starts. on_durable(ok) once they are written. The caller checked the offsets are within the logs.
        """
        starts = []
        for topic, partition, offset in entries:
            if offset < 0:
                offset = self.high_watermark(topic, partition)
            start = max(offset, self.log_start_offset(topic, partition))
            self._log_starts.offsets[(topic, partition)] = start
            starts.append(start)
        self._write_log_starts(on_durable)
        return starts

    def _write_log_starts(self, on_durable: Callable[[bool], None] | None = None) -> None:
        self._log_starts.snapshot = {f"{p}@{t}": offset for (t, p), offset in self._log_starts.offsets.items()}
        self.writer.write(self._log_starts, on_durable)

    # -- produce ----------------------------------------------------------------------------------------------

    def append(self, topic: Topic, partition: int, records: bytes | bytearray | memoryview,
               transactional: bool = False) -> AppendResult:
        """Append a produced record set; `transactional`: the request named a transactional id, without which
        transactional batches are refused."""
        store = self.store
        append_time = int(time.time() * 1000) if topic_rules.log_append_time(topic) else -1
        try:
            batch = store.new_batch(topic.name, partition)
            produced = kafka_store.fill_batch(batch, records, topic_rules.max_message_bytes(topic), self.index_keys,
                                              log_append_time=append_time)
        except _PRODUCE_ERRORS as exc:
            return AppendResult(exc.errno, message=str(exc))
        except ProtocolError as exc:          # framing that is not even a batch
            return AppendResult(kerrors.CorruptRecordError.errno, message=str(exc))
        # Batches of a plain producer (no producer id, no transaction) skip the producer bookkeeping, which is
        # most of a small batch's cost here.
        with_producer = False
        for entry in produced:
            if entry[6]:
                if not transactional:
                    return AppendResult(TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                        message="transactional records need the request's transactional id")
                with_producer = True
            elif entry[0] >= 0:
                with_producer = True
        if with_producer:
            refused = self._check_producers(topic.name, partition, produced)
            if refused is not None:
                return refused
        try:
            result = store.append_batch(batch)
        except MessageIllegalError as exc:
            return AppendResult(kerrors.MessageSizeTooLargeError.errno, message=str(exc))
        except StoreError as exc:
            log.error("appending to %s-%d failed: %s", topic.name, partition, exc)
            return AppendResult(KAFKA_STORAGE_ERROR, message=str(exc))
        base_offset = result.queue_offset
        if with_producer:
            offset = base_offset
            for producer_id, epoch, first, last, count, _max_timestamp, in_transaction in produced:
                if producer_id >= 0:
                    self.producers.record(topic.name, partition, producer_id, epoch, first, last, offset)
                if in_transaction:
                    self.transactions.appended((topic.name, partition), producer_id, offset)
                offset += count
        self.stats.put(topic.name, batch.count, len(records))
        return AppendResult(NONE, base_offset, self.log_start_offset(topic.name, partition), result.end_offset,
                            appended=True, log_append_time=append_time)

    def write_marker(self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool) -> int:
        """Append a transaction marker and close the transaction on the partition; the CommitLog position that
        makes it durable."""
        batch = self.store.new_batch(topic, partition)
        kafka_store.add_control_record(batch, producer_id, epoch, commit, 0, int(time.time() * 1000))
        result = self.store.append_batch(batch)
        self.transactions.close((topic, partition), producer_id, result.queue_offset, aborted=not commit)
        self.producers.fence(topic, partition, producer_id, epoch)
        return result.end_offset

    def when_flushed(self, position: int, callback: Callable[[bool], None]) -> None:
        self.store.when_flushed(position, callback)

    def _check_producers(self, topic: str, partition: int, produced: list[tuple[int, int, int, int, int, int, bool]]
                         ) -> AppendResult | None:
        """None to append; else the answer: a duplicate's original offset, a sequence error, or a transactional
        batch whose transaction is not open on the partition."""
        duplicate = self._check_sequences(topic, partition, produced)
        if duplicate is not None:
            return duplicate
        for producer_id, epoch, _first, _last, _count, _ts, in_transaction in produced:
            refusal = self.transactions.check((topic, partition), producer_id, epoch) if in_transaction else None
            if refusal is not None:
                return AppendResult(kafka_code(refusal), message=f"producer {producer_id} epoch {epoch} has no open "
                                                                 f"transaction on {topic}-{partition}")
        return None

    def _check_sequences(self, topic: str, partition: int, produced: list[tuple[int, int, int, int, int, int, bool]]
                         ) -> AppendResult | None:
        """None to append; else the answer (a duplicate's original offset, or a sequence error)."""
        previous = None
        for index, (producer_id, epoch, first, last, _count, _ts, _transactional) in enumerate(produced):
            if producer_id < 0:
                previous = None
                continue
            if previous is not None and previous[0] == producer_id:
                # A later batch of the same request continues the one before it.
                if epoch != previous[1] or first != next_sequence(previous[2]):
                    return AppendResult(OUT_OF_ORDER_SEQUENCE_NUMBER, message="batches of one request are not "
                                                                              "in sequence")
            else:
                refusal, duplicate_offset = self.producers.check(topic, partition, producer_id, epoch, first, last)
                if refusal is not None:
                    return AppendResult(kafka_code(refusal),
                                        message=f"producer {producer_id} epoch {epoch} sequence {first}")
                if duplicate_offset >= 0:
                    if index:
                        return AppendResult(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                            message="a duplicate batch follows a new one in one request")
                    log.debug("%s-%d: duplicate batch of producer %d (sequence %d) answered with offset %d",
                              topic, partition, producer_id, first, duplicate_offset)
                    # The original may still wait for its fsync: an acks=all answer waits for everything written.
                    return AppendResult(NONE, duplicate_offset, self.log_start_offset(topic, partition),
                                        self.store.get_max_phy_offset())
            previous = (producer_id, epoch, last)
        return None

    # -- fetch ------------------------------------------------------------------------------------------------

    def read(self, topic: str, partition: int, offset: int, end: int, max_bytes: int, client_id: str | None = None,
             take_first: bool = True, log_append_time: bool = False) -> tuple[bytes, int]:
        """Record batches of the records from `offset` up to `end` (exclusive: the high watermark, or the last
        stable offset), within max_bytes (with take_first, at least one record if there is one), and the offset
        after the last record in them; (b"", offset) when there is nothing to read. The caller has checked that
        offset lies within the log. log_append_time: the topic is a LogAppendTime topic."""
        if offset >= end:
            return b"", offset
        units = self.store.scan_queue(topic, partition, offset,
                                      min(MAX_UNITS_PER_READ, max(1, max_bytes // 16), end - offset),
                                      max_bytes=max(1, max_bytes) * COMMITLOG_BYTES_PER_KAFKA_BYTE)
        if not len(units):
            return b"", offset
        records, count = self.store.read_records(units, self._read_buffer)
        try:
            batches, taken, next_offset = kafka_store.build_batches(records, count, max_bytes, take_first,
                                                                    log_append_time)
        finally:
            if isinstance(records, memoryview):     # always: read_records returns a view of the buffer given
                records.release()
        if not taken:
            return b"", offset
        self.stats.get(topic, client_id, taken, len(batches))
        return batches, next_offset

    # -- offsets by time --------------------------------------------------------------------------------------

    def _timestamps(self, topic: str, partition: int, start: int, count: int) -> tuple[array[int], array[int]]:
        units = self.store.scan_queue(topic, partition, start, count)
        if not len(units):
            return array("q"), array("q")
        records, taken = self.store.read_records(units)
        return kafka_store.record_timestamps(records, taken)

    def _time_index(self, topic: str, partition: int) -> TimeIndex:
        index = self._time_indexes.get((topic, partition))
        if index is None:
            index = self._time_indexes[(topic, partition)] = TimeIndex()
        start = self.log_start_offset(topic, partition)
        if index.indexed_to < start:
            index.starts, index.maxima, index.indexed_to = array("q"), array("q"), start
        end = self.high_watermark(topic, partition)
        running = index.maxima[-1] if index.maxima else -(2 ** 63)
        while end - index.indexed_to >= WINDOW:
            offsets, timestamps = self._timestamps(topic, partition, index.indexed_to, WINDOW)
            if len(offsets) < WINDOW:
                break
            running = max(running, max(timestamps))
            index.starts.append(index.indexed_to)
            index.maxima.append(running)
            index.indexed_to += WINDOW
        return index

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp`; None if there is none."""
        index = self._time_index(topic, partition)
        window = bisect.bisect_left(index.maxima, timestamp)
        start, count = ((index.starts[window], WINDOW) if window < len(index.starts)
                        else (index.indexed_to, self.high_watermark(topic, partition) - index.indexed_to))
        start = max(start, self.log_start_offset(topic, partition))
        offsets, timestamps = self._timestamps(topic, partition, start, max(0, count))
        for i, record_timestamp in enumerate(timestamps):
            if record_timestamp >= timestamp:
                return offsets[i], record_timestamp
        return None

    def max_timestamp(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (the first of them); None when empty."""
        index = self._time_index(topic, partition)
        best: tuple[int, int] | None = None
        if index.maxima:
            window = bisect.bisect_left(index.maxima, index.maxima[-1])
            offsets, timestamps = self._timestamps(topic, partition, index.starts[window], WINDOW)
            if len(timestamps):
                top = max(timestamps)
                best = (offsets[timestamps.index(top)], top)
        offsets, timestamps = self._timestamps(topic, partition, index.indexed_to,
                                               self.high_watermark(topic, partition) - index.indexed_to)
        if len(timestamps):
            top = max(timestamps)
            if best is None or top > best[1]:
                best = (offsets[timestamps.index(top)], top)
        return best

    def forget(self, topic: str) -> None:
        for key in [key for key in self._time_indexes if key[0] == topic]:
            del self._time_indexes[key]
        self.transactions.forget_topic(topic)
        if any(tp[0] == topic for tp in self._log_starts.offsets):
            self._log_starts.offsets = {tp: o for tp, o in self._log_starts.offsets.items() if tp[0] != topic}
            self._write_log_starts()
