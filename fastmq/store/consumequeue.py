"""ConsumeQueue: the per topic/queue index of the CommitLog (SmartGo-Store 1.4).

Files live in consumequeue/{topic}/{queueId}/, named like CommitLog files; each holds whole 20-byte units
[commitlog offset i64][size i32][tags code i64]. A message's logical queue offset is its unit number, so unit n
sits at byte n * 20 and its file follows by arithmetic. Scans run in queue_codec.QueueUnits without the GIL.
"""
from __future__ import annotations

import logging
from array import array
from pathlib import Path
from typing import Callable

from fastmq._native import queue_codec
from fastmq._native.queue_codec import QueueUnits
from fastmq._native.store_codec import DispatchRequest, MessageBatch
from fastmq.store.errors import CorruptStoreError
from fastmq.store.mapped_file import UNBOUNDED, MappedFile, MappedFileQueue, OpenMappings

log = logging.getLogger(__name__)

CQ_STORE_UNIT_SIZE = queue_codec.CQ_UNIT_SIZE
BLANK_UNIT_SIZE = queue_codec.CQ_BLANK_SIZE
# The most disk a queue reserves ahead of its units: 52,428 units. A reservation (fallocate and zeros) costs tens of
# microseconds whatever its size: at 64 KiB a busy queue paid one every 3,276 units, 8 ns of the broker's CPU a
# message. Steps double from one page (MappedFile.append_view), so a queue never reserves much more than it holds:
# thousands of queues that take few keep a page or a few.
RESERVE_AHEAD = 1 << 20


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root: Path, mapped_file_size: int, read_only: bool = False,
                 mappings: OpenMappings = UNBOUNDED) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.read_only = read_only
        self.mapped_file_queue = MappedFileQueue(root / topic / str(queue_id), mapped_file_size, read_only,
                                                 mappings, RESERVE_AHEAD)
        # CommitLog offset just past the newest unit's record: a dispatch at or below it is a repeat.
        self.max_physic_offset = -1
        # Byte position of the first unit whose message still exists (units before it were cleaned up or are
        # filler written ahead of a queue that started mid-file).
        self.min_logic_offset = 0

    def __repr__(self) -> str:
        return (f"ConsumeQueue({self.topic!r}, {self.queue_id}, "
                f"{self.get_min_offset_in_queue()}..{self.get_max_offset_in_queue()})")

    @property
    def file_size(self) -> int:
        return self.mapped_file_queue.mapped_file_size

    def load(self, infer_size: bool = False) -> None:
        self.mapped_file_queue.load(infer_size)
        if self.file_size % CQ_STORE_UNIT_SIZE:
            raise CorruptStoreError(f"ConsumeQueue files in {self.mapped_file_queue.store_path} are "
                                    f"{self.file_size} bytes, not a multiple of {CQ_STORE_UNIT_SIZE}")

    def recover(self) -> bool:
        """Find where the written units end, from the third-last file on, and cut everything after it. Returns
        True when what follows is not blank: damage, whose units the CommitLog must dispatch again."""
        files = self.mapped_file_queue.files
        if not files:
            return False
        units_per_file = self.file_size // CQ_STORE_UNIT_SIZE
        start = max(0, len(files) - 3)
        process_offset = files[start].file_from_offset
        previous_end = -1
        damaged = False
        for mapped in files[start:]:
            valid, previous_end = queue_codec.count_valid_units(mapped.view, previous_end)
            process_offset = mapped.file_from_offset + valid * CQ_STORE_UNIT_SIZE
            if valid < units_per_file:
                # Past the file's last block everything reads as zeros: only the blocks in between can hold damage.
                rest = mapped.view[valid * CQ_STORE_UNIT_SIZE:max(valid * CQ_STORE_UNIT_SIZE, mapped.data_end())]
                damaged = rest != bytes(len(rest))
                rest.release()
                break
        if damaged:
            log.warning("%s: damaged units from queue offset %d on are cut and rebuilt", self,
                        process_offset // CQ_STORE_UNIT_SIZE)
        self.mapped_file_queue.truncate_dirty_files(process_offset)
        self.max_physic_offset = self._physic_end_of_last_unit()
        return damaged

    def _physic_end_of_last_unit(self) -> int:
        last = self.get_max_offset_in_queue() - 1
        unit = self.get_unit(last) if last >= self.get_min_offset_in_queue() else None
        if unit is None or unit[1] == BLANK_UNIT_SIZE:
            return -1
        return unit[0] + unit[1]

    # -- offsets ----------------------------------------------------------------------------------------------

    def get_min_offset_in_queue(self) -> int:
        return max(self.min_logic_offset, self.mapped_file_queue.get_min_offset()) // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        """The logical offset the next unit gets (one past the newest)."""
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def offset_range(self) -> tuple[int, int]:
        """(get_min_offset_in_queue(), get_max_offset_in_queue()) in one call: a Fetch asks it of every partition
        of its session."""
        queue = self.mapped_file_queue
        return (max(self.min_logic_offset, queue.get_min_offset()) // CQ_STORE_UNIT_SIZE,
                queue.get_max_offset() // CQ_STORE_UNIT_SIZE)

    def get_unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(commitlog offset, size, tags code) of one unit, None if it is not readable."""
        position = queue_offset * CQ_STORE_UNIT_SIZE
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(position)
        if mapped is None:
            return None
        data = mapped.select(position - mapped.file_from_offset, CQ_STORE_UNIT_SIZE)
        return None if data is None else queue_codec.read_unit(data, 0)

    # -- dispatch ---------------------------------------------------------------------------------------------

    def put_message_position_info(self, request: DispatchRequest) -> bool:
        """Append the unit of one replayed message (recovery, replication); repeats are ignored."""
        if request.commitlog_offset + request.msg_size <= self.max_physic_offset:
            return False
        mapped = self._writable_file_for(request.consume_queue_offset)
        if mapped is None:
            return False
        queue_codec.put_unit(mapped.append_view(mapped.wrote_position + CQ_STORE_UNIT_SIZE), mapped.wrote_position,
                             request.commitlog_offset, request.msg_size, request.tags_code)
        mapped.wrote_position += CQ_STORE_UNIT_SIZE
        self.max_physic_offset = request.commitlog_offset + request.msg_size
        return True

    def put_batch(self, batch: MessageBatch) -> None:
        """Append the units of a freshly appended batch (its queue offsets follow this queue's end)."""
        mapped = self._writable_file_for(batch.first_queue_offset)     # the file the first unit goes into
        if mapped is None:
            return
        written = 0
        while written < batch.written:
            view = mapped.append_view(mapped.wrote_position + (batch.written - written) * CQ_STORE_UNIT_SIZE)
            count = batch.put_units(view, mapped.wrote_position, written)
            mapped.wrote_position += count * CQ_STORE_UNIT_SIZE
            written += count
            if written < batch.written:
                mapped = self.mapped_file_queue.get_writable_file()
        last = batch.written - 1
        self.max_physic_offset = batch.commitlog_offset(last) + batch.size(last)

    def _writable_file_for(self, queue_offset: int) -> MappedFile | None:
        """The file the unit of `queue_offset` goes into, None if that unit exists already."""
        expected = queue_offset * CQ_STORE_UNIT_SIZE
        queue = self.mapped_file_queue
        if not queue.files and expected:
            # The queue starts mid-file (its earlier files were cleaned up, or a slave joined late): fill the file's
            # head with blank units so that unit positions keep matching logical offsets.
            mapped = queue.get_writable_file(expected)
            self._fill_pre_blank(mapped, expected - mapped.file_from_offset)
            self.min_logic_offset = expected
        mapped = queue.get_writable_file()
        current = mapped.file_from_offset + mapped.wrote_position
        if expected < current:
            log.warning("%s: unit for queue offset %d already exists (queue at %d), skipped",
                        self, queue_offset, current // CQ_STORE_UNIT_SIZE)
            return None
        if expected != current:
            log.error("%s: queue offset %d dispatched at logical position %d: the queue lost units",
                      self, queue_offset, current // CQ_STORE_UNIT_SIZE)
        return mapped

    @staticmethod
    def _fill_pre_blank(mapped: MappedFile, until_position: int) -> None:
        view = mapped.append_view(until_position)
        for position in range(0, until_position, CQ_STORE_UNIT_SIZE):
            queue_codec.put_unit(view, position, 0, BLANK_UNIT_SIZE, 0)
        mapped.wrote_position = until_position

    # -- reading ----------------------------------------------------------------------------------------------

    def scan(self, start_offset: int, units: QueueUnits, tag_codes: array[int] | None = None, max_bytes: int = -1,
             max_units: int = -1) -> None:
        """Fill `units` from logical offset start_offset on (see QueueUnits.scan for the filter and limits) and
        set units.next_offset."""
        offset = max(start_offset, self.get_min_offset_in_queue())
        end = self.get_max_offset_in_queue()
        budget = max_units
        queue = self.mapped_file_queue
        while offset < end and not units.full and budget != 0:
            position = offset * CQ_STORE_UNIT_SIZE
            mapped = queue.find_mapped_file_by_offset(position)
            if mapped is None or not mapped.available:
                break
            start_position = position - mapped.file_from_offset
            end_position = min(mapped.wrote_position, start_position + (end - offset) * CQ_STORE_UNIT_SIZE)
            try:
                consumed = units.scan(mapped.view, start_position, end_position, offset, tag_codes, max_bytes, budget)
            except ValueError:    # the file was cleaned up under us; what was read so far stands
                break
            offset += consumed
            if budget > 0:
                budget -= consumed
            if start_position + consumed * CQ_STORE_UNIT_SIZE < end_position:
                break   # stopped by the batch limits, not by the end of the file
        units.next_offset = offset

    def get_offset_in_queue_by_time(self, timestamp: int, pick_store_timestamp: Callable[[int], int]) -> int:
        """The first logical offset whose message was stored at or after `timestamp` (ms); the max offset when
        every message is older. Binary search over the units, reading STORETIMESTAMP from the CommitLog."""
        low, high = self.get_min_offset_in_queue(), self.get_max_offset_in_queue()
        while low < high:
            middle = (low + high) // 2
            unit = self.get_unit(middle)
            # Filler units and messages already deleted count as older than anything.
            stored = pick_store_timestamp(unit[0]) if unit is not None and unit[1] != BLANK_UNIT_SIZE else -1
            if stored < timestamp:
                low = middle + 1
            else:
                high = middle
        return low

    # -- upkeep -----------------------------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether units were written since the last flush."""
        return self.mapped_file_queue.get_max_offset() > self.mapped_file_queue.flushed_where

    def flush_due(self, least_pages: int) -> bool:
        return self.mapped_file_queue.flush_due(least_pages)

    def flush(self, least_pages: int) -> bool:
        return self.mapped_file_queue.flush(least_pages)[0]

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop the units whose messages start at or beyond `phy_offset` (the CommitLog was cut there)."""
        low, high = self.get_min_offset_in_queue(), self.get_max_offset_in_queue()
        # Units are in CommitLog order: find the first one at or past phy_offset.
        while low < high:
            middle = (low + high) // 2
            unit = self.get_unit(middle)
            if unit is not None and unit[1] != BLANK_UNIT_SIZE and unit[0] >= phy_offset:
                high = middle
            else:
                low = middle + 1
        if low < self.get_max_offset_in_queue():
            log.info("%s: dropping units from queue offset %d (CommitLog cut at %d)", self, low, phy_offset)
            self.mapped_file_queue.truncate_dirty_files(low * CQ_STORE_UNIT_SIZE)
        self.max_physic_offset = self._physic_end_of_last_unit()

    def correct_min_offset(self, min_commitlog_offset: int) -> None:
        """Move the queue's start past units whose messages are gone (CommitLog files deleted) or are filler."""
        low = self.get_min_offset_in_queue()
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            return
        high = min(self.get_max_offset_in_queue(), (first.file_from_offset + self.file_size) // CQ_STORE_UNIT_SIZE)
        while low < high:
            middle = (low + high) // 2
            unit = self.get_unit(middle)
            if unit is not None and unit[1] != BLANK_UNIT_SIZE and unit[0] >= min_commitlog_offset:
                high = middle
            else:
                low = middle + 1
        self.min_logic_offset = max(self.min_logic_offset, low * CQ_STORE_UNIT_SIZE)

    def delete_expired_files(self, min_commitlog_offset: int) -> int:
        """Delete the files whose every unit points below the CommitLog's minimum offset (never the last file);
        returns how many went."""
        files = self.mapped_file_queue.files
        count = 0
        for mapped in files[:-1]:
            last_unit = queue_codec.read_unit(mapped.view, mapped.file_size - CQ_STORE_UNIT_SIZE)
            if last_unit[1] != BLANK_UNIT_SIZE and last_unit[0] >= min_commitlog_offset:
                break
            count += 1
        removed = self.mapped_file_queue.delete_first_files(count)
        self.correct_min_offset(min_commitlog_offset)
        return len(removed)

    def close(self) -> None:
        self.mapped_file_queue.close()

    def destroy(self) -> None:
        """Delete the queue's files and its directory (its topic is deleted)."""
        with self.mapped_file_queue._lock:
            files, self.mapped_file_queue.files = self.mapped_file_queue.files, []
        for mapped in files:
            mapped.destroy()
        try:
            self.mapped_file_queue.store_path.rmdir()
        except OSError:
            pass
