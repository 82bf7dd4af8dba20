# cython: language_level=3
"""The producer accumulator's per-partition queues and per-topic state (see accumulator.pyx)."""
import collections

cimport cython
from libc.stdint cimport int32_t


@cython.final
cdef class PartitionQueue:
    """The batches of one partition, oldest first; the last one takes records while it is open."""

    def __cinit__(self, topic_partition, TopicQueues topic, int32_t partition):
        self.topic_partition = topic_partition
        self.topic = topic
        self.partition = partition
        self.batches = collections.deque()
        self.scheduled = -1
        self.lingering_on = -1

    def __len__(self):
        return len(self.batches)


@cython.final
cdef class TopicQueues:
    """A topic's partition queues, its leaders (from metadata) and its sticky partition."""

    def __cinit__(self, str name):
        self.name = name
        self.partitions = []
        self.leaders = []
        self.available = []
        self.sticky = -1

    @property
    def partition_count(self):
        return len(self.partitions)

    def leader(self, int32_t partition):
        return self.leaders[partition]
