# cython: language_level=3
"""A producer's batches and the futures of its records.

A ProducerBatch holds one partition's records from the first append until the server's answer, in whatever
format its BatchBuilder writes (batch_builder.pxd). A FutureRecordMetadata is a view onto (batch, index): when
the batch is completed, every future of it is, with no per-record work until someone asks for a result.
"""
import threading
import time

cimport cython
from libc.stdint cimport int32_t, int64_t

from fastmq._native.arena cimport ArenaBlock

cdef object _monotonic = time.monotonic
cdef dict STATE_NAMES = {BATCH_OPEN: "open", BATCH_CLOSED: "closed", BATCH_IN_FLIGHT: "in flight",
                          BATCH_DONE: "done", BATCH_SPLIT: "split"}


@cython.final
cdef class ProducerBatch:
    """One batch of one partition, from its first append until its futures are resolved."""

    def __cinit__(self):
        self.base_sequence = -1
        self.base_offset = -1
        self.log_append_time = -1

    @property
    def is_done(self):
        return self.state == BATCH_DONE

    @property
    def size_in_bytes(self):
        return len(self.payload) if self.payload is not None else self.encoded_size

    @property
    def uncompressed_size(self):
        return self.builder.uncompressed_size()

    cdef Py_ssize_t append(self, int64_t timestamp, const char* key, Py_ssize_t key_len, const char* value,
                           Py_ssize_t value_len, object headers, bint force) except -2:
        # Encodes the next record; -1 (nothing changed) when it does not fit and `force` is not set.
        cdef Py_ssize_t size = self.builder.append(self.record_count, timestamp, key, key_len, value, value_len,
                                                   headers, force)
        if size >= 0:
            self.record_count += 1
            self.encoded_size = size
        return size

    cdef int finish(self) except -1:
        # Compresses and checksums (the codecs and the CRC release the GIL on large inputs). The block of an
        # uncompressed payload keeps only the pages it filled (ArenaBlock.trim): it waits for the broker.
        if self.payload is None:
            self.payload = self.builder.finish()
            if type(self.payload) is ArenaBlock:
                (<ArenaBlock>self.payload).trim()
        return 0

    cdef int release_storage(self) except -1:
        # Once the batch is done: it lets go of the payload and of the memory its records were encoded into, which
        # return to the arena once no queued write refers to them any more.
        self.payload = None
        return self.builder.release_storage()

    cdef int resolve(self) except -1:
        # Runs the callbacks registered on this batch's futures, in record order, then wakes waiters.
        cdef list callbacks = self.callbacks
        self.callbacks = None
        if self.done_event is not None:
            self.done_event.set()
        if not callbacks:
            return 0
        callbacks.sort(key=_callback_order)
        for future, function, on_success, on_error in callbacks:
            _run_callback(<FutureRecordMetadata>future, function, on_success, on_error)
        return 0

    def leaves(self):
        """The batches that now hold this batch's records: itself, or its split children's leaves."""
        if self.state != BATCH_SPLIT:
            return [self]
        return [leaf for _, child in self.children for leaf in child.leaves()]

    def _wait(self, timeout):
        # Creating the event and checking the state happen under the GIL without Python code between
        # them, so a completion cannot slip in unseen.
        if self.state == BATCH_DONE or self.state == BATCH_SPLIT:
            return True
        if self.done_event is None:
            self.done_event = threading.Event()
        return self.done_event.wait(timeout)

    def __repr__(self):
        return (f"ProducerBatch({self.topic_partition}, records={self.record_count}, "
                f"state={STATE_NAMES.get(self.state, self.state)}, attempts={self.attempts})")


def _callback_order(entry):
    return (<FutureRecordMetadata>entry[0]).index


cdef _log_callback_error():
    import logging
    logging.getLogger("fastmq.producer").exception("Error processing a send callback")


cdef _run_callback(FutureRecordMetadata future, function, bint on_success, bint on_error):
    error = future.batch.error
    try:
        if error is None and on_success:
            function(future.value)
        elif error is not None and on_error:
            function(error)
    except Exception:
        _log_callback_error()


@cython.freelist(1024)
@cython.final
cdef class FutureRecordMetadata:
    """The result of one send(), resolved with its batch (the API of kafka-python's FutureRecordMetadata)."""

    cdef ProducerBatch _settled_batch(self):
        # Follows splits down to the batch that now holds the record.
        cdef ProducerBatch batch = self.batch
        cdef int32_t first
        while batch.state == BATCH_SPLIT:
            for first, child in reversed(batch.children):
                if self.index >= first:
                    self.index -= first
                    self.batch = batch = child
                    break
        return batch

    @property
    def topic_partition(self):
        """Where the record is going (known as soon as send() returns)."""
        return self.batch.topic_partition

    @property
    def is_done(self):
        return self._settled_batch().state == BATCH_DONE

    def succeeded(self):
        cdef ProducerBatch batch = self._settled_batch()
        return batch.state == BATCH_DONE and batch.error is None

    def failed(self):
        cdef ProducerBatch batch = self._settled_batch()
        return batch.state == BATCH_DONE and batch.error is not None

    def retriable(self):
        cdef ProducerBatch batch = self._settled_batch()
        return batch.state == BATCH_DONE and getattr(batch.error, "retriable", False)

    @property
    def exception(self):
        cdef ProducerBatch batch = self._settled_batch()
        return batch.error if batch.state == BATCH_DONE else None

    @property
    def value(self):
        """The record's metadata (made by the batch format) once it is acknowledged, else None."""
        cdef ProducerBatch batch = self._settled_batch()
        if batch.state != BATCH_DONE or batch.error is not None:
            return None
        if self._metadata is None:
            self._metadata = batch.format.metadata(
                batch.topic_partition, batch.base_offset + self.index if batch.base_offset >= 0 else -1,
                batch.log_append_time if batch.log_append_time >= 0 else self.timestamp,
                self.key_size, self.value_size, self.header_size)
        return self._metadata

    def get(self, timeout=None):
        """Wait up to `timeout` seconds for the acknowledgement; returns the record's metadata."""
        cdef ProducerBatch batch
        deadline = None if timeout is None else _monotonic() + timeout
        while True:
            batch = self._settled_batch()
            if batch.state == BATCH_DONE:
                break
            remaining = None if deadline is None else deadline - _monotonic()
            if remaining is not None and remaining <= 0 or not batch._wait(remaining):
                if batch.state != BATCH_DONE and batch.state != BATCH_SPLIT:
                    raise batch.format.timeout_error(f"Timeout after waiting for {timeout} secs.")
        if batch.error is not None:
            raise batch.error
        return self.value

    def _register(self, function, bint on_success, bint on_error):
        cdef ProducerBatch batch = self._settled_batch()
        if batch.state == BATCH_DONE:
            _run_callback(self, function, on_success, on_error)
            return self
        if batch.callbacks is None:
            batch.callbacks = []
        batch.callbacks.append((self, function, on_success, on_error))
        return self

    def add_callback(self, f, *args, **kwargs):
        """Call f(*args, record_metadata, **kwargs) once the record is acknowledged."""
        return self._register(_bind(f, args, kwargs), True, False)

    def add_errback(self, f, *args, **kwargs):
        """Call f(*args, exception, **kwargs) if the record fails."""
        return self._register(_bind(f, args, kwargs), False, True)

    def add_both(self, f, *args, **kwargs):
        """Call f(*args, metadata_or_exception, **kwargs) either way."""
        return self._register(_bind(f, args, kwargs), True, True)

    def __repr__(self):
        return f"FutureRecordMetadata({self.batch.topic_partition}, index={self.index}, done={self.is_done})"


cdef object _bind(f, tuple args, dict kwargs):
    if args or kwargs:
        import functools
        return functools.partial(f, *args, **kwargs)
    return f
