"""MappedFile and MappedFileQueue: fixed-size files mapped into memory, named by their start offset.

A queue's files are named by the 20-digit zero-padded offset of their first byte, so the file of any offset
is found by arithmetic (seed 003): index = offset // size - first_offset // size.

Writes go through the mapping (memcpy into the page cache); flushing is fdatasync on the file, which releases
the GIL so that appenders keep going while the disk works. Readers get zero-copy memoryview slices; a file that
is destroyed while a reader still holds a slice stays mapped until the slice is released (the path is already
unlinked), so no reader ever touches unmapped memory.
"""
from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from pathlib import Path

from fastmq.store.errors import CorruptStoreError, StoreConfigError

log = logging.getLogger(__name__)

OS_PAGE_SIZE = mmap.PAGESIZE
FILE_NAME_DIGITS = 20
# Appends warm the file this far ahead of what they write (see MappedFile.warm).
WARM_AHEAD = 4 << 20
_ZEROS = bytes(1 << 20)


def offset_to_file_name(offset: int) -> str:
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def allocate(fd: int, offset: int, length: int) -> None:
    """Reserve disk blocks for a file region. Writing through a mapping of a sparse file costs a block
    allocation on every first touch of a page (several times slower), and on a full disk it kills the process
    with SIGBUS; reserved blocks make appends fast and turn a full disk into an OSError here."""
    os.ftruncate(fd, offset + length)
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise


def fsync_directory(path: Path) -> None:
    """Make a created, renamed or removed directory entry durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MappedFile:
    """One file of a MappedFileQueue. Positions are relative to the file; offsets are absolute."""

    __slots__ = ("path", "file_from_offset", "file_size", "wrote_position", "flushed_position",
                 "store_timestamp", "read_only", "warmed_position", "_fd", "_mmap", "view", "_closed")

    def __init__(self, path: Path, file_size: int, read_only: bool = False) -> None:
        self.path = path
        self.file_from_offset = int(path.name)
        self.file_size = file_size
        self.read_only = read_only
        self.wrote_position = 0
        self.flushed_position = 0
        # STORETIMESTAMP of the newest message appended (CommitLog files; checkpoints record it when flushed).
        self.store_timestamp = 0
        self.warmed_position = 0
        self._closed = False
        created = False
        if read_only:
            self._fd = os.open(path, os.O_RDONLY)
        else:
            created = not path.exists()
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            actual = os.fstat(self._fd).st_size
            if created or (actual == 0 and not read_only):
                allocate(self._fd, 0, file_size)
            elif actual != file_size:
                raise CorruptStoreError(f"{path} is {actual} bytes, expected {file_size}: it was written with "
                                        "another file size, or damaged; fix the config or move the file aside")
            self._mmap = mmap.mmap(self._fd, file_size, access=mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self.view = memoryview(self._mmap)
        if created:
            fsync_directory(path.parent)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    @property
    def available(self) -> bool:
        return not self._closed

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def select(self, position: int, size: int | None = None) -> memoryview | None:
        """Zero-copy view of written bytes [position, position + size) (to the written end when size is None);
        None when the range is not (or no longer) readable."""
        end = self.wrote_position if size is None else position + size
        if self._closed or position < 0 or end > self.wrote_position or end < position:
            return None
        try:
            return self.view[position:end]
        except ValueError:   # released concurrently by destroy()
            return None

    def is_able_to_flush(self, least_pages: int) -> bool:
        if self.is_full():
            return self.flushed_position < self.file_size
        if least_pages > 0:
            return self.wrote_position // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE >= least_pages
        return self.wrote_position > self.flushed_position

    def flush(self, least_pages: int) -> int:
        """fdatasync when enough is dirty; returns the flushed position."""
        if self.read_only or self._closed or not self.is_able_to_flush(least_pages):
            return self.flushed_position
        position = self.wrote_position
        try:
            os.fdatasync(self._fd)
        except OSError:
            if self._closed:      # destroyed by cleanup while flushing
                return self.flushed_position
            raise
        self.flushed_position = position
        return position

    def warm(self, position: int) -> None:
        """Make sure bytes up to `position` (and WARM_AHEAD more) are in the page cache before the mapping
        touches them. The first write through a mapping to a page of a fallocated file faults it in one page at
        a time (several microseconds each: the append path's main cost); writing zeros with pwrite first, ahead of
        the write position where no reader looks, costs a fraction of that and releases the GIL."""
        if position <= self.warmed_position or self.read_only or self._closed:
            return
        start = max(self.warmed_position, self.wrote_position)
        end = min(self.file_size, max(position, start) + WARM_AHEAD)
        while start < end:
            start += os.pwrite(self._fd, memoryview(_ZEROS)[:min(len(_ZEROS), end - start)], start)
        self.warmed_position = end

    def zero_from(self, position: int) -> None:
        """Discard everything from `position` to the end: stale bytes past a truncation point must never be
        read back as records later. Dropping and re-allocating the file's tail zeroes it without writing."""
        os.ftruncate(self._fd, position)
        allocate(self._fd, position, self.file_size - position)

    def fileno(self) -> int:
        return self._fd

    def last_modified_ms(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.view.release()
        try:
            self._mmap.close()
        except BufferError:
            # A reader still holds a slice; the mapping goes away with the last slice.
            pass
        os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


class MappedFileQueue:
    """The files of one CommitLog or one ConsumeQueue directory, in offset order.

    Structural changes (a new file at the end, expired files at the front, truncation) replace the file list
    under a lock; readers work on the list they looked up, so no lock is taken on the read path.
    """

    def __init__(self, store_path: Path, mapped_file_size: int, read_only: bool = False) -> None:
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.read_only = read_only
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._lock = threading.Lock()

    def load(self, infer_size: bool = False) -> None:
        """Map the existing files. With infer_size (read-only opening of a foreign store) the size of the first
        file is taken as the queue's file size."""
        if not self.store_path.is_dir():
            return
        names = sorted(p for p in self.store_path.iterdir()
                       if p.is_file() and len(p.name) == FILE_NAME_DIGITS and p.name.isdigit())
        if infer_size and names:
            self.mapped_file_size = names[0].stat().st_size
            if self.mapped_file_size <= 0:
                raise CorruptStoreError(f"{names[0]} is empty")
        files = []
        try:
            for path in names:
                if files and int(path.name) != files[-1].file_from_offset + self.mapped_file_size:
                    raise CorruptStoreError(f"{path} does not follow {files[-1].path.name}: files are missing from "
                                            f"{self.store_path}")
                if int(path.name) % self.mapped_file_size:
                    raise StoreConfigError(f"{path} does not start at a multiple of the configured file size "
                                           f"{self.mapped_file_size}")
                mapped = MappedFile(path, self.mapped_file_size, self.read_only)
                mapped.wrote_position = mapped.flushed_position = self.mapped_file_size
                files.append(mapped)
        except BaseException:
            for mapped in files:
                mapped.close()
            raise
        self.files = files
        if files:
            self.flushed_where = files[-1].file_from_offset + self.mapped_file_size

    # -- lookup -----------------------------------------------------------------------------------------------

    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def get_last_mapped_file(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        index = offset // self.mapped_file_size - files[0].file_from_offset // self.mapped_file_size
        if 0 <= index < len(files):
            mapped = files[index]
            if mapped.file_from_offset <= offset < mapped.file_from_offset + self.mapped_file_size:
                return mapped
        return files[0] if return_first_on_not_found else None

    def get_min_offset(self) -> int:
        files = self.files
        return files[0].file_from_offset if files else 0

    def get_max_offset(self) -> int:
        files = self.files
        return files[-1].file_from_offset + files[-1].wrote_position if files else 0

    # -- growth -----------------------------------------------------------------------------------------------

    def get_writable_file(self, start_offset: int = 0) -> MappedFile:
        """The last file if it has room, else a new file after it (the first file covers start_offset)."""
        files = self.files
        if files and not files[-1].is_full():
            return files[-1]
        with self._lock:
            files = self.files
            if files:
                if not files[-1].is_full():
                    return files[-1]
                create_offset = files[-1].file_from_offset + self.mapped_file_size
            else:
                create_offset = start_offset - start_offset % self.mapped_file_size
            self.store_path.mkdir(parents=True, exist_ok=True)
            mapped = MappedFile(self.store_path / offset_to_file_name(create_offset), self.mapped_file_size)
            if not files:
                self.flushed_where = create_offset
            self.files = files + [mapped]
            return mapped

    # -- flush ------------------------------------------------------------------------------------------------

    def flush(self, least_pages: int) -> tuple[bool, int]:
        """Flush from flushed_where on (every file up to the written end). Returns (something was flushed,
        STORETIMESTAMP of the newest flushed message, 0 if unknown)."""
        flushed_any = False
        store_timestamp = 0
        while True:
            mapped = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
            if mapped is None:
                return flushed_any, store_timestamp
            timestamp = mapped.store_timestamp
            before = mapped.flushed_position
            position = mapped.flush(least_pages)
            where = mapped.file_from_offset + position
            if position != before:
                flushed_any = True
                store_timestamp = timestamp
            if where <= self.flushed_where:
                return flushed_any, store_timestamp
            self.flushed_where = where
            if position < self.mapped_file_size:
                return flushed_any, store_timestamp

    # -- truncation and deletion ------------------------------------------------------------------------------

    def truncate_dirty_files(self, offset: int) -> None:
        """Forget everything from `offset` on: later files are deleted, the file holding it is cut there (and its
        tail zeroed). Read-only queues only adjust their in-memory view."""
        with self._lock:
            kept = []
            for mapped in self.files:
                tail = mapped.file_from_offset + self.mapped_file_size
                if tail <= offset:
                    kept.append(mapped)
                elif offset >= mapped.file_from_offset:
                    position = offset - mapped.file_from_offset
                    mapped.wrote_position = mapped.flushed_position = position
                    if not self.read_only:
                        mapped.zero_from(position)
                    kept.append(mapped)
                else:
                    log.info("removing dirty file %s (past offset %d)", mapped.path, offset)
                    if self.read_only:
                        mapped.close()
                    else:
                        mapped.destroy()
            self.files = kept
            self.flushed_where = min(self.flushed_where, offset)

    def delete_first_files(self, count: int) -> list[MappedFile]:
        """Destroy the first `count` files (never the last one); returns them."""
        with self._lock:
            count = min(count, len(self.files) - 1)
            if count <= 0:
                return []
            removed, self.files = self.files[:count], self.files[count:]
            if self.flushed_where < self.files[0].file_from_offset:
                self.flushed_where = self.files[0].file_from_offset
        for mapped in removed:
            mapped.destroy()
        return removed

    def close(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for mapped in files:
            mapped.close()
