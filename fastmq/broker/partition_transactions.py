"""What a partition knows of transactions: who may write transactional records to it, where the open ones
start (the last stable offset), and which ranges were aborted (what read_committed consumers skip).

Kafka's rules, per partition:
- A transactional batch is accepted only from a producer whose transaction the coordinator opened on this
  partition (AddPartitionsToTxn), with that transaction's epoch; anything else is refused, so a fenced producer
  cannot write (KIP-890's verification, done here because the coordinator is in the same process).
- The last stable offset (LSO) is the first offset of the earliest transaction still open on the partition, or
  the high watermark when none is: read_committed consumers read up to it, and no further.
- An abort marker at offset M for producer P, whose transaction's first record here was at F, adds (P, F, M) to
  the aborted index; a read_committed fetch from offset S returns every entry with M >= S whose F is before the
  end of what it returns, and the consumer drops P's transactional batches from F until it meets the marker.

A transaction opened here but that has written nothing has no first offset yet and holds nothing back. The
first offsets are only persisted as the high watermark at the time the transaction opened (the state file is
written when it opens, not per record), so after a restart an open transaction holds the LSO at that bound:
never beyond its first record, at worst a little before it. A crash may also have taken the unflushed tail of a
log: at restart bounds beyond the high watermark come down to it, and aborted ranges whose marker is gone are
dropped (their transaction is still in its Prepare state, whose completion writes the marker again).
"""
from __future__ import annotations

import bisect
from typing import Any, Callable

from fastmq.broker.errors import CoreError

TopicPartition = tuple[str, int]


class OpenTransaction:
    __slots__ = ("epoch", "first_offset", "bound", "sealed")

    def __init__(self, epoch: int, bound: int, first_offset: int | None = None) -> None:
        self.epoch = epoch
        self.bound = bound                   # the high watermark when it opened: no record of it is before
        self.first_offset = first_offset     # its first record here (None: nothing written yet)
        self.sealed = False                  # its end is decided: nothing more may be written


class PartitionTransactions:
    """Every partition's open transactions and aborted index. Used on the broker's I/O thread only."""

    def __init__(self) -> None:
        self._open: dict[TopicPartition, dict[int, OpenTransaction]] = {}
        # Per partition, sorted by marker offset: parallel lists of marker offsets and (producer id, first offset).
        self._aborted_ends: dict[TopicPartition, list[int]] = {}
        self._aborted: dict[TopicPartition, list[tuple[int, int]]] = {}

    # -- writers ----------------------------------------------------------------------------------------------

    def open(self, tp: TopicPartition, producer_id: int, epoch: int, high_watermark: int) -> None:
        producers = self._open.setdefault(tp, {})
        current = producers.get(producer_id)
        if current is None or current.epoch != epoch:
            producers[producer_id] = OpenTransaction(epoch, high_watermark)

    def seal(self, tp: TopicPartition, producer_id: int, epoch: int) -> None:
        """The transaction's end is decided (under `epoch`, bumped when the producer is being fenced)."""
        current = self._open.get(tp, {}).get(producer_id)
        if current is not None:
            current.epoch = epoch
            current.sealed = True

    def check(self, tp: TopicPartition, producer_id: int, epoch: int) -> CoreError | None:
        """Why a transactional batch of this producer may not be appended; None if it may."""
        current = self._open.get(tp, {}).get(producer_id)
        if current is None:
            return CoreError.INVALID_TRANSACTION_STATE
        if epoch != current.epoch:
            return CoreError.STALE_PRODUCER_EPOCH
        return CoreError.INVALID_TRANSACTION_STATE if current.sealed else None

    def appended(self, tp: TopicPartition, producer_id: int, base_offset: int) -> None:
        current = self._open.get(tp, {}).get(producer_id)
        if current is not None and current.first_offset is None:
            current.first_offset = base_offset

    def close(self, tp: TopicPartition, producer_id: int, marker_offset: int, aborted: bool) -> None:
        """The transaction's marker is at marker_offset."""
        producers = self._open.get(tp)
        current = producers.pop(producer_id, None) if producers is not None else None
        if producers is not None and not producers:
            del self._open[tp]
        if aborted and current is not None and current.first_offset is not None:
            self._add_aborted(tp, producer_id, current.first_offset, marker_offset)

    def _add_aborted(self, tp: TopicPartition, producer_id: int, first_offset: int, marker_offset: int) -> None:
        ends = self._aborted_ends.setdefault(tp, [])
        entries = self._aborted.setdefault(tp, [])
        at = bisect.bisect_right(ends, marker_offset)
        ends.insert(at, marker_offset)
        entries.insert(at, (producer_id, first_offset))

    # -- readers ----------------------------------------------------------------------------------------------

    def last_stable_offset(self, tp: TopicPartition, high_watermark: int) -> int:
        producers = self._open.get(tp)
        if not producers:
            return high_watermark
        firsts = [t.first_offset for t in producers.values() if t.first_offset is not None]
        return min(min(firsts), high_watermark) if firsts else high_watermark

    def aborted_transactions(self, tp: TopicPartition, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a fetch of [start, end) must know of."""
        ends = self._aborted_ends.get(tp)
        if not ends:
            return []
        entries = self._aborted[tp]
        return [entry for entry in entries[bisect.bisect_left(ends, start):] if entry[1] < end]

    def has_open(self, tp: TopicPartition) -> bool:
        return bool(self._open.get(tp))

    # -- upkeep -----------------------------------------------------------------------------------------------

    def trim(self, tp: TopicPartition, log_start_offset: int) -> None:
        """Forget aborted ranges that ended before the log start."""
        ends = self._aborted_ends.get(tp)
        if ends:
            cut = bisect.bisect_left(ends, log_start_offset)
            if cut:
                del ends[:cut]
                del self._aborted[tp][:cut]

    def partitions(self) -> set[TopicPartition]:
        return set(self._open) | set(self._aborted_ends)

    def forget_topic(self, topic: str) -> None:
        for table in (self._open, self._aborted_ends, self._aborted):
            for tp in [tp for tp in table if tp[0] == topic]:
                del table[tp]

    # -- persistence (JSON, in the coordinator's state file) --------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        def key(tp: TopicPartition) -> str:
            return f"{tp[1]}@{tp[0]}"

        return {
            "open": {key(tp): {str(pid): [t.epoch, t.first_offset if t.first_offset is not None else t.bound]
                               for pid, t in producers.items()} for tp, producers in self._open.items()},
            "aborted": {key(tp): [[pid, first, end] for end, (pid, first) in zip(self._aborted_ends[tp], entries)]
                        for tp, entries in self._aborted.items() if entries},
        }

    def restore(self, obj: dict[str, Any], high_watermark: Callable[[TopicPartition], int]) -> None:
        """Load a snapshot() against the logs as they are now (see the top of this module)."""
        def tp_of(key: str) -> TopicPartition:
            partition, _, topic = key.partition("@")
            return topic, int(partition)

        for key, producers in dict(obj.get("open", {})).items():
            tp = tp_of(key)
            for pid, (epoch, first) in dict(producers).items():
                # Written before or after its first record: either way nothing of it is before `first`.
                first = min(int(first), high_watermark(tp))
                self._open.setdefault(tp, {})[int(pid)] = OpenTransaction(int(epoch), first, first)
        for key, entries in dict(obj.get("aborted", {})).items():
            tp = tp_of(key)
            for pid, first, end in entries:
                if int(end) < high_watermark(tp):
                    self._add_aborted(tp, int(pid), int(first), int(end))
