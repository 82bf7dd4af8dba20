# cython: language_level=3
"""aiokafka's BatchBuilder, for AIOKafkaProducer.create_batch() and send_batch(): one partition's records, encoded
as they are appended into a batch of the producer's format (RecordAccumulator.open_builder()), which send_batch()
queues whole (RecordAccumulator.send_built()).

Why compiled, and why encoded at once: a batch is filled by one append() call per record from the user's loop,
and aiokafka's append encodes the record in C. Kept in lists until send_batch() and encoded there by the
accumulator's per-record path (send_placed), a record cost a list entry, a reference held and dropped, and the
accumulator's bookkeeping (partition, memory, batch switches) for a batch whose partition and size were known all
along; encoded here, the records are written once and the accumulator takes the batch in one step.

A record without a timestamp of its own takes the time of the batch's first such append (one clock read a batch:
a batch fills in microseconds, and aiokafka reads the clock per record for the same value). append() answers a
DefaultRecordMetadata as aiokafka's does (records.pyx's RecordMetadata): the record's offset in the batch, its
encoded size, its timestamp.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastmq._native.accumulator cimport headers_size
from fastmq._native.batch_builder cimport BatchBuilder as FormatBuilder
from fastmq._native.buffer cimport BorrowedRecord, borrow_record, release_record
from fastmq._native.clock cimport now_ms
from fastmq._native.producer_batch cimport FutureRecordMetadata, ProducerBatch
from fastmq.kafka._native.records cimport BATCH_HEADER_SIZE, RecordMetadata


@cython.final
cdef class BatchBuilder:
    """aiokafka's BatchBuilder (see the module docstring): append() until it answers None, then send_batch()."""

    cdef FormatBuilder builder          # the records, encoded; None once handed over
    cdef Py_ssize_t encoded_size        # the batch's bytes so far (its header included)
    cdef Py_ssize_t data_bytes          # of which keys and values
    cdef int32_t count
    cdef bint closed
    cdef int64_t default_timestamp      # for records without one (-1: no such record yet)
    cdef object key_serializer
    cdef object value_serializer
    cdef int32_t first_key_size         # the first record's, for first_metadata() (-1: null)
    cdef int32_t first_value_size
    cdef int32_t first_header_size
    cdef int64_t first_timestamp

    def __init__(self, FormatBuilder builder not None, key_serializer=None, value_serializer=None):
        self.builder = builder
        self.encoded_size = BATCH_HEADER_SIZE
        self.default_timestamp = -1
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer

    def append(self, *, timestamp, key, value, headers=None):
        """Add a record; None when it does not fit any more (a batch always takes its first record) or the batch
        was sent (closed), as aiokafka's append answers."""
        cdef BorrowedRecord record
        cdef Py_ssize_t size
        cdef int64_t stamp
        cdef RecordMetadata metadata
        if self.closed:
            return None
        if self.key_serializer is not None:
            key = self.key_serializer(key)
        if self.value_serializer is not None:
            value = self.value_serializer(value)
        if timestamp is not None:
            stamp = timestamp
        else:
            if self.default_timestamp < 0:
                self.default_timestamp = now_ms()
            stamp = self.default_timestamp
        if headers is not None:
            headers = list(headers) or None
        borrow_record(key, value, &record)
        try:
            size = self.builder.append(self.count, stamp, record.key, record.key_len, record.value, record.value_len,
                                       headers, self.count == 0)
        finally:
            release_record(&record)
        if size < 0:
            return None
        if self.count == 0:
            self.first_key_size = <int32_t>record.key_len
            self.first_value_size = <int32_t>record.value_len
            self.first_header_size = <int32_t>headers_size(headers)
            self.first_timestamp = stamp
        metadata = RecordMetadata.__new__(RecordMetadata)
        metadata.offset = self.count
        metadata.size = size - self.encoded_size
        metadata.timestamp = stamp
        self.encoded_size = size
        self.data_bytes += max(record.key_len, 0) + max(record.value_len, 0)
        self.count += 1
        return metadata

    def close(self):
        """No more records (send_batch() closes the batch)."""
        self.closed = True

    def size(self):
        """The batch's encoded size in bytes."""
        return self.encoded_size

    def record_count(self):
        return self.count

    def take(self):
        """(builder, record count, size, key and value bytes) for RecordAccumulator.send_built(), handed over once;
        the batch is closed."""
        builder = self.builder
        if builder is None:
            raise RuntimeError("the batch's records were already taken")
        self.builder = None
        self.closed = True
        return builder, self.count, self.encoded_size, self.data_bytes

    def first_metadata(self, ProducerBatch sent not None):
        """The first record's RecordMetadata once `sent` (send_built()'s batch of these records) is done: the
        batch's base offset; raises its error (of the first failed part, were it split)."""
        cdef FutureRecordMetadata first = FutureRecordMetadata.__new__(FutureRecordMetadata)
        for leaf in sent.leaves():
            if (<ProducerBatch>leaf).error is not None:
                raise (<ProducerBatch>leaf).error
        first.batch = sent
        first.index = 0
        first.timestamp = self.first_timestamp
        first.key_size = self.first_key_size
        first.value_size = self.first_value_size
        first.header_size = self.first_header_size
        return first.value
