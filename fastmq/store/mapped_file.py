"""MappedFile and MappedFileQueue: fixed-size files mapped into memory, named by their start offset.

A queue's files are named by the 20-digit zero-padded offset of their first byte, so the file of any offset
is found by arithmetic (seed 003): index = offset // size - first_offset // size.

Disk use follows the data: a file is created sparse (its full size, no blocks), and appends reserve blocks a
step ahead of what they write (MappedFile.append_view). Steps double from one page up to the queue's
reserve_ahead, so a cold queue holds a page and a busy one always writes into blocks reserved before it gets
there. Writes go through the mapping (memcpy into the page cache); flushing is fdatasync on the file, which
releases the GIL so that appenders keep going while the disk works.

Files are mapped on first use, and an OpenMappings bound closes the least recently used mappings so that
thousands of queues do not exhaust memory maps or file descriptors; a closed mapping is reopened on its next
use. Readers get zero-copy memoryview slices, which keep their memory mapped until they are released: a file
whose mapping is closed (bound, cleanup, truncation) stays readable for a reader that holds a slice, so no reader
ever touches unmapped memory.
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
# The most an append reserves ahead of its write position unless the queue says otherwise (CommitLog files take
# MessageStoreConfig.commit_log_reserve_ahead).
DEFAULT_RESERVE_AHEAD = 4 << 20
_ZEROS = memoryview(bytes(1 << 20))


def offset_to_file_name(offset: int) -> str:
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def round_up_to_page(position: int) -> int:
    return -(-position // OS_PAGE_SIZE) * OS_PAGE_SIZE


def allocate(fd: int, offset: int, length: int) -> None:
    """Reserve disk blocks for a file region (the file grows to hold it, never shrinks). Writing through a
    mapping to a page without a block kills the process with SIGBUS on a full disk, where this raises
    OSError (ENOSPC)."""
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


class _Mapping:
    """One open file and its memory map. Whoever holds this object can use both: the descriptor closes when the
    last holder drops it, and the map when the last view of it is released, so closing a mapping never pulls
    memory or a descriptor from under a thread that is using it."""

    __slots__ = ("fd", "view")

    def __init__(self, path: Path, size: int, read_only: bool) -> None:
        self.fd = -1
        self.fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        self.view = memoryview(mmap.mmap(self.fd, size, access=mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE))

    def __del__(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


class OpenMappings:
    """The mappings open at once, at most `limit` of them (None: no bound); each holds a memory map and two file
    descriptors (Python's mmap keeps a duplicate of the one it maps). Over the bound, the least recently
    used is closed: a CLOCK sweep (second chance), where a use only sets the file's `referenced` flag, so the
    read and write paths take no lock."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise StoreConfigError("the bound on open mapped files must be at least 1")
        self.limit = limit
        self.opened = 0     # mappings opened so far: first uses and reopenings
        self._ring: list[MappedFile] = []
        self._hand = 0
        self._lock = threading.Lock()

    def open(self, mapped: MappedFile) -> _Mapping:
        with self._lock:
            mapping = mapped._mapping
            if mapping is not None:
                return mapping
            if mapped._closed:
                raise ValueError(f"{mapped.path} is closed")
            mapping = _Mapping(mapped.path, mapped.file_size, mapped.read_only)
            if self.limit is not None:
                self._admit(mapped)
            mapped._mapping = mapping
            self.opened += 1
            return mapping

    def _admit(self, mapped: MappedFile) -> None:
        assert self.limit is not None, "open() admits to the ring only under a bound"
        ring = self._ring
        if len(ring) < self.limit:
            ring.append(mapped)
            return
        # A file used since the hand last passed gets a second chance. Uses go on while the hand sweeps, so the
        # sweep is bounded: after two rounds the file under the hand goes whatever its flag says.
        for _ in range(2 * len(ring)):
            victim = ring[self._hand]
            if victim._mapping is None or not victim.referenced:
                break
            victim.referenced = False
            self._hand = (self._hand + 1) % len(ring)
        victim = ring[self._hand]
        victim._mapping = None
        ring[self._hand] = mapped
        self._hand = (self._hand + 1) % len(ring)

    def close(self, mapped: MappedFile) -> None:
        """Close the file for good (its slot in the ring is taken by the next file opened)."""
        with self._lock:
            mapped._closed = True
            mapped._mapping = None


# Files that no store bounds (index files, queues opened on their own) keep their mapping until closed.
UNBOUNDED = OpenMappings(None)


class MappedFile:
    """One file of a MappedFileQueue. Positions are relative to the file; offsets are absolute."""

    __slots__ = ("path", "file_from_offset", "file_size", "wrote_position", "flushed_position",
                 "store_timestamp", "read_only", "reserved_position", "reserve_step", "reserve_ahead",
                 "referenced", "directory_synced", "_mappings", "_mapping", "_closed")

    def __init__(self, path: Path, file_size: int, read_only: bool = False, mappings: OpenMappings = UNBOUNDED,
                 reserve_ahead: int = DEFAULT_RESERVE_AHEAD, preallocate: bool = False) -> None:
        self.path = path
        self.file_from_offset = int(path.name)
        self.file_size = file_size
        self.read_only = read_only
        self.wrote_position = 0
        self.flushed_position = 0
        # STORETIMESTAMP of the newest message appended (CommitLog files; checkpoints record it when flushed).
        self.store_timestamp = 0
        # Blocks are reserved up to reserved_position; the next step reserves reserve_step more (doubling up to
        # reserve_ahead).
        self.reserved_position = 0
        self.reserve_step = OS_PAGE_SIZE
        self.reserve_ahead = max(OS_PAGE_SIZE, reserve_ahead)
        self.referenced = False
        # A file created here gets its directory entry made durable with its first sync, not at once: thousands of
        # queues each starting a file would wait for one directory fsync (a journal commit) after another.
        self.directory_synced = True
        self._mappings = mappings
        self._mapping: _Mapping | None = None
        self._closed = False
        try:
            actual: int | None = os.stat(path).st_size
        except FileNotFoundError:
            if read_only:
                raise
            actual = None
        if actual is None or (actual == 0 and not read_only):
            self._create(preallocate)
        elif actual != file_size:
            raise CorruptStoreError(f"{path} is {actual} bytes, expected {file_size}: it was written with "
                                    "another file size, or damaged; fix the config or move the file aside")

    def _create(self, preallocate: bool) -> None:
        self.directory_synced = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self.file_size)   # sparse: blocks come with the data (append_view)
            if preallocate:
                allocate(fd, 0, self.file_size)
                self.reserved_position = self.file_size
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    @property
    def available(self) -> bool:
        return not self._closed

    @property
    def view(self) -> memoryview:
        """The whole file's memory, mapped on first use (and again after the bound closed it). Raises ValueError
        once the file is closed."""
        mapping = self._mapping
        if mapping is None:
            mapping = self._mappings.open(self)
        self.referenced = True
        return mapping.view

    def append_view(self, end: int) -> memoryview:
        """The view to append through, with disk blocks reserved for bytes up to `end` (at most the file size)
        and a step beyond: a page written through a mapping without a block kills the process with SIGBUS
        when the disk is full, where reserving raises OSError (ENOSPC). Reserving writes zeros with pwrite,
        which also puts the pages in the page cache ahead of the mapping: a first write through a mapping to
        a page not in the cache faults it in one page at a time (several microseconds each), which pwrite does
        for a fraction of that, without the GIL. Blocks are allocated for the step first: pwrite into a hole
        costs a block reservation per page."""
        mapping = self._mapping
        if mapping is None:
            mapping = self._mappings.open(self)
        self.referenced = True
        if end > self.reserved_position:
            self._reserve(mapping.fd, end)
        return mapping.view

    def _reserve(self, fd: int, end: int) -> None:
        start = max(self.reserved_position, self.wrote_position)
        target = min(self.file_size, round_up_to_page(max(end, start - start % OS_PAGE_SIZE + self.reserve_step)))
        allocate(fd, start, target - start)
        while start < target:
            start += os.pwrite(fd, _ZEROS[:min(len(_ZEROS), target - start)], start)
        self.reserved_position = target
        self.reserve_step = min(2 * self.reserve_step, self.reserve_ahead)

    def select(self, position: int, size: int | None = None) -> memoryview | None:
        """Zero-copy view of written bytes [position, position + size) (to the written end when size is None);
        None when the range is not (or no longer) readable."""
        end = self.wrote_position if size is None else position + size
        if self._closed or position < 0 or end > self.wrote_position or end < position:
            return None
        try:
            return self.view[position:end]
        except ValueError:   # closed concurrently by destroy()
            return None

    def data_end(self) -> int:
        """Where the file's last block of data ends: everything after it reads as zeros (never reserved, or
        reserved and not written since). The file size where the filesystem cannot tell."""
        mapping = self._mappings.open(self)     # held: its descriptor stays open while in use
        end = position = 0
        try:
            while position < self.file_size:
                position = os.lseek(mapping.fd, os.lseek(mapping.fd, position, os.SEEK_DATA), os.SEEK_HOLE)
                end = position
        except OSError as exc:
            if exc.errno != errno.ENXIO:    # ENXIO: no data after `position`
                return self.file_size
        return min(end, self.file_size)

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

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
            self.sync(metadata=False)
        except OSError:
            if self._closed:      # destroyed by cleanup while flushing
                return self.flushed_position
            raise
        self.flushed_position = position
        return position

    def sync(self, metadata: bool) -> None:
        """fdatasync (fsync with metadata) the file, and its directory after the file was created. Through a descriptor of its own: the file's mapping may be
        closed (and mapping it again for this would push a file in use out of the bound). It covers what was
        written through any mapping of the file."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            (os.fsync if metadata else os.fdatasync)(fd)
        finally:
            os.close(fd)
        if not self.directory_synced:
            fsync_directory(self.path.parent)
            self.directory_synced = True

    def zero_from(self, position: int) -> None:
        """Discard everything from `position` to the end: stale bytes past a truncation point must never be
        read back as records later. Cutting the file there and growing it again leaves a hole, which reads as
        zeros without writing any; appends reserve it again."""
        mapping = self._mappings.open(self)     # held: its descriptor stays open while in use
        os.ftruncate(mapping.fd, position)
        os.ftruncate(mapping.fd, self.file_size)
        self.reserved_position = position

    def last_modified_ms(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        """Close the mapping for good; readers holding views keep their memory until they release them."""
        self._mappings.close(self)

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

    def __init__(self, store_path: Path, mapped_file_size: int, read_only: bool = False,
                 mappings: OpenMappings = UNBOUNDED, reserve_ahead: int = DEFAULT_RESERVE_AHEAD) -> None:
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.read_only = read_only
        self.mappings = mappings
        self.reserve_ahead = reserve_ahead
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._lock = threading.Lock()

    def load(self, infer_size: bool = False) -> None:
        """Find the existing files (each is mapped on first use). With infer_size (read-only opening of a foreign store) the size of the first
        file is taken as the queue's file size."""
        if not self.store_path.is_dir():
            return
        names = sorted(p for p in self.store_path.iterdir()
                       if p.is_file() and len(p.name) == FILE_NAME_DIGITS and p.name.isdigit())
        if infer_size and names:
            self.mapped_file_size = names[0].stat().st_size
            if self.mapped_file_size <= 0:
                raise CorruptStoreError(f"{names[0]} is empty")
        files: list[MappedFile] = []
        for path in names:
            if files and int(path.name) != files[-1].file_from_offset + self.mapped_file_size:
                raise CorruptStoreError(f"{path} does not follow {files[-1].path.name}: files are missing from "
                                        f"{self.store_path}")
            if int(path.name) % self.mapped_file_size:
                raise StoreConfigError(f"{path} does not start at a multiple of the configured file size "
                                       f"{self.mapped_file_size}")
            mapped = self._mapped_file(path)
            mapped.wrote_position = mapped.flushed_position = self.mapped_file_size
            files.append(mapped)
        self.files = files
        if files:
            self.flushed_where = files[-1].file_from_offset + self.mapped_file_size

    def _mapped_file(self, path: Path) -> MappedFile:
        return MappedFile(path, self.mapped_file_size, self.read_only, self.mappings, self.reserve_ahead)

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
            mapped = self._mapped_file(self.store_path / offset_to_file_name(create_offset))
            if not files:
                self.flushed_where = create_offset
            self.files = files + [mapped]
            return mapped

    # -- flush ------------------------------------------------------------------------------------------------

    def flush_due(self, least_pages: int) -> bool:
        """Whether flush(least_pages) would sync something: the file at flushed_where has enough dirty pages (or is
        full and not all flushed). No system call, so a flush round can skip thousands of quiet queues cheaply."""
        mapped = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        return mapped is not None and mapped.is_able_to_flush(least_pages)

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
