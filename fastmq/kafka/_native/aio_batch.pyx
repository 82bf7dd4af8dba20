# cython: language_level=3
"""aiokafka's BatchBuilder, for AIOKafkaProducer.create_batch() and send_batch(): records collected for one
partition, up to a size.

Why compiled: a batch is filled by one append() call per record from the user's loop, and aiokafka's append
encodes the record in C. Written in Python (a tuple and a metadata namedtuple per record, sizes summed in Python),
append() alone cost more than aiokafka's append plus its send. Here it keeps references to the serialized values
in a list (and the keys in another once a record has one) and answers a BatchRecordMetadata (aiokafka's append
answers a metadata object too; ours holds no container, so the garbage collector does not track it);
send_batch() hands the lists to the accumulator in one call (RecordAccumulator.send_placed) and then waits for the
batches that took them, not for each record. Records with headers or their own timestamps go the per-record way
(rows()).
"""
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastmq._native.producer_batch cimport FutureRecordMetadata, ProducerBatch
from fastmq.kafka._native.records cimport BATCH_HEADER_SIZE, RECORD_OVERHEAD_MAX

# Estimated encoded sizes, as aiokafka's: a v2 batch header (BATCH_HEADER_SIZE), a record's fixed part at its widest
# (RECORD_OVERHEAD_MAX), a header's beyond its name and value.
cdef Py_ssize_t HEADER_OVERHEAD = 10


@cython.final
@cython.freelist(64)
@cython.no_gc
cdef class BatchRecordMetadata:
    """What BatchBuilder.append() answers, as aiokafka's append does: the record's place in the batch (offset),
    its estimated encoded size and its timestamp (None: the send's time); crc is None (a v2 batch has one CRC)."""

    cdef readonly Py_ssize_t offset
    cdef readonly Py_ssize_t size
    cdef readonly object timestamp

    @property
    def crc(self):
        return None

    def __repr__(self):
        return f"BatchRecordMetadata(offset={self.offset}, size={self.size}, timestamp={self.timestamp}, crc=None)"


@cython.final
cdef class BatchBuilder:
    """aiokafka's BatchBuilder (see the module docstring): append() until it answers None, then send_batch()."""

    cdef Py_ssize_t max_size
    cdef Py_ssize_t estimated_size
    cdef bint closed
    cdef object key_serializer
    cdef object value_serializer
    cdef Py_ssize_t count
    cdef int32_t first_key_size         # the first record's, for first_metadata() (-1: null)
    cdef int32_t first_value_size
    cdef list keys                      # None until a record has a key; then one entry a record (None: null)
    cdef list values                    # serialized, one a record (None: a null value); None once taken
    cdef readonly list headers          # None until a record has headers; then one entry a record
    cdef readonly list timestamps       # None until a record has a timestamp; then one entry a record

    def __init__(self, Py_ssize_t max_size, key_serializer=None, value_serializer=None):
        self.max_size = max_size
        self.estimated_size = BATCH_HEADER_SIZE
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.values = []

    def append(self, *, timestamp, key, value, headers=None):
        """Add a record; None when it does not fit any more (a batch always takes its first record) or the batch
        was sent (closed), as aiokafka's append answers."""
        cdef Py_ssize_t size = RECORD_OVERHEAD_MAX
        cdef Py_ssize_t count = self.count
        cdef BatchRecordMetadata metadata
        if self.closed:
            return None
        if self.key_serializer is not None:
            key = self.key_serializer(key)
        if self.value_serializer is not None:
            value = self.value_serializer(value)
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        if headers:
            headers = list(headers)
            for name, data in headers:
                size += len(name) + (len(data) if data is not None else 0) + HEADER_OVERHEAD
        if count and self.estimated_size + size > self.max_size:
            return None
        self.estimated_size += size
        if count == 0:
            self.first_key_size = len(key) if key is not None else -1
            self.first_value_size = len(value) if value is not None else -1
        if key is not None or self.keys is not None:
            if self.keys is None:
                self.keys = [None] * count
            self.keys.append(key)
        self.values.append(value)
        self.count = count + 1
        if headers or self.headers is not None:
            if self.headers is None:
                self.headers = [None] * count
            self.headers.append(headers or None)
        if timestamp is not None or self.timestamps is not None:
            if self.timestamps is None:
                self.timestamps = [None] * count
            self.timestamps.append(timestamp)
        metadata = BatchRecordMetadata.__new__(BatchRecordMetadata)
        metadata.offset = count
        metadata.size = size
        metadata.timestamp = timestamp
        return metadata

    def close(self):
        """No more records (send_batch() closes the batch)."""
        self.closed = True

    def size(self):
        """The batch's estimated encoded size in bytes."""
        return self.estimated_size

    def record_count(self):
        return self.count

    def rows(self):
        """The records as (key, value, headers, timestamp) tuples, for the per-record way."""
        nulls = [None] * self.count
        return list(zip(self.keys or nulls, self._untaken(), self.headers or nulls, self.timestamps or nulls))

    def take(self):
        """(values, keys) of the records (keys None: every key null), handed over once for
        RecordAccumulator.send_placed(): the batch keeps neither list, so both are freed once the accumulator has
        copied the records rather than when the broker acknowledges them. Held until then, the lists of every batch
        in flight (thousands of entries each) were walked by each garbage collection (6% of perf's samples), and
        1M records of 100 B to the embedded broker cost 283-305 ns of CPU a record, against 198-209 since."""
        values, keys = self._untaken(), self.keys
        self.values = self.keys = None
        self.closed = True
        return values, keys

    cdef list _untaken(self):
        if self.values is None:
            raise RuntimeError("the batch's records were already taken")
        return self.values

    def first_metadata(self, list batches, const unsigned char[::1] places, int64_t timestamp_ms):
        """The first record's RecordMetadata once every batch holding the records is done (send_batch()'s answer),
        from RecordAccumulator.send_placed()'s batches and places, for records appended with timestamp_ms and no
        headers; raises the first failed batch's error."""
        cdef ProducerBatch batch
        cdef FutureRecordMetadata first = FutureRecordMetadata.__new__(FutureRecordMetadata)
        cdef const int32_t* place = <const int32_t*>&places[0]
        for batch in batches:
            for leaf in batch.leaves():
                if (<ProducerBatch>leaf).error is not None:
                    raise (<ProducerBatch>leaf).error
        first.batch = <ProducerBatch?>batches[place[0]]
        first.index = place[1]
        first.timestamp = timestamp_ms
        first.key_size = self.first_key_size
        first.value_size = self.first_value_size
        first.header_size = -1
        return first.value
