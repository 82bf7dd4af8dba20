# cython: language_level=3
"""Which of the accumulator's partitions may send now: the due set, the linger/backoff timers and the batches
that linger per leader (see ready_set.pyx)."""
from libc.stdint cimport int32_t, int64_t

from fastmq._native.partition_queues cimport PartitionQueue
from fastmq._native.producer_batch cimport BATCH_IN_FLIGHT, ProducerBatch


cdef inline ProducerBatch first_unsent(PartitionQueue queue):
    # The queue's oldest batch that is not in flight, or None. ready(), the lingering queues a request takes
    # along and drain() each ask this of every batch they send: with none of the queue's batches in flight (only
    # drain() puts one in flight, and counts it) that is the first one, read without making a deque iterator.
    cdef ProducerBatch batch
    if not queue.in_flight:
        return queue.batches[0] if queue.batches else None
    for batch in queue.batches:
        if batch.state != BATCH_IN_FLIGHT:
            return batch
    return None


cdef class ReadySet:
    cdef dict due                           # PartitionQueue -> None: queues that may have a batch to send now
    cdef list timers                        # heap of (deadline, number, PartitionQueue): linger/backoff ends
    cdef dict lingering                     # node -> {PartitionQueue: None}: open batches waiting for linger
    cdef int64_t timers_pushed              # numbers the heap's entries (queues do not compare)
    cdef double linger                      # seconds a batch waits for more records
    cdef int max_in_flight                  # batches of one partition in flight at once
    cdef bint idempotent                    # batches carry sequence numbers

    cdef bint make_due(self, PartitionQueue queue) except -1
    cdef bint schedule(self, PartitionQueue queue, double deadline) except -1
    cdef int linger_on_leader(self, PartitionQueue queue) except -1
    cdef int add_lingering(self, int32_t node, list queues) except -1
    cdef bint sends_alone(self, PartitionQueue queue, ProducerBatch first)
    cdef tuple collect(self, double now, bint urgent)
