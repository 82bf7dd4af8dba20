"""Kafka partitions on the store: a partition is a store queue, an offset its ConsumeQueue logical offset.

PartitionLogs.append turns a produced record set into CommitLog messages (kafka_store.fill_batch, one compiled
call), checks the idempotent producer's sequences, appends, and counts; read() turns ConsumeQueue units into one
RecordBatch (scan_queue -> read_records -> kafka_store.build_batch). Offsets: the log start offset is the queue's
minimum, the high watermark its maximum (a single node acknowledges what it stored, and there are no
transactions, so the last stable offset is the high watermark too).

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
from array import array

from fastmq._native import kafka_store
from fastmq.broker.idempotence import NONE, OUT_OF_ORDER_SEQUENCE_NUMBER, ProducerStateManager, next_sequence
from fastmq.broker.stats import BrokerStats
from fastmq.broker.topics import Topic
from fastmq.errors import ProtocolError
from fastmq.kafka import errors as kerrors
from fastmq.store import MessageStore
from fastmq.store.errors import MessageIllegalError, StoreError

log = logging.getLogger(__name__)

WINDOW = 4096                 # records per time-index window
MAX_UNITS_PER_READ = 65536    # ConsumeQueue units one read looks at
# A CommitLog record is larger than the Kafka record it came from (its fixed header is 90-odd bytes): reads
# select this many times the wanted Kafka bytes in CommitLog bytes, and the batch builder cuts exactly.
COMMITLOG_BYTES_PER_KAFKA_BYTE = 2

KAFKA_STORAGE_ERROR = kerrors.KafkaStorageError.errno
_PRODUCE_ERRORS = (kerrors.CorruptRecordError, kerrors.MessageSizeTooLargeError, kerrors.InvalidRecordError,
                   kerrors.UnsupportedForMessageFormatError, kerrors.InvalidTxnStateError)


@dataclasses.dataclass
class AppendResult:
    error: int = 0
    base_offset: int = -1
    log_start_offset: int = -1
    end_position: int = 0            # CommitLog offset that acks=all waits to be durable (0: nothing to wait for)
    message: str | None = None
    appended: bool = False


class TimeIndex:
    __slots__ = ("starts", "maxima", "indexed_to")

    def __init__(self) -> None:
        self.starts = array("q")      # first offset of each full window
        self.maxima = array("q")      # largest timestamp from the log start to the end of each window
        self.indexed_to = -1          # offset after the last full window (-1: nothing indexed yet)


class PartitionLogs:
    def __init__(self, store: MessageStore, producers: ProducerStateManager, stats: BrokerStats,
                 index_keys: bool = False) -> None:
        self.store = store
        self.producers = producers
        self.stats = stats
        self.index_keys = index_keys
        self._time_indexes: dict[tuple[str, int], TimeIndex] = {}
        # Records gathered for a fetch, reused from one read to the next (reads happen on one thread).
        self._read_buffer = bytearray()

    # -- offsets ----------------------------------------------------------------------------------------------

    def log_start_offset(self, topic: str, partition: int) -> int:
        return self.store.get_min_offset(topic, partition)

    def high_watermark(self, topic: str, partition: int) -> int:
        return self.store.get_max_offset(topic, partition)

    # -- produce ----------------------------------------------------------------------------------------------

    def append(self, topic: Topic, partition: int, records) -> AppendResult:
        store = self.store
        try:
            batch = store.new_batch(topic.name, partition)
            produced = kafka_store.fill_batch(batch, records, topic.max_message_bytes, self.index_keys)
        except _PRODUCE_ERRORS as exc:
            return AppendResult(exc.errno, message=str(exc))
        except ProtocolError as exc:          # framing that is not even a batch
            return AppendResult(kerrors.CorruptRecordError.errno, message=str(exc))
        duplicate = self._check_sequences(topic.name, partition, produced)
        if duplicate is not None:
            return duplicate
        try:
            result = store.append_batch(batch)
        except MessageIllegalError as exc:
            return AppendResult(kerrors.MessageSizeTooLargeError.errno, message=str(exc))
        except StoreError as exc:
            log.error("appending to %s-%d failed: %s", topic.name, partition, exc)
            return AppendResult(KAFKA_STORAGE_ERROR, message=str(exc))
        base_offset = result.queue_offset
        offset = base_offset
        for producer_id, epoch, first, last, count, _max_timestamp in produced:
            if producer_id >= 0:
                self.producers.record(topic.name, partition, producer_id, epoch, first, last, offset)
            offset += count
        self.stats.put(topic.name, batch.count, len(records))
        return AppendResult(NONE, base_offset, store.get_min_offset(topic.name, partition), result.end_offset,
                            appended=True)

    def _check_sequences(self, topic: str, partition: int, produced: list) -> AppendResult | None:
        """None to append; else the answer (a duplicate's original offset, or a sequence error)."""
        previous = None
        for index, (producer_id, epoch, first, last, _count, _ts) in enumerate(produced):
            if producer_id < 0:
                previous = None
                continue
            if previous is not None and previous[0] == producer_id:
                # A later batch of the same request continues the one before it.
                if epoch != previous[1] or first != next_sequence(previous[2]):
                    return AppendResult(OUT_OF_ORDER_SEQUENCE_NUMBER, message="batches of one request are not "
                                                                              "in sequence")
            else:
                code, duplicate_offset = self.producers.check(topic, partition, producer_id, epoch, first, last)
                if code:
                    return AppendResult(code, message=f"producer {producer_id} epoch {epoch} sequence {first}")
                if duplicate_offset >= 0:
                    if index:
                        return AppendResult(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                            message="a duplicate batch follows a new one in one request")
                    log.debug("%s-%d: duplicate batch of producer %d (sequence %d) answered with offset %d",
                              topic, partition, producer_id, first, duplicate_offset)
                    # The original may still wait for its fsync: an acks=all answer waits for everything written.
                    return AppendResult(NONE, duplicate_offset, self.store.get_min_offset(topic, partition),
                                        self.store.get_max_phy_offset())
            previous = (producer_id, epoch, last)
        return None

    # -- fetch ------------------------------------------------------------------------------------------------

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, client_id: str | None = None,
             take_first: bool = True) -> bytes:
        """One RecordBatch from `offset` holding at most max_bytes (with take_first, at least one record if there
        is one); b"" at the end of the log. The caller has checked that offset lies within the log."""
        units = self.store.scan_queue(topic, partition, offset, min(MAX_UNITS_PER_READ, max(1, max_bytes // 16)),
                                      max_bytes=max(1, max_bytes) * COMMITLOG_BYTES_PER_KAFKA_BYTE)
        if not len(units):
            return b""
        records, count = self.store.read_records(units, self._read_buffer)
        try:
            batch, taken, _next_offset = kafka_store.build_batch(records, count, max_bytes, take_first)
        finally:
            records.release()
        if taken:
            self.stats.get(topic, client_id, taken, len(batch))
        return batch

    # -- offsets by time --------------------------------------------------------------------------------------

    def _timestamps(self, topic: str, partition: int, start: int, count: int) -> tuple[array, array]:
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
