# cython: language_level=3
"""A producer's batches and the futures that are views onto them (see producer_batch.pyx)."""
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastmq._native.batch_builder cimport BatchBuilder, BatchFormat

cdef enum BatchState:
    BATCH_OPEN = 0          # taking records
    BATCH_CLOSED = 1        # full, or drained: waits to be sent (or re-sent)
    BATCH_IN_FLIGHT = 2     # in a request awaiting its response
    BATCH_DONE = 3          # acknowledged or failed: futures are resolved
    BATCH_SPLIT = 4         # rejected as too large and re-queued as smaller batches (see `children`)


@cython.final
cdef class ProducerBatch:
    # What an append reads and writes comes first, beside the object's header (its reference count, which each
    # record's future takes): over many partitions the batch is out of the cache at each append, and these fit
    # the header's cache line or the one after, not three.
    cdef BatchBuilder builder               # the records, in the protocol's format
    cdef Py_ssize_t encoded_size            # bytes the builder holds after the last append
    cdef readonly Py_ssize_t reserved       # bytes of buffer memory held until the batch is done
    cdef readonly int32_t record_count      # records appended
    cdef readonly object topic_partition    # the partition key its BatchFormat made: (topic, partition)
    cdef object queue                       # the accumulator's PartitionQueue of that partition
    cdef BatchFormat format                 # makes the records' metadata and the errors
    cdef readonly object payload            # the finished batch bytes, once built
    cdef readonly double created            # monotonic seconds of the first append
    cdef readonly double retry_after        # monotonic seconds before which a retry must not go out
    cdef readonly int attempts              # requests that carried the batch
    cdef readonly int state                 # a BatchState
    cdef readonly int32_t base_sequence     # idempotence: the sequence of the first record, or -1
    cdef int64_t base_offset                # result: offset of the first record (-1 when unknown)
    cdef int64_t log_append_time            # result: the server's timestamp, or -1 for create time
    cdef readonly object error              # result: the exception when the batch failed
    cdef object done_event                  # threading.Event, made by the first thread that waits
    cdef list callbacks                     # (FutureRecordMetadata, function, on_success, on_error)
    cdef list children                      # after a split: (first index, ProducerBatch) pairs

    cdef Py_ssize_t append(self, int64_t timestamp, const char* key, Py_ssize_t key_len, const char* value,
                           Py_ssize_t value_len, object headers, bint force) except -2
    cdef int finish(self) except -1
    cdef int release_storage(self) except -1
    cdef int resolve(self) except -1


@cython.final
cdef class FutureRecordMetadata:
    cdef ProducerBatch batch                # the batch the record is in (follows splits)
    cdef int32_t index                      # the record's position in that batch
    cdef int64_t timestamp                  # the record's create time
    cdef int32_t key_size                   # serialized key bytes, -1 for null
    cdef int32_t value_size                 # serialized value bytes, -1 for null
    cdef int32_t header_size                # serialized header bytes, -1 for none
    cdef object _metadata                   # the format's metadata object, made on first use

    cdef ProducerBatch _settled_batch(self)
