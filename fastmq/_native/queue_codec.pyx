# cython: language_level=3
"""ConsumeQueue units of the RocketMQ 4.x store, and the scans and gathers that read a queue's records.

ConsumeQueue unit (20 bytes, big-endian): [commitlog offset i64][record size i32][tags code i64]. Filler units
written ahead of a queue's first unit (a queue that starts mid-file) are (0, 0x7FFFFFFF, 0). The records the units
point to are CommitLog records (store_codec.pyx).
"""
cimport cython
from cpython cimport array
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from fastmq._native.buffer cimport load_i32be, load_i64be, store_i32be, store_i64be
from fastmq._native.store_codec cimport (
    MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, MIN_RECORD_SIZE, OFFSET_MAGIC, OFFSET_QUEUE_ID, OFFSET_QUEUE_OFFSET,
)

from fastmq.errors import CorruptDataError

import array

cdef enum:
    GATHER_NOGIL_THRESHOLD = 65536   # copy this many bytes and more without the GIL

# Python-visible names for the format constants.
CQ_UNIT_SIZE = CQ_STORE_UNIT_SIZE
CQ_BLANK_SIZE = CQ_BLANK_UNIT_SIZE

cdef array.array INT64_TEMPLATE = array.array("q")
cdef array.array INT32_TEMPLATE = array.array("i")


def put_unit(buf, Py_ssize_t pos, int64_t commitlog_offset, int32_t size, int64_t tags_code) -> None:
    """Write one ConsumeQueue unit at pos."""
    cdef Py_buffer view
    cdef char* p
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        if pos < 0 or view.len - pos < CQ_STORE_UNIT_SIZE:
            raise ValueError(f"unit position {pos} outside the file (0..{view.len})")
        p = <char*>view.buf + pos
        store_i64be(p, commitlog_offset)
        store_i32be(p + 8, size)
        store_i64be(p + 12, tags_code)
    finally:
        PyBuffer_Release(&view)


def read_unit(buf, Py_ssize_t pos) -> tuple:
    """The (commitlog offset, size, tags code) unit at pos."""
    cdef Py_buffer view
    cdef const char* p
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or view.len - pos < CQ_STORE_UNIT_SIZE:
            raise ValueError(f"unit position {pos} outside the file (0..{view.len})")
        p = <const char*>view.buf + pos
        return load_i64be(p), load_i32be(p + 8), load_i64be(p + 12)
    finally:
        PyBuffer_Release(&view)


def count_valid_units(buf, int64_t previous_end=-1) -> tuple:
    """Where the written units of a ConsumeQueue file end (after a restart): (valid units, CommitLog offset
    past the last real one).

    A unit is valid when its offset is >= 0 and its size > 0, and a real unit starts at or after the end of the
    previous one (units follow the CommitLog's order); filler units may only precede real ones.
    previous_end carries the check over from the queue's previous file (-1: none).
    """
    cdef Py_buffer view
    cdef const char* p
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t count = 0
    cdef int64_t offset
    cdef int32_t size
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const char*>view.buf
        with nogil:
            while pos + CQ_STORE_UNIT_SIZE <= view.len:
                offset = load_i64be(p + pos)
                size = load_i32be(p + pos + 8)
                if offset < 0 or size <= 0:
                    break
                if size == CQ_BLANK_UNIT_SIZE and offset == 0:
                    if previous_end >= 0:
                        break
                else:
                    if offset < previous_end:
                        break
                    previous_end = offset + size
                count += 1
                pos += CQ_STORE_UNIT_SIZE
        return count, previous_end
    finally:
        PyBuffer_Release(&view)


cdef inline bint sorted_contains(const int64_t* values, Py_ssize_t n, int64_t key) noexcept nogil:
    cdef Py_ssize_t lo = 0
    cdef Py_ssize_t hi = n
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < key:
            lo = mid + 1
        elif values[mid] > key:
            hi = mid
        else:
            return True
    return False


@cython.final
cdef class QueueUnits:
    """Units selected from one ConsumeQueue (of queue_id), as three parallel arrays (no Python object per unit).

    commitlog_offsets ('q'), sizes ('i') and queue_offsets ('q') become available once scanning is over;
    next_offset is the logical offset where the following read of the queue should start.
    """

    def __cinit__(self, Py_ssize_t capacity, int32_t queue_id=0):
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.queue_id = queue_id
        self._commitlog_offsets = array.clone(INT64_TEMPLATE, capacity, False)
        self._sizes = array.clone(INT32_TEMPLATE, capacity, False)
        self._queue_offsets = array.clone(INT64_TEMPLATE, capacity, False)
        self.capacity = capacity
        self.count = 0
        self.total_bytes = 0
        self.next_offset = 0
        self._trimmed = False

    @property
    def full(self) -> bool:
        return self.count >= self.capacity

    def scan(self, buf, Py_ssize_t start_pos, Py_ssize_t end_pos, int64_t first_queue_offset, tag_codes=None,
             int64_t max_bytes=-1, Py_ssize_t max_units=-1) -> int:
        """Select units from [start_pos, end_pos) of one ConsumeQueue file and return how many were consumed.

        first_queue_offset is the logical offset of the unit at start_pos. Filler and unwritten units are
        consumed and skipped; with tag_codes (a sorted array('q')) only units whose tags code is in it are
        selected. Scanning stops when the batch is full, when the next selected unit would take total_bytes
        over max_bytes (the first one is always taken), or after max_units units (for bounding filtered scans).
        """
        cdef Py_buffer view
        cdef Py_buffer codes_view
        cdef const char* p
        cdef const int64_t* codes = NULL
        cdef Py_ssize_t n_codes = 0
        cdef bint have_codes = False
        cdef Py_ssize_t capacity = self.capacity
        cdef Py_ssize_t pos
        cdef Py_ssize_t consumed = 0
        cdef Py_ssize_t count = self.count
        cdef int64_t total = self.total_bytes
        cdef int64_t offset
        cdef int32_t size
        cdef long long* out_offsets = self._commitlog_offsets.data.as_longlongs
        cdef int* out_sizes = self._sizes.data.as_ints
        cdef long long* out_queue_offsets = self._queue_offsets.data.as_longlongs
        if self._trimmed:
            raise ValueError("this QueueUnits was already read; start a new one")
        if start_pos < 0 or start_pos % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"start position {start_pos} is not a unit boundary")
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            if end_pos > view.len:
                end_pos = view.len
            if max_units < 0:
                max_units = end_pos // CQ_STORE_UNIT_SIZE + 1
            if tag_codes is not None:
                PyObject_GetBuffer(tag_codes, &codes_view, PyBUF_SIMPLE)
                have_codes = True
                codes = <const int64_t*>codes_view.buf
                n_codes = codes_view.len // 8
            p = <const char*>view.buf
            pos = start_pos
            with nogil:
                while pos + CQ_STORE_UNIT_SIZE <= end_pos and count < capacity and consumed < max_units:
                    offset = load_i64be(p + pos)
                    size = load_i32be(p + pos + 8)
                    if offset >= 0 and size > 0 and size != CQ_BLANK_UNIT_SIZE and (
                            codes == NULL or sorted_contains(codes, n_codes, load_i64be(p + pos + 12))):
                        if max_bytes >= 0 and count > 0 and total + size > max_bytes:
                            break
                        out_offsets[count] = offset
                        out_sizes[count] = size
                        out_queue_offsets[count] = first_queue_offset + consumed
                        total += size
                        count += 1
                    consumed += 1
                    pos += CQ_STORE_UNIT_SIZE
            self.count = count
            self.total_bytes = total
            return consumed
        finally:
            if have_codes:
                PyBuffer_Release(&codes_view)
            PyBuffer_Release(&view)

    cdef int _trim(self) except -1:
        if not self._trimmed:
            array.resize(self._commitlog_offsets, self.count)
            array.resize(self._sizes, self.count)
            array.resize(self._queue_offsets, self.count)
            self.capacity = self.count
            self._trimmed = True
        return 0

    @property
    def commitlog_offsets(self) -> array.array:
        self._trim()
        return self._commitlog_offsets

    @property
    def sizes(self) -> array.array:
        self._trim()
        return self._sizes

    @property
    def queue_offsets(self) -> array.array:
        self._trim()
        return self._queue_offsets

    def __len__(self):
        return self.count

    def __getitem__(self, Py_ssize_t i) -> tuple:
        """(commitlog offset, size, queue offset) of the i-th selected unit."""
        if i < 0:
            i += self.count
        if i < 0 or i >= self.count:
            raise IndexError("unit index out of range")
        return (self._commitlog_offsets.data.as_longlongs[i], self._sizes.data.as_ints[i],
                self._queue_offsets.data.as_longlongs[i])

    def gather(self, buf, int64_t file_offset, Py_ssize_t readable, Py_ssize_t start, out,
               Py_ssize_t out_pos) -> tuple:
        """Copy the records of units[start:] that lie in one CommitLog file into `out` at out_pos.

        buf is the file, file_offset the CommitLog offset of its first byte and readable how many of its bytes
        hold data. Copying stops at the first unit outside the file; returns (next unit index, next out_pos).
        Each record's TOTALSIZE, magic, QUEUEID and QUEUEOFFSET are checked against its unit (CorruptDataError
        if they disagree: a damaged ConsumeQueue never hands out another queue's message).
        """
        cdef Py_buffer src
        cdef Py_buffer dst
        cdef const char* p
        cdef char* q
        cdef Py_ssize_t i = start
        cdef Py_ssize_t copy_bytes = 0
        cdef int64_t position
        cdef int32_t size
        cdef int32_t magic
        if start < 0 or start > self.count:
            raise ValueError("start index out of range")
        PyObject_GetBuffer(buf, &src, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(out, &dst, PyBUF_SIMPLE | PyBUF_WRITABLE)
            try:
                if readable > src.len:
                    readable = src.len
                p = <const char*>src.buf
                q = <char*>dst.buf
                # First pass (with the GIL, so errors can be raised): validate and find how far this file goes.
                while i < self.count:
                    position = self._commitlog_offsets.data.as_longlongs[i] - file_offset
                    size = self._sizes.data.as_ints[i]
                    if position < 0 or position + size > readable:
                        break
                    if size >= MIN_RECORD_SIZE:
                        magic = load_i32be(p + position + OFFSET_MAGIC)
                    if size < MIN_RECORD_SIZE or load_i32be(p + position) != size or (
                            magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2) or (
                            load_i32be(p + position + OFFSET_QUEUE_ID) != self.queue_id) or (
                            load_i64be(p + position + OFFSET_QUEUE_OFFSET)
                            != self._queue_offsets.data.as_longlongs[i]):
                        raise CorruptDataError(
                            f"ConsumeQueue unit at queue offset {self._queue_offsets.data.as_longlongs[i]} "
                            f"does not point at a {size}-byte record (CommitLog offset "
                            f"{self._commitlog_offsets.data.as_longlongs[i]})")
                    copy_bytes += size
                    i += 1
                if out_pos < 0 or out_pos + copy_bytes > dst.len:
                    raise ValueError("the output buffer is too small for the gathered records")
                if copy_bytes >= GATHER_NOGIL_THRESHOLD:
                    with nogil:
                        out_pos = copy_records(p, file_offset, self._commitlog_offsets.data.as_longlongs,
                                               self._sizes.data.as_ints, start, i, q, out_pos)
                else:
                    out_pos = copy_records(p, file_offset, self._commitlog_offsets.data.as_longlongs,
                                           self._sizes.data.as_ints, start, i, q, out_pos)
                return i, out_pos
            finally:
                PyBuffer_Release(&dst)
        finally:
            PyBuffer_Release(&src)


cdef Py_ssize_t copy_records(const char* src, int64_t file_offset, const long long* offsets, const int* sizes,
                             Py_ssize_t start, Py_ssize_t stop, char* dst, Py_ssize_t out_pos) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(start, stop):
        memcpy(dst + out_pos, src + (offsets[j] - file_offset), sizes[j])
        out_pos += sizes[j]
    return out_pos
