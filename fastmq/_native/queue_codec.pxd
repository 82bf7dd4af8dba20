# cython: language_level=3
"""ConsumeQueue units of the RocketMQ 4.x store (see queue_codec.pyx for the layout)."""
cimport cython
from libc.stdint cimport int32_t, int64_t
from cpython cimport array

cdef enum:
    CQ_STORE_UNIT_SIZE = 20              # [commitlog offset i64][size i32][tags code i64]
    CQ_BLANK_UNIT_SIZE = 0x7FFFFFFF      # size of the filler units written before a queue's first real unit


@cython.final
cdef class QueueUnits:
    cdef readonly int32_t queue_id        # the queue the units come from (gather checks each record's QUEUEID)
    cdef array.array _commitlog_offsets   # 'q': where each selected record starts in the CommitLog
    cdef array.array _sizes               # 'i': each selected record's size
    cdef array.array _queue_offsets       # 'q': each selected unit's logical offset in its queue
    cdef readonly Py_ssize_t count        # units selected so far
    cdef readonly Py_ssize_t capacity     # most units this batch may hold
    cdef readonly int64_t total_bytes     # sum of the selected sizes
    cdef public int64_t next_offset       # logical offset where the next scan should start
    cdef bint _trimmed                    # arrays shrunk to `count`; no more scanning

    cdef int _trim(self) except -1
