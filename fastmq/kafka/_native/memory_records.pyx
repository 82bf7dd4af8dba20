# cython: language_level=3
"""A record set: a buffer of batches back to back, of any magic (kafka-python's MemoryRecords).

Every magic starts with [Offset int64][Length int32], and the magic byte sits at byte 16 in all of them
(after v2's PartitionLeaderEpoch, after v0/v1's CRC), so batches are walked by length and dispatched by magic.
A truncated last batch is normal in fetch responses (the broker cuts at max_bytes): iteration stops before it.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t

from fastmq._native.buffer cimport load_i32be
from fastmq.kafka._native.records cimport LENGTH_AT, LOG_OVERHEAD, MAGIC_AT

from fastmq.kafka._native.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from fastmq.kafka._native.records import RecordBatch, RecordBatchBuilder
from fastmq.kafka.errors import CorruptRecordError, IllegalStateError, UnsupportedVersionError

cdef enum:
    # The smallest v0 message: LOG_OVERHEAD + crc + magic + attributes + two lengths.
    MIN_BATCH_SIZE = LOG_OVERHEAD + 14


@cython.final
cdef class MemoryRecords:
    """Iterates the batches of a record set; each is a RecordBatch (magic 2) or a LegacyRecordBatch."""
    LENGTH_OFFSET = 8
    LOG_OVERHEAD = 12
    MAGIC_OFFSET = 16
    MIN_SLICE = 26

    cdef object _buffer             # the caller's bytes-like object
    cdef Py_buffer _view            # held view of _buffer
    cdef bint _has_view             # _view must be released
    cdef Py_ssize_t _pos            # start of the next batch
    cdef Py_ssize_t _next_end       # end of the next whole batch, or -1 when none is whole

    def __cinit__(self, bytes_data):
        self._buffer = bytes_data
        PyObject_GetBuffer(bytes_data, &self._view, PyBUF_SIMPLE)
        self._has_view = True
        self._pos = 0
        self._next_end = self._find_end(0)

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)

    cdef Py_ssize_t _find_end(self, Py_ssize_t pos):
        # End of the whole batch starting at pos, or -1 if it is cut short (or absent).
        cdef const char* data = <const char*>self._view.buf
        cdef int32_t length
        if self._view.len - pos < LOG_OVERHEAD:
            return -1
        length = load_i32be(data + pos + LENGTH_AT)
        if length < 0 or length > self._view.len - pos - LOG_OVERHEAD:
            return -1
        return pos + LOG_OVERHEAD + length

    def size_in_bytes(self):
        return self._view.len

    def valid_bytes(self):
        """Bytes covered by whole batches (what a truncated fetch response really delivered)."""
        cdef Py_ssize_t pos = 0, end
        while True:
            end = self._find_end(pos)
            if end < 0:
                return pos
            pos = end

    def has_next(self):
        return self._next_end >= 0

    def next_batch(self):
        """The next whole batch, or None at the end."""
        cdef const char* data = <const char*>self._view.buf
        cdef Py_ssize_t start = self._pos, end = self._next_end
        cdef int magic
        if end < 0:
            return None
        if end - start < MIN_BATCH_SIZE:
            raise CorruptRecordError(
                f"Record size is less than the minimum record overhead ({MIN_BATCH_SIZE - LOG_OVERHEAD})")
        self._pos = end
        self._next_end = self._find_end(end)
        piece = memoryview(self._buffer)[start:end]
        magic = data[start + MAGIC_AT]
        if magic <= 1:
            return LegacyRecordBatch(piece, magic)
        return RecordBatch(piece)

    def __iter__(self):
        return self

    def __next__(self):
        batch = self.next_batch()
        if batch is None:
            raise StopIteration
        return batch

    next = __next__


@cython.final
cdef class MemoryRecordsBuilder:
    """Builds a record set of one batch, assigning consecutive offsets: kafka-python's MemoryRecordsBuilder."""
    cdef object _builder            # RecordBatchBuilder or LegacyRecordBatchBuilder; None once closed
    cdef int _magic                 # 0, 1 or 2
    cdef Py_ssize_t _batch_size     # soft size limit
    cdef object _buffer             # the built batch once closed
    cdef int64_t _next_offset       # offset the next append gets
    cdef bint _closed               # close() ran
    cdef Py_ssize_t _bytes_written  # size before compression, once closed
    cdef object _producer_id        # idempotence fields (None for legacy magics)
    cdef object _producer_epoch
    cdef object _base_sequence

    def __init__(self, int magic, int compression_type, Py_ssize_t batch_size, int64_t offset=0,
                 transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1):
        if magic not in (0, 1, 2):
            raise ValueError("Not supported magic")
        if compression_type not in (0, 1, 2, 3, 4):
            raise ValueError("Not valid compression type")
        if magic >= 2:
            self._builder = RecordBatchBuilder(magic, compression_type, False, -1, -1, -1, batch_size)
            self._builder.set_producer_state(producer_id, producer_epoch, base_sequence, transactional)
            self._producer_id = producer_id
            self._producer_epoch = producer_epoch
            self._base_sequence = base_sequence
        else:
            if transactional or producer_id != -1:
                raise ValueError(f"Idempotent messages are not supported for magic {magic}")
            self._builder = LegacyRecordBatchBuilder(magic, compression_type, batch_size)
        self._magic = magic
        self._batch_size = batch_size
        self._next_offset = offset

    def skip(self, int64_t offsets_to_skip):
        self._next_offset += offsets_to_skip

    def append(self, timestamp, key, value, headers=None):
        """Append a record at the next offset; returns its metadata, or None when full or closed."""
        if self._closed:
            return None
        metadata = self._builder.append(self._next_offset, timestamp, key, value,
                                        [] if headers is None else headers)
        if metadata is not None:
            self._next_offset += 1
        return metadata

    def set_producer_state(self, producer_id, producer_epoch, base_sequence, is_transactional):
        if self._magic < 2:
            raise UnsupportedVersionError("Producer State requires Message format v2+")
        if self._closed:
            raise IllegalStateError("Trying to set producer state of an already closed batch")
        self._builder.set_producer_state(producer_id, producer_epoch, base_sequence, is_transactional)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    @property
    def producer_id(self):
        return self._producer_id

    @property
    def producer_epoch(self):
        return self._producer_epoch

    @property
    def base_sequence(self):
        return self._base_sequence

    def records(self):
        if not self._closed:
            raise IllegalStateError("records() before close()")
        return MemoryRecords(self._buffer)

    def close(self):
        """Build the batch (once: retries call it again)."""
        if not self._closed:
            self._bytes_written = self._builder.size()
            self._buffer = self._builder.build()
            self._builder = None
        self._closed = True

    def size_in_bytes(self):
        return len(self._buffer) if self._closed else self._builder.size()

    def compression_rate(self):
        if not self._closed:
            raise IllegalStateError("compression_rate() before close()")
        return self.size_in_bytes() / self._bytes_written

    def is_full(self):
        return self._closed or self._builder.size() >= self._batch_size

    def next_offset(self):
        return self._next_offset

    def buffer(self):
        if not self._closed:
            raise IllegalStateError("buffer() before close()")
        return self._buffer
