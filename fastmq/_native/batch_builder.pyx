# cython: language_level=3
"""The base classes of the accumulator's builder seam (see batch_builder.pxd for the contract): a protocol
overrides every method but stamp_producer, which does nothing for protocols without producer ids, and
hot_objects, which names none."""
from libc.stdint cimport int16_t, int32_t, int64_t

from fastmq._native.arena cimport ArenaBlock

from fastmq.errors import IllegalStateError, OperationTimeoutError


cdef class BatchBuilder:
    """One batch being encoded in a protocol's format (abstract)."""

    cdef Py_ssize_t append(self, int32_t index, int64_t timestamp, const char* key, Py_ssize_t key_len,
                           const char* value, Py_ssize_t value_len, object headers, bint force) except -2:
        raise NotImplementedError

    cdef Py_ssize_t uncompressed_size(self) except -1:
        raise NotImplementedError

    cdef object finish(self):
        raise NotImplementedError

    cdef int release_storage(self) except -1:
        raise NotImplementedError

    cdef int stamp_producer(self, object payload, int64_t producer_id, int16_t producer_epoch,
                            int32_t base_sequence, bint transactional) except -1:
        return 0

    cdef int hot_objects(self, const char** out) noexcept:
        return 0


cdef class BatchFormat:
    """A protocol's batches: builders, partition keys, result metadata, errors (abstract)."""

    def __cinit__(self):
        self.state_error = IllegalStateError
        self.timeout_error = OperationTimeoutError

    cdef BatchBuilder new_builder(self, Py_ssize_t batch_size, ArenaBlock storage):
        raise NotImplementedError

    cdef object partition_key(self, str topic, int32_t partition):
        return (topic, partition)

    cdef int32_t partition_for_key(self, const char* key, Py_ssize_t key_len, int32_t partitions) except -1:
        raise NotImplementedError

    cdef object metadata(self, object partition_key, int64_t offset, int64_t timestamp, int32_t key_size,
                         int32_t value_size, int32_t header_size):
        raise NotImplementedError

    cdef list split_records(self, object payload):
        raise NotImplementedError
