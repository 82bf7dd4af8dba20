# cython: language_level=3
"""The producer accumulator's per-partition queues and per-topic state (see accumulator.pyx)."""
import collections

cimport cython
from libc.stdint cimport int32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memset


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

    def __dealloc__(self):
        free(self.hot)

    cdef int make_hot_room(self, Py_ssize_t partitions) except -1:
        # Room in `hot` for `partitions` partitions, new ones empty (NULL: nothing to prefetch).
        cdef const char** grown
        if partitions <= self.hot_partitions:
            return 0
        grown = <const char**>realloc(self.hot, partitions * HOT_SLOTS * sizeof(char*))
        if grown == NULL:
            raise MemoryError()
        memset(grown + self.hot_partitions * HOT_SLOTS, 0,
               (partitions - self.hot_partitions) * HOT_SLOTS * sizeof(char*))
        self.hot = grown
        self.hot_partitions = partitions
        return 0

    @property
    def partition_count(self):
        return len(self.partitions)

    def leader(self, int32_t partition):
        return self.leaders[partition]
