# cython: language_level=3
"""Kafka's batches in the producer's accumulator core (fastmq/_native/accumulator.pyx): v2 record batches built by
RecordBatchBuilder, partitions keyed by TopicPartition, results as RecordMetadata, keys placed by murmur2 as the
Java client does, and Kafka's exception classes."""
cimport cython
from libc.stdint cimport int16_t, int32_t, int64_t

from fastmq._native.arena cimport ArenaBlock
from fastmq._native.batch_builder cimport BatchBuilder, BatchFormat
from fastmq._native.buffer cimport WriteBuffer
from fastmq._native.hashing cimport murmur2_nogil
from fastmq.kafka._native.records cimport RecordBatchBuilder, producer_batch_builder, restamp_producer

from fastmq._native import accumulator as _core
from fastmq._native.producer_batch import FutureRecordMetadata, ProducerBatch
from fastmq.kafka._native.records import RecordBatch
from fastmq.kafka.errors import IllegalStateError, KafkaTimeoutError
from fastmq.kafka.structs import RecordMetadata, TopicPartition

__all__ = ["FutureRecordMetadata", "KafkaBatchFormat", "ProducerBatch", "RecordAccumulator"]

cdef object _tuple_new = tuple.__new__


@cython.no_gc      # references its RecordBatchBuilder alone: one per batch, kept out of the cyclic GC's work
@cython.final
cdef class KafkaBatchBuilder(BatchBuilder):
    """One producer batch: a v2 RecordBatchBuilder (magic 2, leader epoch -1 as the Java client writes)."""
    cdef RecordBatchBuilder records     # the batch being encoded

    cdef Py_ssize_t append(self, int32_t index, int64_t timestamp, const char* key, Py_ssize_t key_len,
                           const char* value, Py_ssize_t value_len, object headers, bint force) except -2:
        # The core wants the batch's size after the record (its memory reservation follows it), where
        # append_raw answers the record's own size.
        if self.records.append_raw(index, timestamp, key, key_len, value, value_len, headers, force) < 0:
            return -1
        return self.records._buffer.size()

    cdef Py_ssize_t uncompressed_size(self) except -1:
        return self.records.uncompressed_size

    cdef object finish(self):
        return self.records.finish()

    cdef int release_storage(self) except -1:
        return self.records.release_storage()

    cdef int stamp_producer(self, object payload, int64_t producer_id, int16_t producer_epoch,
                            int32_t base_sequence, bint transactional) except -1:
        if payload is None:
            return self.records.set_producer_fields(producer_id, producer_epoch, base_sequence, transactional)
        # The transactional bit does not change: a producer stays transactional or not for its whole life.
        return restamp_producer(payload, producer_id, producer_epoch, base_sequence)

    cdef int hot_objects(self, const char** out) noexcept:
        # The encoder, its buffer, and where the next record goes.
        cdef WriteBuffer buffer = self.records._buffer
        out[0] = <const char*><void*>self.records
        out[1] = <const char*><void*>buffer
        out[2] = buffer._data + buffer._length
        return 3


@cython.final
cdef class KafkaBatchFormat(BatchFormat):
    """Kafka's answers to the accumulator core's questions (see fastmq/_native/batch_builder.pxd)."""
    cdef readonly int codec                 # compression codec id
    cdef readonly int compression_level     # -1 = codec default

    def __init__(self, int codec=0, int compression_level=-1):
        self.codec = codec
        self.compression_level = compression_level
        self.state_error = IllegalStateError
        self.timeout_error = KafkaTimeoutError

    cdef BatchBuilder new_builder(self, Py_ssize_t batch_size, ArenaBlock storage):
        cdef KafkaBatchBuilder builder = KafkaBatchBuilder.__new__(KafkaBatchBuilder)
        builder.records = producer_batch_builder(self.codec, self.compression_level, batch_size, storage)
        return builder

    cdef object partition_key(self, str topic, int32_t partition):
        return TopicPartition(topic, partition)

    cdef int32_t partition_for_key(self, const char* key, Py_ssize_t key_len, int32_t partitions) except -1:
        return (murmur2_nogil(key, key_len) & 0x7FFFFFFF) % partitions

    cdef object metadata(self, object partition_key, int64_t offset, int64_t timestamp, int32_t key_size,
                         int32_t value_size, int32_t header_size):
        # tuple.__new__ straight from C: calling the namedtuple runs its Python-level __new__, which cost a
        # produce of many records (each future's metadata) more than the rest of settling them.
        return _tuple_new(RecordMetadata, (partition_key[0], partition_key[1], partition_key, offset, timestamp,
                                           None, key_size, value_size, header_size))

    cdef list split_records(self, object payload):
        return [(record.timestamp, record.key, record.value, record.headers) for record in RecordBatch(payload)]


class RecordAccumulator(_core.RecordAccumulator):
    """The accumulator core with Kafka's batches; compression_type/compression_level pick the codec."""

    def __init__(self, *, int compression_type=0, int compression_level=-1, **options):
        super().__init__(KafkaBatchFormat(compression_type, compression_level), **options)
