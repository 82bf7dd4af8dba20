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
- uncompressed_size() is the batch's bytes before compression (the core keeps the size append() returned).
- finish() ends the batch (compression, checksums; it may release the GIL) and returns the payload: a
  bytes-like object the sender puts on the wire. It is called once, outside the accumulator's lock.
- take_storage() once the batch is done: the bytearray its records were encoded into, for the next batch's
  builder, when that is not the payload itself (compression made a new one); None when it is (the core then
  reuses the payload if it is a bytearray). The builder lets go of its memory.
- grow_into(storage, capacity): the core is about to let an open batch take more records: make its encoding memory
  `capacity` bytes at once, moving what is written into `storage` (a finished batch's, from the pool) when given,
  else into one new allocation (nothing when it has that much already). Growing in doubling steps instead would
  copy the records and fault in fresh pages several times over.
- stamp_producer(payload, producer_id, producer_epoch, base_sequence, transactional): idempotence. Called under
  the lock when the batch is drained for a producer id: before finish() (payload None) it sets the fields the
  batch will be finished with, after it (a batch built under an id that was reset since) it rewrites them in the
  payload in place. Protocols without producer ids leave it as it is (it does nothing).

BatchFormat: what one producer's batches look like; one instance per accumulator.
- new_builder(batch_size, capacity, storage) makes an empty builder that refuses appends beyond batch_size
  bytes, with `capacity` bytes of encoding memory: `storage` (a bytearray of a finished batch, or None) is memory
  to reuse.
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


cdef class BatchBuilder:
    cdef Py_ssize_t append(self, int32_t index, int64_t timestamp, const char* key, Py_ssize_t key_len,
                           const char* value, Py_ssize_t value_len, object headers, bint force) except -2
    cdef Py_ssize_t uncompressed_size(self) except -1
    cdef object finish(self)
    cdef bytearray take_storage(self)
    cdef int grow_into(self, bytearray storage, Py_ssize_t capacity) except -1
    cdef int stamp_producer(self, object payload, int64_t producer_id, int16_t producer_epoch,
                            int32_t base_sequence, bint transactional) except -1


cdef class BatchFormat:
    cdef readonly object state_error            # exception class: e.g. a send after close() or abort()
    cdef readonly object timeout_error          # exception class: no memory within max_block, get() timeout

    cdef BatchBuilder new_builder(self, Py_ssize_t batch_size, Py_ssize_t capacity, bytearray storage)
    cdef object partition_key(self, str topic, int32_t partition)
    cdef int32_t partition_for_key(self, const char* key, Py_ssize_t key_len, int32_t partitions) except -1
    cdef object metadata(self, object partition_key, int64_t offset, int64_t timestamp, int32_t key_size,
                         int32_t value_size, int32_t header_size)
    cdef list split_records(self, object payload)
