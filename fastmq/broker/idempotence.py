"""Idempotent producers: producer ids, and per partition the last sequences of each producer, so that a retried
batch is answered with its first offsets instead of being stored twice, and a gap is refused.

Rules (Kafka's, for an idempotent producer without transactions), for a batch (producer id, epoch, first and last
sequence) arriving at a partition:
- a producer never seen on the partition must start at sequence 0 (else UNKNOWN_PRODUCER: the client resets);
- an older epoch is fenced (STALE_PRODUCER_EPOCH); a newer one must start at sequence 0;
- one of the last five batches again is a duplicate: answered with the offset it got, nothing is stored;
- otherwise the first sequence must follow the last one stored (OUT_OF_ORDER_SEQUENCE), wrapping after
  2**31 - 1;
- a transaction marker written under a newer epoch (fence()) makes the older epochs of its producer fenced here.

Surviving a restart: the state is written to config/kafkaProducerState.json every few seconds and at shutdown,
with the queue offset of each partition it covers; at start-up the records stored after those offsets are read
again by replay(), and the batch markers a front end finds in them (its read_markers: Kafka's is the
KAFKA_PRODUCER property on the last record of every idempotent batch) bring the state up to date. A crash between a batch's first and
last record leaves the first records without their marker: a retry stores them again (the only case where a
duplicate can appear). Producer ids are handed out in blocks reserved on disk, so a restarted broker never gives
out an id twice.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from fastmq.broker.errors import CoreError
from fastmq.broker.persist import ConfigWriter
from fastmq.store import MessageStore
from fastmq.store.config import ConfigManager, _require_dict

log = logging.getLogger(__name__)

BATCHES_KEPT = 5                 # Kafka keeps the metadata of the last five batches per producer and partition
ID_BLOCK = 1000                  # producer ids reserved on disk at a time
INT32_MAX = 2 ** 31 - 1
REPLAY_CHUNK = 4096              # records read at a time when replaying producer markers

# (records, count) read from the store -> (queue offset, producer id, epoch, first sequence, last sequence) of
# each batch whose last record is among them.
MarkerReader = Callable[[Any, int], Iterable[tuple[int, int, int, int, int]]]



class ProducerEntry:
    """One producer on one partition."""

    __slots__ = ("epoch", "batches", "last_timestamp")

    def __init__(self, epoch: int, last_timestamp: float) -> None:
        self.epoch = epoch
        self.batches: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=BATCHES_KEPT)
        self.last_timestamp = last_timestamp    # wall-clock seconds of the last append (expiry)

    @property
    def last_sequence(self) -> int:
        return self.batches[-1][1] if self.batches else -1


class ProducerStateFile(ConfigManager):
    file_name = "kafkaProducerState.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.loaded: dict[str, Any] = {}
        self.snapshot: dict[str, Any] = {}    # taken where appends happen, written by the config writer

    def encode(self) -> dict[Any, Any]:
        return self.snapshot

    def decode(self, obj: Any) -> None:
        self.loaded = _require_dict(obj, self.file_name)


def next_sequence(sequence: int) -> int:
    return 0 if sequence >= INT32_MAX else sequence + 1


class ProducerStateManager:
    def __init__(self, store: MessageStore, writer: ConfigWriter, expiration_ms: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._writer = writer
        self._expiration = expiration_ms / 1000.0
        self._clock = clock
        self._lock = threading.Lock()
        # (topic, partition) -> producer id -> entry
        self._partitions: dict[tuple[str, int], dict[int, ProducerEntry]] = {}
        self._next_id = 0
        self._reserved_until = 0
        self._covered: dict[tuple[str, int], int] = {}     # per partition, the queue offset the snapshot covers
        self._file = ProducerStateFile(store.root / "config")
        self._file.load()
        self._restore(self._file.loaded)

    # -- producer ids -----------------------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before (by this broker, across restarts)."""
        with self._lock:
            producer_id = self._next_id
            self._next_id += 1
            reserve = self._next_id > self._reserved_until
            if reserve:
                self._reserved_until = self._next_id + ID_BLOCK
        if reserve:
            self._file.snapshot = self.snapshot()
            self._file.persist()        # before the id is used: rare (once per ID_BLOCK ids)
        return producer_id

    # -- checks -----------------------------------------------------------------------------------------------

    def check(self, topic: str, partition: int, producer_id: int, epoch: int, first_sequence: int,
              last_sequence: int) -> tuple[CoreError | None, int]:
        """(the refusal or None, offset of the duplicate or -1) for a batch about to be appended."""
        entry = self._partitions.get((topic, partition), {}).get(producer_id)
        if entry is None:
            return (None, -1) if first_sequence == 0 else (CoreError.UNKNOWN_PRODUCER, -1)
        if epoch < entry.epoch:
            return CoreError.STALE_PRODUCER_EPOCH, -1
        if epoch > entry.epoch:
            return (None, -1) if first_sequence == 0 else (CoreError.OUT_OF_ORDER_SEQUENCE, -1)
        for first, last, base_offset in entry.batches:
            if first == first_sequence and last == last_sequence:
                return None, base_offset
        if first_sequence != next_sequence(entry.last_sequence):
            return CoreError.OUT_OF_ORDER_SEQUENCE, -1
        return None, -1

    def record(self, topic: str, partition: int, producer_id: int, epoch: int, first_sequence: int,
               last_sequence: int, base_offset: int) -> None:
        """Remember an appended batch."""
        with self._lock:
            producers = self._partitions.setdefault((topic, partition), {})
            entry = producers.get(producer_id)
            if entry is None or epoch != entry.epoch:
                entry = producers[producer_id] = ProducerEntry(epoch, self._clock())
            entry.batches.append((first_sequence, last_sequence, base_offset))
            entry.last_timestamp = self._clock()

    def fence(self, topic: str, partition: int, producer_id: int, epoch: int) -> None:
        """A transaction marker of this epoch was written: older epochs of the producer are fenced here."""
        with self._lock:
            producers = self._partitions.setdefault((topic, partition), {})
            entry = producers.get(producer_id)
            if entry is None or entry.epoch < epoch:
                producers[producer_id] = ProducerEntry(epoch, self._clock())

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            for key in [key for key in self._partitions if key[0] == topic]:
                del self._partitions[key]

    # -- persistence ------------------------------------------------------------------------------------------

    def snapshot(self) -> dict[Any, Any]:
        """The state as JSON, with the queue offset each partition is covered up to; expired producers go.
        Take it in the thread that appends (and records), so that offsets and state agree."""
        now = self._clock()
        with self._lock:
            partitions = {}
            for consume_queue in self.store.consume_queues():
                tp = (consume_queue.topic, consume_queue.queue_id)
                producers = self._partitions.get(tp, {})
                for producer_id in [pid for pid, entry in producers.items()
                                    if now - entry.last_timestamp > self._expiration]:
                    del producers[producer_id]
                partitions[f"{tp[1]}@{tp[0]}"] = {
                    "coveredOffset": consume_queue.get_max_offset_in_queue(),
                    "producers": {str(pid): {"epoch": entry.epoch, "lastTimestamp": entry.last_timestamp,
                                             "batches": [list(batch) for batch in entry.batches]}
                                  for pid, entry in producers.items()},
                }
            return {"nextProducerId": self._next_id, "reservedUntil": self._reserved_until,
                    "partitions": partitions}

    def save(self, wait: bool = False) -> None:
        """Snapshot now and write it on the config writer's thread (or here, with wait)."""
        self._file.snapshot = self.snapshot()
        if wait:
            self._file.persist()
        else:
            self._writer.write(self._file)

    def _restore(self, obj: dict[Any, Any]) -> None:
        self._reserved_until = int(obj.get("reservedUntil", 0))
        # Ids up to the reservation may have been handed out before a crash.
        self._next_id = max(int(obj.get("nextProducerId", 0)), self._reserved_until)
        for key, value in _require_dict(obj.get("partitions", {}), "partitions").items():
            partition_text, _, topic = key.partition("@")
            tp = (topic, int(partition_text))
            self._covered[tp] = int(value.get("coveredOffset", 0))
            producers = self._partitions.setdefault(tp, {})
            for pid, state in _require_dict(value.get("producers", {}), key).items():
                entry = ProducerEntry(int(state["epoch"]), float(state.get("lastTimestamp", 0)))
                for batch in state.get("batches", []):
                    entry.batches.append((int(batch[0]), int(batch[1]), int(batch[2])))
                producers[int(pid)] = entry

    def replay(self, read_markers: MarkerReader) -> None:
        """Bring the state up to date from the records stored after the snapshot, with the batch markers
        read_markers finds in them. Each front end with idempotent producers calls it with its own reader once,
        at start-up, before it takes appends (a reader passes over other front ends' records)."""
        replayed = 0
        for consume_queue in self.store.consume_queues():
            tp = (consume_queue.topic, consume_queue.queue_id)
            start = max(self._covered.get(tp, 0), self.store.get_min_offset(*tp))
            replayed += self._replay(tp, start, self.store.get_max_offset(*tp), read_markers)
        if replayed:
            log.info("producer state: %d batch marker(s) replayed from the log", replayed)

    def _replay(self, tp: tuple[str, int], start: int, end: int, read_markers: MarkerReader) -> int:
        count = 0
        offset = start
        while offset < end:
            units = self.store.scan_queue(tp[0], tp[1], offset, REPLAY_CHUNK)
            if not len(units):
                break
            records, taken = self.store.read_records(units)
            for queue_offset, pid, epoch, first, last in read_markers(records, taken):
                base_offset = queue_offset - ((last - first) % (INT32_MAX + 1))
                self._apply(tp, pid, epoch, first, last, base_offset)
                count += 1
            if taken == 0 or units.next_offset <= offset:
                break
            offset = units.next_offset
        return count

    def _apply(self, tp: tuple[str, int], pid: int, epoch: int, first: int, last: int, base_offset: int) -> None:
        producers = self._partitions.setdefault(tp, {})
        entry = producers.get(pid)
        if entry is not None and epoch < entry.epoch:
            return
        if entry is None or epoch > entry.epoch:
            entry = producers[pid] = ProducerEntry(epoch, self._clock())
        if (first, last, base_offset) not in entry.batches:
            entry.batches.append((first, last, base_offset))
        self._next_id = max(self._next_id, pid + 1)
