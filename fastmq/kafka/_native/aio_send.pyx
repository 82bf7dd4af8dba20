# cython: language_level=3
"""AIOKafkaProducer.send()'s common case in one compiled call (fastmq.kafka.aio): the record is serialized, goes
into the accumulator and its asyncio future is tracked (aio_futures.pyx), unless Producer.send() could wait,
which the event loop must not do: for the topic's metadata, for AddPartitionsToTxn (a transactional producer's
records always take the slower way), or for buffer memory (a new batch might not fit). Then the caller takes the
slower way with the serialized value and key.

Why compiled: the checks ran as some twenty bytecodes a record in send()'s coroutine. Alternating runs of 300k
sends of 100 B to the embedded broker: 1,261-1,280 ns of CPU a record before, 1,024-1,151 with this (an outlier
each way, 1,809 and 1,608).
"""
cimport cython

from fastmq._native.accumulator cimport RecordAccumulator
from fastmq.kafka._native.aio_futures cimport RecordFutures


@cython.final
cdef class SendPath:
    """For a started AIOKafkaProducer: producer is its engine (fastmq Producer), futures its RecordFutures."""

    cdef object send                    # the Producer's send() (the accumulator's own when it adds nothing)
    cdef RecordAccumulator accumulator
    cdef object cluster                 # the Producer's client's Cluster (.topics is replaced on each update)
    cdef RecordFutures futures
    cdef object key_serializer
    cdef object value_serializer
    cdef Py_ssize_t max_batch_size
    cdef bint transactional

    def __init__(self, producer, RecordFutures futures not None, key_serializer, value_serializer,
                 Py_ssize_t max_batch_size, bint transactional):
        self.send = producer.send
        self.accumulator = producer._accumulator
        self.cluster = producer.client.cluster
        self.futures = futures
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.max_batch_size = max_batch_size
        self.transactional = transactional

    def __call__(self, topic, value, key, partition, timestamp_ms, headers):
        """The record's asyncio future; or (value, key), serialized, when Producer.send() could wait."""
        cdef Py_ssize_t used = self.accumulator.memory.used
        if self.key_serializer is not None:
            key = self.key_serializer(key)
        if self.value_serializer is not None:
            value = self.value_serializer(value)
        if self.transactional or topic not in self.cluster.topics or (
                used and used + self.max_batch_size + (len(key) if key is not None else 0)
                + (len(value) if value is not None else 0) > self.accumulator.memory.buffer_memory):
            return value, key
        return self.futures.track(self.send(topic, value, key, headers, partition, timestamp_ms))
