"""IndexFile and IndexService: hash index from "topic#key" to CommitLog offsets (SmartGo-Store 1.5).

Layout (index_codec.pyx): 40-byte header, hash slots of i32, linked 20-byte entries. Keys are the message's KEYS
(space-separated) and its UNIQ_KEY; the hash is Java's String.hashCode so that RocketMQ reads our files and we
read RocketMQ's. Files are named by their creation time (yyyyMMddHHmmssSSS) and a new one starts when the
newest is full. Entries only hint: a query reads each message back and keeps those that really carry the key.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path
from typing import Callable

from fastmq._native import index_codec
from fastmq._native.store_codec import DispatchRequest, MessageBatch
from fastmq.store.commitlog import TRANSACTION_ROLLBACK, TRANSACTION_TYPE_MASK
from fastmq.store.errors import CorruptStoreError
from fastmq.store.mapped_file import MappedFile
from fastmq.store.message import KEY_SEPARATOR

log = logging.getLogger(__name__)

INDEX_HEADER = struct.Struct(">qqqqii")
TIME_NAME_DIGITS = 17


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return (index_codec.INDEX_HEADER_LENGTH + hash_slot_num * index_codec.INDEX_SLOT_LENGTH
            + index_num * index_codec.INDEX_ENTRY_LENGTH)


def index_file_name(millis: int) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime(millis / 1000)) + f"{millis % 1000:03d}"


class IndexFile:
    def __init__(self, path: Path, hash_slot_num: int, index_num: int, read_only: bool = False,
                 end_phy_offset: int = 0, end_timestamp: int = 0) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = index_file_size(hash_slot_num, index_num)
        created = not path.exists()
        # Hash slots are written anywhere in the file: its blocks are reserved at once.
        self.mapped = MappedFile(path, size, read_only, preallocate=True)
        self.mapped.wrote_position = size
        # Keys written and keys known durable: counting (not a flag) keeps a put racing a flush from being lost.
        self._writes = 1 if created else 0
        self._flushed_writes = 0
        if created:
            # A new file continues where the previous one ended, so that repeats are still recognized.
            INDEX_HEADER.pack_into(self.mapped.view, 0, end_timestamp, end_timestamp, end_phy_offset,
                                   end_phy_offset, 0, 1)

    @property
    def path(self) -> Path:
        return self.mapped.path

    def _header(self) -> tuple[int, int, int, int, int, int]:
        return INDEX_HEADER.unpack_from(self.mapped.view, 0)

    @property
    def begin_timestamp(self) -> int:
        return self._header()[0]

    @property
    def end_timestamp(self) -> int:
        return self._header()[1]

    @property
    def begin_phy_offset(self) -> int:
        return self._header()[2]

    @property
    def end_phy_offset(self) -> int:
        return self._header()[3]

    @property
    def index_count(self) -> int:
        return max(1, self._header()[5])

    def header_is_sane(self) -> bool:
        """False when the header contradicts itself (damage): such a file is rebuilt rather than trusted."""
        begin_timestamp, end_timestamp, begin_phy, end_phy, _slots, count = self._header()
        if not 0 <= count <= self.index_num:
            return False
        return count <= 1 or (0 < begin_timestamp <= end_timestamp and 0 <= begin_phy <= end_phy)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        begin_timestamp, end_timestamp = self._header()[:2]
        return (begin < begin_timestamp and end > end_timestamp) or begin_timestamp <= begin <= end_timestamp \
            or begin_timestamp <= end <= end_timestamp

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        self._writes += 1
        return index_codec.index_put(self.mapped.view, self.hash_slot_num, self.index_num,
                                     index_codec.index_key_hash(key), phy_offset, store_timestamp)

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        try:
            return index_codec.index_select(self.mapped.view, self.hash_slot_num, self.index_num,
                                            index_codec.index_key_hash(key), max_num, begin, end)
        except ValueError:   # destroyed by cleanup meanwhile
            return []

    @property
    def flushed(self) -> bool:
        return self._flushed_writes == self._writes

    def flush(self) -> int:
        """fsync (the whole file: its header too); returns the end timestamp that is now durable."""
        writes = self._writes
        if not self.mapped.available:     # destroyed by cleanup meanwhile
            return 0
        end_timestamp = self.end_timestamp
        self.mapped.sync(metadata=True)
        self._flushed_writes = writes
        return end_timestamp

    def close(self) -> None:
        self.mapped.close()

    def destroy(self) -> None:
        self.mapped.destroy()


class IndexService:
    """All index files of a store, oldest first; keys go into the newest."""

    MAX_QUERY_RESULTS = 64

    def __init__(self, root: Path, hash_slot_num: int, index_num: int, clock: Callable[[], int], read_only: bool = False) -> None:
        self.store_path = root / "index"
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.read_only = read_only
        self.files: list[IndexFile] = []
        self._clock = clock
        self._lock = threading.Lock()

    def _geometry_for(self, path: Path) -> tuple[int, int] | None:
        size = path.stat().st_size
        if size == index_file_size(self.hash_slot_num, self.index_num):
            return self.hash_slot_num, self.index_num
        # RocketMQ's default geometry has four entries per slot; a foreign store may use other counts.
        slots, remainder = divmod(size - index_codec.INDEX_HEADER_LENGTH,
                                  index_codec.INDEX_SLOT_LENGTH + 4 * index_codec.INDEX_ENTRY_LENGTH)
        if self.read_only and not remainder and slots > 0:
            return slots, slots * 4
        return None

    def load(self, last_exit_ok: bool, index_msg_timestamp: int) -> int | None:
        """Open the index files. After a crash, files written past the checkpoint may be torn, and a damaged header
        makes a file untrustworthy: such a file and every newer one are destroyed, and the CommitLog offset from
        which to rebuild them is returned (None when nothing was destroyed)."""
        if not self.store_path.is_dir():
            return None
        rebuild_from = None
        files: list[IndexFile] = []
        for path in sorted(self.store_path.iterdir()):
            if not (path.is_file() and len(path.name) == TIME_NAME_DIGITS and path.name.isdigit()):
                continue
            if not self.read_only and path.stat().st_size == 0:
                # Created, and the process died before it was sized: it holds nothing; what it was to index is
                # indexed again.
                log.warning("index file %s is empty (its creation was cut short); it is rebuilt", path)
                if rebuild_from is None:
                    rebuild_from = files[-1].end_phy_offset if files else 0
                path.unlink()
                continue
            geometry = self._geometry_for(path)
            if geometry is None:
                raise CorruptStoreError(f"index file {path} is {path.stat().st_size} bytes, which does not match "
                                        f"{self.hash_slot_num} slots x {self.index_num} entries: fix the config "
                                        "or move the file aside")
            index_file = IndexFile(path, *geometry, read_only=self.read_only)
            if self.read_only:
                files.append(index_file)
                continue
            if rebuild_from is not None:
                log.info("index file %s follows a rebuilt one; it is rebuilt too", path)
            elif not index_file.header_is_sane():
                log.warning("index file %s has a damaged header; it is rebuilt", path)
                rebuild_from = files[-1].end_phy_offset if files else 0
            elif not last_exit_ok and index_file.end_timestamp > index_msg_timestamp:
                log.info("index file %s was written after the last checkpoint; it is rebuilt", path)
                rebuild_from = index_file.begin_phy_offset
            else:
                files.append(index_file)
                continue
            index_file.destroy()
        self.files = files
        return rebuild_from

    def destroy_files_beyond(self, max_phy_offset: int) -> int | None:
        """Destroy index files that claim messages past the end of the CommitLog (they belong to data that was
        cut off); returns the offset to rebuild from, None if none was destroyed."""
        rebuild_from = None
        with self._lock:
            while self.files and self.files[-1].end_phy_offset > max_phy_offset:
                index_file = self.files.pop()
                begin = max(0, min(index_file.begin_phy_offset, max_phy_offset))
                rebuild_from = begin if rebuild_from is None else min(rebuild_from, begin)
                log.info("destroying index file %s: it indexes past the CommitLog end %d", index_file.path,
                         max_phy_offset)
                index_file.destroy()
        return rebuild_from

    def _last_writable_file(self) -> IndexFile:
        files = self.files
        if files and not files[-1].is_write_full():
            return files[-1]
        with self._lock:
            end_phy_offset = end_timestamp = 0
            if self.files:
                end_phy_offset = self.files[-1].end_phy_offset
                end_timestamp = self.files[-1].end_timestamp
            self.store_path.mkdir(parents=True, exist_ok=True)
            millis = self._clock()
            while (self.store_path / index_file_name(millis)).exists():
                millis += 1
            index_file = IndexFile(self.store_path / index_file_name(millis), self.hash_slot_num, self.index_num,
                                   end_phy_offset=end_phy_offset, end_timestamp=end_timestamp)
            self.files = self.files + [index_file]
            return index_file

    def build_index(self, request: DispatchRequest) -> None:
        """Index one replayed message."""
        self.index_message(request.topic, request.keys, request.uniq_key, request.commitlog_offset,
                           request.store_timestamp, request.sys_flag)

    def build_batch_index(self, batch: MessageBatch) -> None:
        """Index the messages of an appended batch that carry keys."""
        for i, keys, uniq_key in batch.index_items:
            if i >= batch.written:
                break
            self.index_message(batch.topic, keys, uniq_key, batch.commitlog_offset(i), batch.store_timestamp,
                               batch.sys_flag)

    def index_message(self, topic: str, keys: str | None, uniq_key: str | None, commitlog_offset: int,
                      store_timestamp: int, sys_flag: int) -> None:
        if sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK or not (keys or uniq_key):
            return
        index_file = self._last_writable_file()
        if commitlog_offset < index_file.end_phy_offset:
            return   # indexed before (a recovery replay)
        all_keys = [uniq_key] if uniq_key else []
        if keys:
            all_keys.extend(key for key in keys.split(KEY_SEPARATOR) if key)
        for key in all_keys:
            full_key = build_key(topic, key)
            if not index_file.put_key(full_key, commitlog_offset, store_timestamp):
                index_file = self._last_writable_file()
                index_file.put_key(full_key, commitlog_offset, store_timestamp)

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """CommitLog offsets indexed under topic#key between begin and end (ms), newest first, without repeats."""
        max_num = min(max_num, self.MAX_QUERY_RESULTS)
        full_key = build_key(topic, key)
        found: dict[int, None] = {}
        for index_file in reversed(self.files):
            if len(found) >= max_num:
                break
            if index_file.is_time_matched(begin, end):
                for offset in index_file.select_phy_offsets(full_key, max_num - len(found), begin, end):
                    found[offset] = None
            if index_file.begin_timestamp < begin:
                break
        return list(found)[:max_num]

    def delete_expired_files(self, min_commitlog_offset: int) -> int:
        """Delete the index files whose entries all point below the CommitLog's minimum (never the newest)."""
        with self._lock:
            count = 0
            for index_file in self.files[:-1]:
                if index_file.end_phy_offset >= min_commitlog_offset:
                    break
                count += 1
            removed, self.files = self.files[:count], self.files[count:]
        for index_file in removed:
            index_file.destroy()
        return len(removed)

    def flush(self) -> int:
        """Flush every file with unflushed entries; returns the end timestamp now durable (0: nothing new)."""
        durable = 0
        for index_file in self.files:
            if not index_file.flushed:
                durable = index_file.flush()
        return durable

    def close(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for index_file in files:
            index_file.close()
