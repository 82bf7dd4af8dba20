# cython: language_level=3
"""The producer accumulator's per-partition queues and per-topic state (see accumulator.pyx)."""
from libc.stdint cimport int32_t

cdef enum:
    # Addresses kept per partition for the append path to prefetch (accumulator.pyx): the queue, its open batch,
    # the batch's builder and the builder's HOT_BUILDER_OBJECTS (batch_builder.pxd).
    HOT_SLOTS = 6

from fastmq._native.producer_batch cimport ProducerBatch

cdef class TopicQueues


cdef class PartitionQueue:
    cdef ProducerBatch open_batch           # the last batch while it takes records, else None (first: an append
                                            # reads it beside the object's header, in one cache line)
    cdef readonly object topic_partition    # the partition key its BatchFormat made: (topic, partition)
    cdef TopicQueues topic                  # its topic (for its leader)
    cdef readonly int32_t partition         # partition id
    cdef bint due                           # in the accumulator's due set
    cdef double scheduled                   # deadline of its entry in the timer heap, or -1: none
    cdef int32_t lingering_on               # node whose lingering set holds it, or -1: none
    cdef readonly object batches            # collections.deque of ProducerBatch, oldest first
    cdef bint busy                          # its last batch closed full: the next one takes batch_size at once
    cdef readonly int32_t next_sequence     # idempotence: sequence of the next drained record
    cdef readonly int in_flight             # batches of this partition in flight
    cdef readonly bint acknowledged         # idempotence: a batch was acknowledged under this producer id


cdef class TopicQueues:
    cdef readonly str name                  # topic
    cdef list partitions                    # PartitionQueue by partition id
    cdef list leaders                       # leader node id by partition id (-1: none known)
    cdef list available                     # partition ids with a leader that is not avoided
    cdef int32_t sticky                     # partition for records without key or partition (-1: pick)
    cdef const char** hot                   # HOT_SLOTS addresses a partition's next append reads, by partition id
    cdef Py_ssize_t hot_partitions          # partitions `hot` has room for

    cdef int make_hot_room(self, Py_ssize_t partitions) except -1
