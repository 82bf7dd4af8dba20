# cython: language_level=3
"""The producer's record accumulator: per-partition deques of batches that send() encodes records into.

The core knows no protocol: a BatchFormat (batch_builder.pxd) says how records are encoded, what a partition's
key and a record's metadata look like and which partition a key goes to; fastmq.kafka._native.accumulator plugs
in Kafka's record batches.

User threads call send() (or send_record(), the same with a producer's signature, which a producer that does
nothing to records takes as its own send()): it picks the partition (explicit, the format's choice for a key, or
the topic's sticky partition for records without a key), encodes the record straight into the open batch of that
partition and returns a FutureRecordMetadata: a view onto (batch, index), so completing a batch completes all of
its futures at once. The sender, on the I/O thread, asks ready() which leaders have something to send, drain()s batches for
them, and reports back with complete() / fail() / retry() / split().

Threads: appends to an open batch run under the GIL alone (a BatchBuilder's append calls no Python code, so
nothing can interleave with it); creating, closing and draining batches, which happen once per
batch, take the accumulator's lock. A thread that finds buffer memory exhausted waits, without the GIL, for
the sender to free some, up to max_block.

A caller that fills a whole batch for one partition itself (aiokafka's create_batch/send_batch) encodes it through
open_builder()'s builder and queues it with send_built(): one step for the batch, nothing per record.

A send that fills a batch calls batch_full() (else wakeup()) outside the lock: the Kafka producer gives the I/O
loop its turn there (IOLoop.give_turn), so that the full batch leaves and the answers that free in-flight slots are
read while this thread would otherwise keep the GIL.

A node is ready when one of its partitions has a batch that is full, whose linger elapsed, whose retry
backoff elapsed, or while memory is exhausted, a flush is in progress or the accumulator is closing: the ready
set (ready_set.pyx) keeps the partitions that may send, so that ready() and drain() cost what is ready, not what
exists. Memory (buffer_memory.pyx): a batch reserves buffer memory for what it holds, growing its reservation in
RESERVE_STEP steps as records arrive (up to batch_size); a send that finds the memory exhausted makes every
partition due and wakes the sender before it waits, so the memory is freed by sending the batches that hold it. The
bytes are blocks of the memory's arena (arena.pyx), reused as batches finish: a batch starts in a block that holds
its first record (a busy partition's in one of batch_size) and moves to one twice as large as it outgrows it.

Over many partitions, an append finds its partition's objects (queue, batch, builder, the builder's encoder and
buffer) out of the cache, each reached through the one before: one cache miss after another; and the next line of
its buffer was never in the cache at all, as the hardware prefetcher follows a few write streams, not thousands.
Each TopicQueues keeps those addresses per partition (TopicQueues.hot, refreshed after an append that switched
partition), so that an append that switches partition first asks for them all at once and the misses overlap, and
asks for the lines after the record it wrote for the partition's next append; an append to the partition of the
last append, where everything is in the cache, skips both.
"""
import functools
import random
import threading
import time

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t

from fastmq._native.arena cimport arena_block
from fastmq._native.batch_builder cimport HOT_BUILDER_OBJECTS, BatchBuilder, BatchFormat
from fastmq._native.buffer cimport BorrowedRecord, borrow_record, release_record
from fastmq._native.buffer_memory cimport BufferMemory
from fastmq._native.bulk_items cimport ArrowBinary
from fastmq._native.clock cimport now_ms
from fastmq._native.partition_queues cimport HOT_SLOTS, PartitionQueue, TopicQueues
from fastmq._native.producer_batch cimport (
    BATCH_CLOSED, BATCH_DONE, BATCH_IN_FLIGHT, BATCH_SPLIT, FutureRecordMetadata, ProducerBatch,
)
from fastmq._native.ready_set cimport ReadySet, first_unsent

from fastmq._native.producer_batch import FutureRecordMetadata, ProducerBatch   # re-exported: the sender's types


cdef object _monotonic = time.monotonic

cdef extern from *:
    # PREFETCHW asks for the line to write (exclusive): __builtin_prefetch(address, 1) compiles to a PREFETCHT0 (a
    # line to read) unless the compiler is told the CPU has PREFETCHW, and a batch's next lines are often shared
    # with the I/O thread's core, which read that storage when it sent the block's last batch: the first write
    # there then waited for the other core's copy to be invalidated. CPUs without it run it as a NOP.
    """
    #if defined(__x86_64__)
    #define FMQ_PREFETCH_FOR_WRITE(address) __asm__ volatile("prefetchw %0" : : "m"(*(const char*)(address)))
    #else
    #define FMQ_PREFETCH_FOR_WRITE(address) __builtin_prefetch((const void*)(address), 1, 3)
    #endif
    """
    void prefetch_for_write "FMQ_PREFETCH_FOR_WRITE"(const void* address) noexcept nogil

cdef enum:
    BATCH_OVERHEAD = 64         # bytes a batch needs beyond its records (a bound over the formats; Kafka: 61)
    RECORD_OVERHEAD = 64        # bytes a record needs beyond its key and value (a bound: varints, attributes)
    HEADER_OVERHEAD = 10        # bytes a header needs beyond its name and value
    RESERVE_STEP = 16384        # a batch's memory reservation grows by this much (or by batch_size if smaller)
    FIRST_CAPACITY = 1024       # bytes of storage a new batch starts with, at least (a block holds 4 KiB)


# ---------------------------------------------------------------------------------------------------------
# The accumulator
# ---------------------------------------------------------------------------------------------------------

cdef Py_ssize_t headers_bytes(object headers) except -2:
    # headers_size() (accumulator.pxd) of headers that are not None.
    if not headers:
        return -1
    return sum(len(key.encode("utf-8")) + (0 if value is None else len(value)) for key, value in headers)


cdef inline Py_ssize_t record_bound(Py_ssize_t key_len, Py_ssize_t value_len, object headers,
                                    Py_ssize_t header_bytes):
    # At least the bytes a record adds to a batch in any format (RECORD_OVERHEAD and HEADER_OVERHEAD bound
    # the framing): what its memory reservation must cover before it is appended.
    cdef Py_ssize_t bound = max(key_len, 0) + max(value_len, 0) + RECORD_OVERHEAD
    if header_bytes >= 0:
        bound += header_bytes + HEADER_OVERHEAD * len(headers)
    return bound


cdef inline bint _prefetch_append(TopicQueues topic, int32_t partition, void* last_queue) noexcept:
    # Over many partitions each append finds its partition's objects out of the cache, and reaching them one
    # after the other (queue, batch, builder, encoder, buffer) costs one cache miss after another: their
    # addresses, kept by _note_hot, let the misses overlap. Nothing to do (False) when the partition is the one
    # the last append went to. The tail (the last slot) is left to the write: its page has left the TLB by now
    # (a page of its own per partition), and a prefetch waited for that page walk as long as the write does
    # (perf: the stall moved from the one to the other).
    cdef const char** slots
    cdef int k
    if partition >= topic.hot_partitions:
        return False
    slots = topic.hot + partition * HOT_SLOTS
    if <void*>slots[0] == last_queue:
        return False
    for k in range(HOT_SLOTS - 1):
        if slots[k] != NULL:
            prefetch_for_write(slots[k])
            prefetch_for_write(slots[k] + 64)
    return True


cdef inline void _note_hot(TopicQueues topic, PartitionQueue queue, ProducerBatch batch) noexcept:
    # What the partition's next append reads (see _prefetch_append): its open batch's objects.
    cdef const char** slots
    cdef int k, count = 0
    if queue.partition >= topic.hot_partitions:
        return
    slots = topic.hot + queue.partition * HOT_SLOTS
    slots[1] = <const char*><void*>batch
    slots[2] = <const char*><void*>batch.builder
    count = batch.builder.hot_objects(slots + 3)
    for k in range(3 + count, HOT_SLOTS):
        slots[k] = NULL
    if count == HOT_BUILDER_OBJECTS:
        # The last address is where the next record goes: over many partitions, many write streams interleave,
        # more than the hardware prefetcher follows, and each record's first bytes in a new line waited for
        # that line. Asked for now, it comes while other partitions take their records.
        prefetch_for_write(slots[HOT_SLOTS - 1] + 64)
        prefetch_for_write(slots[HOT_SLOTS - 1] + 128)


cdef class RecordAccumulator:
    """Per-partition batches for one producer (see the module docstring). A protocol subclasses it to give it
    its BatchFormat (fastmq.kafka._native.accumulator.RecordAccumulator)."""

    def __init__(self, BatchFormat batch_format not None, *, Py_ssize_t batch_size=16384, double linger_ms=0,
                 Py_ssize_t buffer_memory=33554432, double max_block_ms=60000, double delivery_timeout_ms=120000,
                 double retry_backoff_ms=100, bint idempotent=True, int max_in_flight=5, wakeup=None,
                 batch_full=None):
        self.format = batch_format
        self.topics = {}
        self.batch_size = max(batch_size, 1)
        self.linger = linger_ms / 1000.0
        self.max_block = max_block_ms / 1000.0
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.idempotent = idempotent
        self.max_in_flight = max(max_in_flight, 1)
        self.producer_id = -1
        self.producer_epoch = -1
        self.lock = threading.Lock()
        self.memory = BufferMemory(buffer_memory, self.batch_size, self.lock)
        self.incomplete = set()
        self.wakeup = wakeup
        self.batch_full = batch_full
        self.reserve_step = min(self.batch_size, RESERVE_STEP)
        self.ready_set = ReadySet(self.linger, self.max_in_flight, idempotent)
        self.next_expiry = float("inf")

    # -- topics ---------------------------------------------------------------------------------------

    def topic(self, str name):
        """The TopicQueues of `name`, created empty (no partitions known) on first use."""
        cdef TopicQueues topic = self.topics.get(name)
        if topic is None:
            topic = self.topics.setdefault(name, TopicQueues(name))
        return topic

    def update_topic(self, str name, list leaders, avoided_nodes=()):
        """Apply metadata: leaders[p] is the node leading partition p (-1 when unknown). Partitions of
        nodes in avoided_nodes (brokers that keep failing) take no records without a key."""
        cdef TopicQueues topic = self.topic(name)
        cdef int32_t p
        with self.lock:
            topic.make_hot_room(len(leaders))
            for p in range(len(topic.partitions), len(leaders)):
                topic.partitions.append(PartitionQueue(self.format.partition_key(name, p), topic, p))
                topic.hot[p * HOT_SLOTS] = <const char*><void*>topic.partitions[p]
            topic.leaders = list(leaders)
            available = [p for p, node in enumerate(leaders) if node >= 0 and node not in avoided_nodes]
            if not available:
                available = [p for p, node in enumerate(leaders) if node >= 0]
            topic.available = available
            if topic.sticky not in available:
                topic.sticky = -1

    def set_producer_id(self, int64_t producer_id, int producer_epoch, bint transactional=False):
        """Idempotence: a new producer id/epoch restarts every partition's sequence at 0; with
        transactional, batches carry the transactional bit."""
        cdef TopicQueues topic
        cdef PartitionQueue queue
        with self.lock:
            self.producer_id = producer_id
            self.producer_epoch = <int16_t>producer_epoch
            self.transactional = transactional
            for topic in self.topics.values():
                for queue in topic.partitions:
                    queue.next_sequence = 0
                    queue.acknowledged = False

    def reset_producer_id(self):
        """The broker forgot this idempotent producer (UNKNOWN_PRODUCER_ID): drop the id, so that the sender
        gets a new one, and give every unacknowledged batch a sequence under it when it is next sent. Call it
        with nothing in flight: sequences restart at 0 and must follow the order of the queues."""
        cdef ProducerBatch batch
        with self.lock:
            if self._any_in_flight():
                raise self.format.state_error("the producer id cannot be reset while batches are in flight")
            self.producer_id = -1
            self.producer_epoch = -1
            for batch in self.incomplete:
                batch.base_sequence = -1

    def has_in_flight(self):
        """Whether a produce request still carries one of the batches (awaiting its answer, or its write)."""
        with self.lock:
            return self._any_in_flight()

    @property
    def buffer_memory(self):
        """Bytes all unfinished batches may hold."""
        return self.memory.buffer_memory

    @property
    def used_memory(self):
        """Bytes unfinished batches hold now."""
        return self.memory.used

    @property
    def arena(self):
        """The Arena (fastmq._native.arena) the batches' storage comes from."""
        return self.memory.arena

    @property
    def due_partitions(self):
        """The partitions in the due set (keys as the format made them): those ready() looks at first."""
        with self.lock:
            return [queue.topic_partition for queue in self.ready_set.due]

    @property
    def producer_identity(self):
        return self.producer_id, self.producer_epoch

    # -- the send path ----------------------------------------------------------------------------------

    def send(self, str topic_name, object partition, object key, object value, object headers,
             object timestamp_ms):
        """Append one record to the topic named `topic_name`; key/value are bytes-like or None, headers
        [(str, bytes-or-None)].

        Returns a FutureRecordMetadata, or None when the topic's partitions are not known yet (the caller
        fetches metadata and calls again). The topic is looked up here, by name, rather than handed in by the
        caller: a Python-level topic() call per record cost the user thread more than the lookup."""
        return self._send(topic_name, partition, key, value, headers, timestamp_ms)

    def send_record(self, str topic, object value=None, object key=None, object headers=None,
                    object partition=None, object timestamp_ms=None):
        """send() with the signature of a producer's send(), for a producer that does nothing to a record
        before the accumulator (no serializers, partitioner or transaction): the producer takes this method as
        its send(), so that a record costs the user thread no Python frame (a fifth of what it spent on one).
        A topic whose partitions are not known yet goes to unknown_topic(topic, value, key, headers, partition,
        timestamp_ms), the producer's metadata fetch, whose answer is returned."""
        return self._send_record(topic, value, key, headers, partition, timestamp_ms)

    cdef object _send_record(self, str topic, object value, object key, object headers, object partition,
                             object timestamp_ms):
        # send_record() for compiled callers (a protocol's face that checks records first: compat_send.pyx).
        future = self._send(topic, partition, key, value, headers, timestamp_ms)
        if future is None:
            return self.unknown_topic(topic, value, key, headers, partition, timestamp_ms)
        return future

    cdef TopicQueues _topic_of(self, str name):
        # The TopicQueues of `name` (None: not known yet). A producer's records mostly name one topic, with the
        # same str object each time, not the dict's key object: a dict lookup compared the strings' bytes at
        # every send (a tenth of what a send cost), where the last name is recognised by identity. Topics are
        # never removed, so what the last name found stays right.
        cdef TopicQueues topic
        if name is self.last_topic_name:
            return self.last_topic
        topic = self.topics.get(name)
        if topic is not None:
            self.last_topic_name = name
            self.last_topic = topic
        return topic

    cdef object _send(self, str topic_name, object partition, object key, object value, object headers,
                      object timestamp_ms):
        cdef TopicQueues topic = self._topic_of(topic_name)
        cdef int32_t count = len(topic.partitions) if topic is not None else 0
        cdef int32_t chosen
        cdef BorrowedRecord record
        cdef int64_t timestamp
        if count == 0:
            return None
        timestamp = now_ms() if timestamp_ms is None else timestamp_ms
        borrow_record(key, value, &record)
        self.appends_in_progress += 1
        try:
            if partition is not None:
                chosen = partition
                if chosen < 0 or chosen >= count:
                    raise ValueError(f"Unrecognized partition {partition} for topic {topic.name} "
                                     f"({count} partitions)")
            elif key is not None:
                chosen = self.format.partition_for_key(record.key, record.key_len, count)
            else:
                chosen = self._sticky_partition(topic)
            return self._append(topic, chosen, timestamp, record.key, record.key_len, record.value, record.value_len,
                                headers, headers_size(headers))
        finally:
            release_record(&record)
            self.appends_in_progress -= 1

    cdef int32_t _sticky_partition(self, TopicQueues topic) except -1:
        if topic.sticky < 0:
            candidates = topic.available or range(len(topic.partitions))
            topic.sticky = random.choice(candidates)
        return topic.sticky

    cdef FutureRecordMetadata _append(self, TopicQueues topic, int32_t partition, int64_t timestamp,
                                      const char* key, Py_ssize_t key_len, const char* value,
                                      Py_ssize_t value_len, object headers, Py_ssize_t header_bytes):
        cdef ProducerBatch batch = self._append_record(topic, partition, timestamp, key, key_len, value,
                                                       value_len, headers, header_bytes)
        cdef FutureRecordMetadata future = FutureRecordMetadata.__new__(FutureRecordMetadata)
        future.batch = batch
        future.index = batch.record_count - 1
        future.timestamp = timestamp
        future.key_size = <int32_t>key_len
        future.value_size = <int32_t>value_len
        future.header_size = <int32_t>header_bytes
        return future

    cdef ProducerBatch _append_record(self, TopicQueues topic, int32_t partition, int64_t timestamp,
                                      const char* key, Py_ssize_t key_len, const char* value,
                                      Py_ssize_t value_len, object headers, Py_ssize_t header_bytes):
        # Encodes the record into its partition's open batch (opening one if needed); returns the batch.
        cdef PartitionQueue queue
        cdef ProducerBatch batch
        cdef Py_ssize_t size = -1
        cdef Py_ssize_t bound
        # An append to the partition the last one went to finds its lines in the cache already.
        cdef bint switched = _prefetch_append(topic, partition, self.last_queue)
        queue = topic.partitions[partition]
        batch = queue.open_batch
        bound = record_bound(key_len, value_len, headers, header_bytes)
        if self.aborted_error is not None or self.closing:
            raise self.format.state_error("Cannot send after the producer is closed")
        if batch is not None and batch.encoded_size + bound <= batch.reserved:
            # The common case: no lock, no Python code between the state check and the write.
            size = batch.append(timestamp, key, key_len, value, value_len, headers, False)
        if size < 0:
            batch = self._append_slow(topic, queue, timestamp, key, key_len, value, value_len, headers, bound)
        if switched:
            self.last_queue = <void*>queue
            _note_hot(topic, queue, batch)
        self.records_appended += 1
        self.bytes_appended += max(key_len, 0) + max(value_len, 0)
        return batch

    def send_bulk(self, str topic_name, object partition, object values, object keys, object timestamp_ms):
        """Append many records to the topic named `topic_name` without a future per record; returns the
        batches they went into.

        values (and keys, or None) are sequences of bytes-like objects (None = null), or pyarrow binary /
        string arrays, whose buffers are read in place. Returns None when the topic's partitions are not
        known yet."""
        cdef TopicQueues topic = self.topics.get(topic_name)
        cdef list batches = []
        if topic is None or not topic.partitions:
            return None
        self._append_many(topic, partition, values, keys, None, timestamp_ms, batches, NULL)
        return batches

    def send_placed(self, str topic_name, object partition, object values, object keys, object headers,
                    object timestamp_ms):
        """send() of many records in one call, for a caller that answers per record but wants no future per
        record (the HTTP proxy, AIOKafkaProducer.send_batch): returns (batches, places), or None when the
        topic's partitions are not known yet.

        values and keys as send_bulk() takes them; headers is None or holds one entry per value (None for none).
        batches lists the batches the records went into, in the order they were first written to; places holds,
        per record, two native int32: its batch's position in `batches` and its index in that batch (a batch
        split later passes its records on to its children, as their futures follow them). watch() says when a
        batch is done."""
        cdef TopicQueues topic = self.topics.get(topic_name)
        cdef list batches = []
        cdef bytearray places
        if topic is None or not topic.partitions:
            return None
        places = bytearray(2 * sizeof(int32_t) * len(values))
        self._append_many(topic, partition, values, keys, headers, timestamp_ms, batches,
                          <int32_t*><char*>places)
        return batches, places

    cdef int _append_many(self, TopicQueues topic, object partition, object values, object keys, object headers,
                          object timestamp_ms, list batches, int32_t* place) except -1:
        # Appends the records in order, all with one timestamp (now, unless given), choosing each one's partition
        # as send() does. `batches` gets the batches they went into, in the order first written to; `place`
        # (unless NULL) gets per record its batch's position in `batches` and its index in that batch.
        cdef int32_t count = len(topic.partitions)
        cdef int64_t timestamp = now_ms() if timestamp_ms is None else timestamp_ms
        cdef ArrowBinary value_column = ArrowBinary.of(values, "values")
        cdef ArrowBinary key_column = ArrowBinary.of(keys, "keys") if keys is not None else None
        cdef Py_ssize_t n = value_column.length, i, value_len, key_len
        cdef const char* value_data
        cdef const char* key_data
        cdef int32_t chosen, number = -1
        cdef ProducerBatch batch, previous = None
        cdef dict numbers = {}          # batch -> its position in `batches`
        if partition is not None and not 0 <= partition < count:
            raise ValueError(f"Unrecognized partition {partition} for topic {topic.name} ({count} partitions)")
        if key_column is not None and key_column.length != n:
            raise ValueError(f"{key_column.length} keys for {n} values")
        if headers is not None and len(headers) != n:
            raise ValueError(f"{len(headers)} headers for {n} values")
        self.appends_in_progress += 1
        try:
            for i in range(n):
                value_data = value_column.item(i, &value_len)
                key_data = NULL
                key_len = -1
                if key_column is not None:
                    key_data = key_column.item(i, &key_len)
                if partition is not None:
                    chosen = partition
                elif key_data != NULL:
                    chosen = self.format.partition_for_key(key_data, key_len, count)
                else:
                    chosen = self._sticky_partition(topic)
                record_headers = None if headers is None else headers[i]
                batch = self._append_record(topic, chosen, timestamp, key_data, key_len, value_data, value_len,
                                            record_headers, headers_size(record_headers))
                if batch is not previous:
                    previous = batch
                    number = numbers.get(batch, -1)
                    if number < 0:
                        number = numbers[batch] = len(batches)
                        batches.append(batch)
                if place != NULL:
                    place[2 * i] = number
                    place[2 * i + 1] = batch.record_count - 1
        finally:
            self.appends_in_progress -= 1
        return 0

    def open_builder(self):
        """An empty BatchBuilder of this producer's format for a caller that encodes a whole batch itself, record
        by record (AIOKafkaProducer.create_batch), and queues it with send_built(): the records are encoded once,
        where send_placed() would first keep them in lists. Its storage is a block of the arena large enough for
        batch_size; its buffer memory is reserved when it is queued."""
        return self.format.new_builder(self.batch_size, arena_block(self.memory.arena, self.batch_size))

    def send_built(self, str topic_name, int32_t partition, BatchBuilder builder not None, int32_t record_count,
                   Py_ssize_t size, Py_ssize_t data_bytes):
        """Queue a batch that open_builder()'s `builder` holds (records 0 .. record_count - 1, `size` bytes, of
        which data_bytes are keys and values) on one partition, after every record queued there before (the
        partition's open batch closes); it goes out as it is. Returns its ProducerBatch, or None when the topic's
        partitions are not known yet. Waits for buffer memory up to max_block."""
        cdef TopicQueues topic = self.topics.get(topic_name)
        cdef PartitionQueue queue
        cdef ProducerBatch batch
        cdef bint wake
        if record_count <= 0:
            raise ValueError("a built batch holds at least one record")
        if topic is None or not topic.partitions:
            return None
        if not 0 <= partition < len(topic.partitions):
            raise ValueError(f"Unrecognized partition {partition} for topic {topic.name} "
                             f"({len(topic.partitions)} partitions)")
        with self.lock:
            if self.aborted_error is not None or self.closing:
                raise self.format.state_error("Cannot send after the producer is closed")
            self._reserve(size)             # may wait, letting other threads change the queue
            queue = topic.partitions[partition]
            if queue.open_batch is not None:
                self._close_open_batch(queue)
            batch = self._new_batch(queue, builder, _monotonic())
            queue.batches.append(batch)
            self.incomplete.add(batch)
            batch.record_count = record_count
            batch.encoded_size = batch.reserved = size
            batch.state = BATCH_CLOSED
            self._expires_at(batch.created)
            wake = self.ready_set.make_due(queue)
            self.records_appended += record_count
            self.bytes_appended += data_bytes
        # As for a batch a send() filled: the caller is about to build the next one, holding the GIL.
        if self.batch_full is not None:
            self.batch_full()
        elif wake and self.wakeup is not None:
            self.wakeup()
        return batch

    def watch(self, ProducerBatch batch not None, function):
        """Call function(batch, outcome) once `batch` is done (now, when it is), on the thread that finishes
        it; outcome is `batch` when it succeeded, else its error. A batch split meanwhile makes the call when
        its first child is done, with that child's outcome (look at its leaves() then)."""
        cdef FutureRecordMetadata first = FutureRecordMetadata.__new__(FutureRecordMetadata)
        first.batch = batch                 # its record 0: a view that follows splits into the first child
        first.timestamp = first.key_size = first.value_size = first.header_size = -1
        # On success the callback gets the record's "metadata": set to the batch here rather than made (a
        # RecordMetadata would cost the I/O thread that completes the batch a Python call per watch).
        first._metadata = batch
        first._register(functools.partial(function, batch), True, True)

    cdef ProducerBatch _append_slow(self, TopicQueues topic, PartitionQueue queue, int64_t timestamp,
                                    const char* key, Py_ssize_t key_len, const char* value,
                                    Py_ssize_t value_len, object headers, Py_ssize_t bound):
        # The open batch's reservation does not cover the record (grow it), or the batch is full (close it and
        # start the next one), or there is none. `bound` is the record's size bound (record_bound).
        cdef ProducerBatch batch
        cdef Py_ssize_t grow, size
        cdef bint wake = False, full = False
        with self.lock:
            while True:
                batch = queue.open_batch
                if batch is None:
                    break
                if batch.encoded_size + bound <= batch.reserved:
                    # Another thread grew the reservation (or closed and reopened the batch) meanwhile.
                    if self._append_within(batch, timestamp, key, key_len, value, value_len, headers) >= 0:
                        return batch
                elif batch.encoded_size + bound <= self.batch_size:
                    grow = min(max(bound, self.reserve_step), self.batch_size - batch.reserved)
                    self._reserve(grow)             # may wait, letting other threads change the queue
                    if queue.open_batch is batch:
                        batch.reserved += grow
                        if self._append_within(batch, timestamp, key, key_len, value, value_len, headers) >= 0:
                            return batch
                    else:
                        self.memory.release(grow)
                        continue
                # Full: it goes out as it is.
                wake = self._close_open_batch(queue)
                full = True
                if topic.sticky == queue.partition:
                    topic.sticky = -1       # KIP-480: a full batch moves keyless records elsewhere
                break
            batch = self._open_batch(queue, bound + BATCH_OVERHEAD)
            batch.append(timestamp, key, key_len, value, value_len, headers, True)
            self._cover(batch)
            if self.linger <= 0 or self.flushes or self.closing or self.memory.waiting:
                wake = self.ready_set.make_due(queue) or wake
            else:
                wake = self.ready_set.schedule(queue, batch.created + self.linger) or wake
                self.ready_set.linger_on_leader(queue)
        if full and self.batch_full is not None:
            self.batch_full()
        elif wake and self.wakeup is not None:
            self.wakeup()
        return batch

    cdef Py_ssize_t _append_within(self, ProducerBatch batch, int64_t timestamp, const char* key,
                                   Py_ssize_t key_len, const char* value, Py_ssize_t value_len,
                                   object headers) except -2:
        # Appends to an open batch whose reservation covers the record's bound (lock held); -1 when it is full.
        cdef Py_ssize_t size = batch.append(timestamp, key, key_len, value, value_len, headers, False)
        if size >= 0:
            self._cover(batch)
        return size

    cdef int _cover(self, ProducerBatch batch) except -1:
        # A format's framing beyond the bound (or a forced oversized record) is charged after the fact.
        cdef Py_ssize_t over = batch.encoded_size - batch.reserved
        if over > 0:
            batch.reserved += over
            self.memory.used += over
        return 0

    cdef ProducerBatch _open_batch(self, PartitionQueue queue, Py_ssize_t need):
        # A new open batch at the end of the queue (lock held), its memory reserved: what the record needs, at
        # least one reserve step. Its storage is an arena block that holds the record (FIRST_CAPACITY at least),
        # not the whole reservation: over thousands of partitions most batches hold a few records, and a busy
        # partition's grows block by block within its reservation. A partition whose last batch filled up is busy:
        # its next batch reserves and takes batch_size at once, as it will fill that too (growing it step by step
        # took the lock batch_size / RESERVE_STEP times and copied its records at every move).
        cdef ProducerBatch batch
        cdef bint whole = queue.busy and need <= self.batch_size
        cdef Py_ssize_t capacity = self.batch_size if whole else max(need, FIRST_CAPACITY)
        need = self.batch_size if whole else max(need, self.reserve_step)
        self._reserve(need)
        batch = self._new_batch(queue, self.format.new_builder(self.batch_size,
                                                               arena_block(self.memory.arena, capacity)),
                                _monotonic())
        batch.reserved = need
        queue.batches.append(batch)
        queue.open_batch = batch
        self.incomplete.add(batch)
        self._expires_at(batch.created)
        return batch

    cdef ProducerBatch _new_batch(self, PartitionQueue queue, BatchBuilder builder, double created):
        # A batch of the partition, not queued yet.
        cdef ProducerBatch batch = ProducerBatch.__new__(ProducerBatch)
        batch.topic_partition = queue.topic_partition
        batch.queue = queue
        batch.format = self.format
        batch.builder = builder
        batch.created = created
        return batch

    cdef bint _close_open_batch(self, PartitionQueue queue) except -1:
        # The partition's open batch takes no more records and goes out as it is (lock held); True when the
        # partition became due (the sender is to be woken).
        queue.open_batch.state = BATCH_CLOSED
        queue.open_batch = None
        queue.busy = True
        return self.ready_set.make_due(queue)

    cdef int _make_all_due(self) except -1:
        # Flush, close, memory pressure: every queue with an unsent batch goes out now.
        cdef ProducerBatch batch
        for batch in self.incomplete:
            if batch.state != BATCH_IN_FLIGHT and batch.state != BATCH_DONE:
                self.ready_set.make_due(self._queue_of(batch))
        return 0

    cdef int _reserve(self, Py_ssize_t need) except -1:
        # Reserves `need` bytes (lock held), waiting up to max_block when memory is short; Condition.wait
        # releases both the lock and the GIL.
        cdef double deadline = -1
        try:
            while not self.memory.try_reserve(need):
                if deadline < 0:
                    deadline = _monotonic() + self.max_block
                    self.memory.waiting += 1
                    # The memory is held by batches: they all go out now, so that sending them frees it.
                    self._make_all_due()
                    if self.wakeup is not None:
                        self.wakeup()
                if self.aborted_error is not None or self.closing:
                    raise self.format.state_error("Producer closed while send was waiting for buffer memory")
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    raise self.format.timeout_error(
                        f"Failed to allocate {need} bytes of buffer memory within max_block_ms "
                        f"({self.memory.used} of {self.memory.buffer_memory} in use)")
                self.memory.freed.wait(remaining)
        finally:
            if deadline >= 0:
                self.memory.waiting -= 1
        return 0

    # -- the sender's side --------------------------------------------------------------------------------

    def ready(self, double now):
        """Which leaders have a batch to send: ({node_id: [PartitionQueue]}, seconds until the next linger
        or backoff expires (None: nothing waits), [names of topics with partitions lacking a leader]).
        Visits the due partitions only (plus those whose deadline passed)."""
        cdef bint urgent = self.flushes > 0 or self.memory.waiting > 0 or self.closing
        with self.lock:
            return self.ready_set.collect(now, urgent)

    def drain(self, list queues, Py_ssize_t max_request_size, double now):
        """Take the next sendable batch of each queue (up to max_request_size bytes in all) and mark them
        in flight; builds (compresses, checksums) each one outside the lock."""
        cdef list taken = []
        cdef PartitionQueue queue
        cdef ProducerBatch batch
        cdef Py_ssize_t total = 0
        with self.lock:
            for queue in queues:
                batch = first_unsent(queue)
                if batch is None or batch.state == BATCH_DONE:
                    continue
                if taken and total + batch.size_in_bytes > max_request_size:
                    break
                if batch is queue.open_batch:
                    queue.open_batch = None
                    queue.busy = False      # it goes out before it filled up
                if self.idempotent and self.producer_id >= 0:
                    if batch.base_sequence < 0:
                        batch.base_sequence = queue.next_sequence
                        queue.next_sequence = <int32_t>((<int64_t>queue.next_sequence
                                                         + batch.record_count) & 0x7FFFFFFF)
                        if batch.payload is not None:
                            # Built under a producer id that was reset since (reset_producer_id).
                            batch.builder.stamp_producer(batch.payload, self.producer_id, self.producer_epoch,
                                                         batch.base_sequence, self.transactional)
                    if batch.payload is None:
                        batch.builder.stamp_producer(None, self.producer_id, self.producer_epoch,
                                                     batch.base_sequence, self.transactional)
                batch.state = BATCH_IN_FLIGHT
                batch.attempts += 1
                queue.in_flight += 1
                self.memory.in_flight += 1
                total += batch.size_in_bytes
                taken.append(batch)
        for batch in taken:
            batch.finish()
        return taken

    def is_oldest(self, ProducerBatch batch):
        """Whether no earlier batch of the batch's partition is still unfinished."""
        cdef PartitionQueue queue = self._queue_of(batch)
        with self.lock:
            return len(queue.batches) > 0 and queue.batches[0] is batch

    def complete(self, ProducerBatch batch, int64_t base_offset, int64_t log_append_time=-1):
        """The batch was acknowledged."""
        batch.base_offset = base_offset
        batch.log_append_time = log_append_time
        if batch.base_sequence >= 0:
            self._queue_of(batch).acknowledged = True
        self._finish(batch, None)

    def fail(self, ProducerBatch batch, error):
        """The batch failed for good."""
        self._finish(batch, error)

    cdef _finish(self, ProducerBatch batch, error):
        cdef PartitionQueue queue = self._queue_of(batch)
        with self.lock:
            if batch.state == BATCH_DONE:
                return
            if batch.state == BATCH_IN_FLIGHT:
                queue.in_flight -= 1
                self.memory.in_flight -= 1
            if batch is queue.open_batch:
                queue.open_batch = None
            try:
                queue.batches.remove(batch)
            except ValueError:
                pass
            batch.error = error
            batch.state = BATCH_DONE
            if error is not None and self.transaction_error is None:
                self.transaction_error = error
            self.incomplete.discard(batch)
            self.memory.give_back(batch)
        batch.resolve()

    def retry(self, ProducerBatch batch, double now):
        """Send the batch again after the backoff, keeping its place (and sequence) in its partition."""
        cdef PartitionQueue queue = self._queue_of(batch)
        with self.lock:
            if batch.state == BATCH_IN_FLIGHT:
                queue.in_flight -= 1
                self.memory.in_flight -= 1
            batch.state = BATCH_CLOSED
            batch.retry_after = now + self.retry_backoff
            self._expires_at(batch.created)
            self.ready_set.schedule(queue, batch.retry_after)
        if self.wakeup is not None:
            self.wakeup()

    def split(self, ProducerBatch batch, double now):
        """Re-queue a batch the broker refused as too large as two halves, in its place; returns them.

        Halving always makes progress, whatever the broker's limit: a half still too large is split
        again when it comes back, down to single records (which the sender then fails)."""
        cdef PartitionQueue queue = self._queue_of(batch)
        cdef list children = []
        cdef ProducerBatch child = None
        cdef Py_ssize_t index = 0, position
        cdef int64_t sequence = batch.base_sequence
        cdef list records = self.format.split_records(batch.payload)
        cdef bytes key, value
        cdef Py_ssize_t half = (len(records) + 1) // 2
        if len(records) < 2:
            raise ValueError("a batch of one record cannot be split")
        with self.lock:
            for record in records:
                if child is None or index == half:
                    child = self._new_batch(queue, self.format.new_builder(
                        self.batch_size, arena_block(self.memory.arena, self.batch_size)), batch.created)
                    child.state = BATCH_CLOSED
                    if sequence >= 0:
                        # The children take over the parent's sequence numbers, in order.
                        child.base_sequence = <int32_t>((sequence + index) & 0x7FFFFFFF)
                    children.append((index, child))
                timestamp, key, value, headers = record
                child.append(timestamp, NULL if key is None else PyBytes_AS_STRING(key),
                             -1 if key is None else PyBytes_GET_SIZE(key),
                             NULL if value is None else PyBytes_AS_STRING(value),
                             -1 if value is None else PyBytes_GET_SIZE(value), headers, True)
                index += 1
            if batch.state == BATCH_IN_FLIGHT:
                queue.in_flight -= 1
                self.memory.in_flight -= 1
            position = list(queue.batches).index(batch)
            del queue.batches[position]
            for _, child in reversed(children):
                queue.batches.insert(position, child)
                self.incomplete.add(child)
            self.incomplete.discard(batch)
            # The reserved memory moves to the first child.
            child = children[0][1]
            child.reserved, batch.reserved = batch.reserved, 0
            batch.children = children
            batch.state = BATCH_SPLIT
            self._expires_at(batch.created)
            self.ready_set.make_due(queue)
            # Callbacks follow their records into the children.
            callbacks, batch.callbacks = batch.callbacks or [], None
            for entry in callbacks:
                child = (<FutureRecordMetadata>entry[0])._settled_batch()
                if child.callbacks is None:
                    child.callbacks = []
                child.callbacks.append(entry)
        if batch.done_event is not None:
            batch.done_event.set()          # waiters follow the split to the children
        if self.wakeup is not None:
            self.wakeup()
        return [c for _, c in children]

    def expire(self, double now):
        """Fail batches older than delivery_timeout that are not in flight; returns them. Looks at the batches
        only when the oldest unsent one may have expired (next_expiry), not at every call."""
        cdef list expired = []
        cdef ProducerBatch batch
        cdef double next_expiry = float("inf")
        if now < self.next_expiry:
            return expired
        with self.lock:
            for batch in self.incomplete:
                if batch.state == BATCH_IN_FLIGHT:
                    continue                # retry() and split() bring it back into next_expiry
                if now - batch.created >= self.delivery_timeout:
                    expired.append(batch)
                elif batch.created + self.delivery_timeout < next_expiry:
                    next_expiry = batch.created + self.delivery_timeout
            self.next_expiry = next_expiry
        for batch in expired:
            self.fail(batch, self.format.timeout_error(
                f"Expiring {batch.record_count} record(s) for {batch.topic_partition}: "
                f"{(now - batch.created) * 1000:.0f} ms has passed since batch creation"))
        return expired

    # -- flush, close, abort ------------------------------------------------------------------------------

    def begin_flush(self):
        """Make every batch ready now; returns the batches that the flush waits for."""
        with self.lock:
            self.flushes += 1
            pending = list(self.incomplete)
            self._make_all_due()
        if self.wakeup is not None:
            self.wakeup()
        return pending

    def end_flush(self):
        with self.lock:
            self.flushes -= 1

    def begin_close(self):
        """No new records from now on; everything already accepted is sent."""
        self.closing = True
        with self.lock:
            self._make_all_due()
            self.memory.freed.notify_all()
        if self.wakeup is not None:
            self.wakeup()

    def abort(self, error, bint in_flight=False):
        """Fail every unfinished batch with `error` (with in_flight, also those awaiting a response),
        including records appended while aborting: appends in progress are waited for, as the Java client's
        abortIncompleteBatches does."""
        self.aborted_error = error
        with self.lock:
            self.memory.freed.notify_all()
        while True:
            self._abort_batches(error, in_flight)
            if self.appends_in_progress == 0:
                break
            time.sleep(0.001)
        self._abort_batches(error, in_flight)

    cdef _abort_batches(self, error, bint in_flight):
        cdef ProducerBatch batch
        with self.lock:
            batches = [b for b in self.incomplete
                       if in_flight or (<ProducerBatch>b).state != BATCH_IN_FLIGHT]
        for batch in batches:
            self.fail(batch, error)

    def fail_unsent(self, error):
        """Fail the batches not sent yet (a transaction is aborted), leaving those in flight alone; new
        records are still taken."""
        self._abort_batches(error, False)

    def transaction_failure(self):
        """The first error of a batch that failed since clear_transaction_failure() (None: none failed)."""
        return self.transaction_error

    def clear_transaction_failure(self):
        self.transaction_error = None

    def has_unsent(self):
        """True while some batch is not in flight or done."""
        cdef ProducerBatch batch
        with self.lock:
            for batch in self.incomplete:
                if batch.state != BATCH_IN_FLIGHT:
                    return True
        return False

    def has_incomplete(self):
        return bool(self.incomplete)

