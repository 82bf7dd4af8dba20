# cython: language_level=3
"""Wall-clock time for record timestamps, inline (a .pxd only: nothing to import at run time)."""
from libc.stdint cimport int64_t


cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clock_id, timespec* ts)
    int CLOCK_REALTIME


cdef inline int64_t now_ms() noexcept nogil:
    # Wall-clock epoch milliseconds: the timestamp of a record sent without one.
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000
