# cython: language_level=3
"""The producer's record accumulator (see accumulator.pyx), declared for the protocol packages' compiled faces
that hand a record to it without a Python call (fastmq/kafka/_native/compat_send.pyx: _send_record)."""
from libc.stdint cimport int16_t, int32_t, int64_t

from fastmq._native.batch_builder cimport BatchBuilder, BatchFormat
from fastmq._native.buffer_memory cimport BufferMemory
from fastmq._native.partition_queues cimport PartitionQueue, TopicQueues
from fastmq._native.producer_batch cimport FutureRecordMetadata, ProducerBatch
from fastmq._native.ready_set cimport ReadySet


cdef Py_ssize_t headers_bytes(object headers) except -2

cdef inline Py_ssize_t headers_size(object headers) except -2:
    # Name and value bytes of a record's headers (kafka-python's serialized_header_size, a record's metadata's
    # header size), -1 without headers. Inline: most records have none, and a call to learn that cost a record as
    # much as encoding its headers' count.
    if headers is None:
        return -1
    return headers_bytes(headers)


cdef class RecordAccumulator:
    cdef BatchFormat format                 # the protocol's batches: builders, partition keys, metadata
    cdef dict topics                        # name -> TopicQueues
    cdef readonly Py_ssize_t batch_size     # bytes at which a batch closes
    cdef readonly double linger             # seconds a batch waits for more records
    cdef BufferMemory memory                # reservations within buffer_memory, the arena of the storage
    cdef double max_block                   # seconds send() waits for memory
    cdef double delivery_timeout            # seconds from first append to failure
    cdef double retry_backoff               # seconds between attempts of a batch
    cdef readonly bint idempotent           # assign sequence numbers
    cdef int max_in_flight                  # batches of one partition in flight at once
    cdef int64_t producer_id                # idempotence: producer id, -1 until known
    cdef int16_t producer_epoch             # idempotence: producer epoch
    cdef object lock                        # guards batch creation, closing, draining, memory
    cdef int flushes                        # flush() calls in progress
    cdef int appends_in_progress            # send() calls between entry and return
    cdef bint closing                       # no new records; everything left is sent
    cdef object aborted_error               # set by abort(): sends fail with it
    cdef readonly object incomplete         # set of batches not yet done
    cdef object wakeup                      # called (no arguments) when the sender should look again
    cdef object batch_full                  # called (no arguments) when a send filled a batch; None: wakeup
    cdef readonly bint transactional        # batches carry the transactional bit
    cdef object transaction_error           # the first batch failure since clear_transaction_failure()
    cdef readonly int64_t records_appended  # metrics
    cdef readonly int64_t bytes_appended    # metrics: uncompressed record bytes
    cdef Py_ssize_t reserve_step            # bytes a batch's reservation grows by
    cdef ReadySet ready_set                 # the partitions that may send now, timers of those that wait
    cdef double next_expiry                 # monotonic seconds before which no unsent batch can expire
    cdef public object unknown_topic        # send_record()'s call for a topic whose partitions are not known
    cdef void* last_queue                   # the PartitionQueue the last append went to (only compared)
    cdef str last_topic_name                # the name the last send() was given (its own object) ...
    cdef TopicQueues last_topic             # ... and its TopicQueues

    cdef object _send_record(self, str topic, object value, object key, object headers, object partition,
                             object timestamp_ms)
    cdef TopicQueues _topic_of(self, str name)
    cdef object _send(self, str topic_name, object partition, object key, object value, object headers,
                      object timestamp_ms)
    cdef int32_t _sticky_partition(self, TopicQueues topic) except -1
    cdef FutureRecordMetadata _append(self, TopicQueues topic, int32_t partition, int64_t timestamp,
                                      const char* key, Py_ssize_t key_len, const char* value,
                                      Py_ssize_t value_len, object headers, Py_ssize_t header_bytes)
    cdef ProducerBatch _append_record(self, TopicQueues topic, int32_t partition, int64_t timestamp,
                                      const char* key, Py_ssize_t key_len, const char* value,
                                      Py_ssize_t value_len, object headers, Py_ssize_t header_bytes)
    cdef int _append_many(self, TopicQueues topic, object partition, object values, object keys, object headers,
                          object timestamp_ms, list batches, int32_t* place) except -1
    cdef ProducerBatch _append_slow(self, TopicQueues topic, PartitionQueue queue, int64_t timestamp,
                                    const char* key, Py_ssize_t key_len, const char* value,
                                    Py_ssize_t value_len, object headers, Py_ssize_t bound)
    cdef Py_ssize_t _append_within(self, ProducerBatch batch, int64_t timestamp, const char* key,
                                   Py_ssize_t key_len, const char* value, Py_ssize_t value_len,
                                   object headers) except -2
    cdef int _cover(self, ProducerBatch batch) except -1
    cdef ProducerBatch _open_batch(self, PartitionQueue queue, Py_ssize_t need)
    cdef ProducerBatch _new_batch(self, PartitionQueue queue, BatchBuilder builder, double created)
    cdef bint _close_open_batch(self, PartitionQueue queue) except -1
    cdef int _make_all_due(self) except -1
    cdef int _reserve(self, Py_ssize_t need) except -1
    cdef _finish(self, ProducerBatch batch, error)
    cdef _abort_batches(self, error, bint in_flight)

    cdef inline bint _any_in_flight(self):
        return self.memory.in_flight > 0

    cdef inline int _expires_at(self, double created) except -1:
        if created + self.delivery_timeout < self.next_expiry:
            self.next_expiry = created + self.delivery_timeout
        return 0

    cdef inline PartitionQueue _queue_of(self, ProducerBatch batch):
        return <PartitionQueue>batch.queue
