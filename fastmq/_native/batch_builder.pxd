# cython: language_level=3
"""The seam between the producer's batching core (accumulator.pyx) and a protocol's batch format.

The core knows batches only as opaque builders it appends raw records to; a protocol plugs in by subclassing
the two cdef classes below in its own _native package (Kafka: fastmq/kafka/_native/accumulator.pyx) and handing
a BatchFormat to RecordAccumulator. Every method is a cdef method, so the per-record path (core -> builder ->
encoder) stays compiled end to end. The contract:

BatchBuilder: one batch being encoded, owned by one ProducerBatch.
- append(index, ...) encodes record `index` (0, 1, 2, ... in the order of calls) and returns the builder's size
  in bytes after it, or -1, changing nothing, when the record does not fit within the batch_size the builder was
  made with. With `force` the record is taken whatever its size (the first record of a batch, re-appends of a
  split). It must call no Python code that could let another thread in: user threads append without a lock.
- The core reserves buffer memory for a record before appending it, by a bound of its key and value bytes plus
  64 bytes, plus 10 bytes and the name and value of each header; a format whose framing needs more per record
  (or per batch, beyond 64 bytes) still works, and the excess is charged after the append.
- A builder may also be filled outside the core (RecordAccumulator.open_builder(), then send_built()): by one
  thread, with the same calls, before the core takes it.
- uncompressed_size() is the batch's bytes before compression (the core keeps the size append() returned).
- finish() ends the batch (compression, checksums; it may release the GIL) and returns the payload: a
  bytes-like object the sender puts on the wire. It is called once, outside the accumulator's lock.
- Memory: the records are encoded into the ArenaBlock new_builder() was given (arena.pyx), grown (moved to a larger
  block) as they need; the payload should be that block when the batch is not compressed (WriteBuffer's
  detach_written()), so that the bytes go out without a copy and the block returns to the core's arena when the
  payload dies; the core then gives the arena back the block's pages past the payload's bytes (ArenaBlock.trim).
  A builder keeps no other memory that lives as long as the batch.
- release_storage() once the batch is done (or at finish(), for memory the payload does not use): the builder
  lets go of the memory its records were encoded into; the block returns to the arena when nothing else (a
  queued write) refers to it any more.
- stamp_producer(payload, producer_id, producer_epoch, base_sequence, transactional): idempotence. Called under
  the lock when the batch is drained for a producer id: before finish() (payload None) it sets the fields the
  batch will be finished with, after it (a batch built under an id that was reset since) it rewrites them in the
  payload in place. Protocols without producer ids leave it as it is (it does nothing).
- hot_objects(out) writes up to HOT_BUILDER_OBJECTS addresses that its next append touches beyond the builder
  itself (Kafka: the encoder, its buffer, and last, as the third, where the next record goes) and returns how
  many; the core prefetches them with its own when an append switches partition (accumulator.pyx), and the lines
  after a third one at once. Only addresses: nothing is read through them, so a stale one costs a wasted
  prefetch. The base returns 0.

BatchFormat: what one producer's batches look like; one instance per accumulator.
- new_builder(batch_size, storage) makes an empty builder that refuses appends beyond batch_size bytes and
  encodes into `storage`, an ArenaBlock the core took from its arena for the batch (its capacity is where the
  builder starts; it grows the block as records need).
- partition_key(topic, partition) makes the key of a partition: a tuple, or a tuple subclass such as Kafka's
  TopicPartition, whose items 0 and 1 are the topic name and the partition id. Batches and futures expose it as
  `topic_partition`.
- partition_for_key(key, key_len, partitions) is the partition of a keyed record without an explicit one.
- metadata(partition_key, offset, timestamp, key_size, value_size, header_size) makes the result of an
  acknowledged record (Kafka: RecordMetadata); sizes are -1 for null.
- split_records(payload) decodes a finished batch into [(timestamp, key, value, headers)] with bytes-or-None key
  and value, so that a batch the server refused as too large can be re-encoded as smaller ones.
- state_error and timeout_error are the exception classes raised for what the accumulator's state forbids (a
  send after close or abort) and for a send() or future.get() that ran out of time; they subclass fastmq.errors.IllegalStateError and
  fastmq.errors.OperationTimeoutError, so that protocol users can catch their own protocol's classes.
"""
from libc.stdint cimport int16_t, int32_t, int64_t

from fastmq._native.arena cimport ArenaBlock

cdef enum:
    HOT_BUILDER_OBJECTS = 3     # addresses hot_objects() may write


cdef class BatchBuilder:
    cdef Py_ssize_t append(self, int32_t index, int64_t timestamp, const char* key, Py_ssize_t key_len,
                           const char* value, Py_ssize_t value_len, object headers, bint force) except -2
    cdef Py_ssize_t uncompressed_size(self) except -1
    cdef object finish(self)
    cdef int release_storage(self) except -1
    cdef int stamp_producer(self, object payload, int64_t producer_id, int16_t producer_epoch,
                            int32_t base_sequence, bint transactional) except -1
    cdef int hot_objects(self, const char** out) noexcept


cdef class BatchFormat:
    cdef readonly object state_error            # exception class: e.g. a send after close() or abort()
    cdef readonly object timeout_error          # exception class: no memory within max_block, get() timeout

    cdef BatchBuilder new_builder(self, Py_ssize_t batch_size, ArenaBlock storage)
    cdef object partition_key(self, str topic, int32_t partition)
    cdef int32_t partition_for_key(self, const char* key, Py_ssize_t key_len, int32_t partitions) except -1
    cdef object metadata(self, object partition_key, int64_t offset, int64_t timestamp, int32_t key_size,
                         int32_t value_size, int32_t header_size)
    cdef list split_records(self, object payload)
