# cython: language_level=3
"""The producer's record accumulator (see accumulator.pyx)."""
from libc.stdint cimport int16_t, int32_t, int64_t

from fastmq.kafka._native.records cimport RecordBatchBuilder

cdef enum BatchState:
    BATCH_OPEN = 0          # taking records
    BATCH_CLOSED = 1        # full, or drained: waits to be sent (or re-sent)
    BATCH_IN_FLIGHT = 2     # in a produce request awaiting its response
    BATCH_DONE = 3          # acknowledged or failed: futures are resolved
    BATCH_SPLIT = 4         # rejected as too large and re-queued as smaller batches (see `children`)


cdef class ProducerBatch:
    cdef readonly object topic_partition    # TopicPartition of the batch
    cdef RecordBatchBuilder builder         # the records; build() leaves its counters readable
    cdef readonly object payload            # the finished batch bytes, once built
    cdef readonly Py_ssize_t reserved       # bytes of buffer memory held until the batch is done
    cdef readonly double created            # monotonic seconds of the first append
    cdef readonly double retry_after        # monotonic seconds before which a retry must not go out
    cdef readonly int attempts              # produce requests that carried the batch
    cdef readonly int state                 # a BatchState
    cdef readonly int32_t base_sequence     # idempotence: the sequence of the first record, or -1
    cdef int64_t base_offset                # result: offset of the first record (-1 when unknown)
    cdef int64_t log_append_time            # result: the broker's timestamp, or -1 for create time
    cdef readonly object error              # result: the exception when the batch failed
    cdef object done_event                  # threading.Event, made by the first thread that waits
    cdef list callbacks                     # (FutureRecordMetadata, function, on_success, on_error)
    cdef list children                      # after a split: (first index, ProducerBatch) pairs

    cdef int finish(self) except -1
    cdef bytearray take_storage(self)
    cdef int resolve(self) except -1


cdef class FutureRecordMetadata:
    cdef ProducerBatch batch                # the batch the record is in (follows splits)
    cdef int32_t index                      # the record's position in that batch
    cdef int64_t timestamp                  # the record's create time
    cdef int32_t key_size                   # serialized key bytes, -1 for null
    cdef int32_t value_size                 # serialized value bytes, -1 for null
    cdef int32_t header_size                # serialized header bytes, -1 for none
    cdef object _metadata                   # RecordMetadata, made on first use

    cdef ProducerBatch _settled_batch(self)


cdef class PartitionQueue:
    cdef readonly object topic_partition    # TopicPartition
    cdef readonly object batches            # collections.deque of ProducerBatch, oldest first
    cdef ProducerBatch open_batch           # the last batch while it takes records, else None
    cdef readonly int32_t next_sequence     # idempotence: sequence of the next drained record
    cdef readonly int in_flight             # batches of this partition in flight


cdef class TopicQueues:
    cdef readonly str name                  # topic
    cdef list partitions                    # PartitionQueue by partition id
    cdef list leaders                       # leader node id by partition id (-1: none known)
    cdef list available                     # partition ids with a leader that is not avoided
    cdef int32_t sticky                     # partition for records without key or partition (-1: pick)
