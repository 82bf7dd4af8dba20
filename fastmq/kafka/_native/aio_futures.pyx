# cython: language_level=3
"""The asyncio futures of records sent by AIOKafkaProducer.send() (fastmq.kafka.aio), settled on the loop a
partition's acknowledged prefix at a time.

Per partition only the oldest unsettled record carries a callback: when its batch completes, the I/O thread hands
one call to the loop (LoopHandoff), which settles every record of the partition that is done by then (a whole
batch, usually) and puts the callback on the next unsettled record. A callback per record would cost the I/O
thread a Python call per record and the loop a wake-up per call. A sender that never yields to the loop settles
what is done every SWEEP_EVERY records itself, so that unsettled futures do not pile up (holding memory and slowing
the garbage collector). A future nobody holds any more (fire and forget: the sender dropped it) is forgotten at the
next send to its partition instead of being kept, and settled, for nobody.

Why compiled: track() runs once a record, beside the asyncio.Future it makes. In Python it cost the loop 600-770
ns a record, half of it its own bytecode beside the future's 300 (asyncio's Future calls the loop's get_debug(), a
Python method, as it is made).
"""
cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject

from fastmq._native.producer_batch cimport FutureRecordMetadata

import asyncio

cdef object Future = asyncio.Future

cdef extern from "Python.h":
    Py_ssize_t Py_REFCNT(PyObject* obj)


cdef enum:
    SWEEP_EVERY_RECORDS = 1024      # kept unsettled records of a partition between a sender's own settle passes


cdef inline bint _unobserved(PyObject* future) noexcept:
    # Only the list slot it is read from holds the future: nobody can ever look at it.
    return Py_REFCNT(future) == 1


@cython.final
cdef class PartitionFutures:
    """One partition's unsettled records and their asyncio futures, in send order (fields: aio_futures.pxd); the
    settled front is dropped in bulk, not one entry at a time."""

    def __cinit__(self):
        self.records = []
        self.futures = []

    cdef Py_ssize_t count(self) noexcept:
        return PyList_GET_SIZE(self.records) - self.head

    cdef int drop_settled(self) except -1:
        # The settled front goes once it is half of the lists, so that each entry is moved O(1) times.
        if self.head and self.head * 2 >= PyList_GET_SIZE(self.records):
            del self.records[:self.head]
            del self.futures[:self.head]
            self.head = 0
        return 0


@cython.final
cdef class RecordFutures:
    """The asyncio futures of sent records (see the module docstring). handoff: the LoopHandoff of the loop the
    futures belong to."""

    SWEEP_EVERY = SWEEP_EVERY_RECORDS

    def __init__(self, handoff):
        self.handoff = handoff
        self.loop = handoff.loop
        self.partitions = {}
        self.progress = asyncio.Event()

    cpdef object track(self, FutureRecordMetadata record):
        """The asyncio future of a record just sent."""
        if record is None:
            raise TypeError("track() takes a record (fastmq FutureRecordMetadata), not None")
        cdef object future = Future(loop=self.loop)
        cdef object tp = record.batch.topic_partition
        cdef PartitionFutures pending = self.partitions.get(tp)
        cdef Py_ssize_t last
        if pending is None:
            pending = self.partitions[tp] = PartitionFutures()
        last = PyList_GET_SIZE(pending.futures) - 1
        if last >= pending.head and _unobserved(PyList_GET_ITEM(pending.futures, last)):
            # The sender dropped the previous record's future (fire and forget).
            pending.futures.pop()
            pending.records.pop()
        if not pending.watched:
            self._watch(record, tp, pending)
        elif pending.count() and not pending.count() % SWEEP_EVERY_RECORDS:
            # (Not when none is kept: a sender that drops its futures would sweep at every record.)
            self.sends_swept += 1
            self._settle_done(pending)
        pending.records.append(record)
        pending.futures.append(future)
        return future

    cdef int _watch(self, FutureRecordMetadata record, object tp, PartitionFutures pending) except -1:
        pending.watched = True
        record.add_both(self.handoff.submit, self._on_done, tp)
        return 0

    def _on_done(self, tp, outcome):
        # Loop thread, handed over by the I/O thread: the watched record is done; watch the next pending one.
        cdef PartitionFutures pending = self.partitions[tp]
        pending.watched = False
        self._settle_done(pending)
        if pending.count():
            self._watch(pending.records[pending.head], tp, pending)

    cdef int _settle_done(self, PartitionFutures pending) except -1:
        # Loop thread: settle the partition's records that are done, oldest first.
        cdef list records = pending.records, futures = pending.futures
        cdef Py_ssize_t end = PyList_GET_SIZE(records)
        cdef FutureRecordMetadata record
        while pending.head < end:
            record = records[pending.head]
            if not record.is_done:
                break
            if not _unobserved(PyList_GET_ITEM(futures, pending.head)):
                future = futures[pending.head]
                if not future.done():           # else cancelled
                    error = record.exception
                    if error is None:
                        future.set_result(record.value)
                    else:
                        future.set_exception(error)
                future = None
            records[pending.head] = None
            futures[pending.head] = None
            pending.head += 1
        pending.drop_settled()
        self.progress.set()
        return 0
