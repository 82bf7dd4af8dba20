# cython: language_level=3
"""CRC-32C (Kafka record batches) and CRC-32 (zlib's; RocketMQ bodies, TubeMQ payloads, legacy Kafka)
over raw memory. Both are chained like zlib.crc32: start from 0, pass the previous result to continue."""
from libc.stdint cimport uint32_t

cdef extern from "crc32c.h" nogil:
    uint32_t crc32c_update "fmq_crc32c"(uint32_t crc, const void* buf, size_t n)
    uint32_t crc32c_portable_update "fmq_crc32c_portable"(uint32_t crc, const void* buf, size_t n)
    int crc32c_hw_available "fmq_crc32c_hw_available"()

cdef extern from "crc32.h" nogil:
    uint32_t crc32_update "fmq_crc32"(uint32_t crc, const void* buf, size_t n)

cdef enum:
    GIL_RELEASE_THRESHOLD = 65536   # below this many bytes, releasing the GIL costs more than it frees

cdef uint32_t crc32c_of(const char* buf, Py_ssize_t n, uint32_t crc=*) noexcept
cdef uint32_t crc32_of(const char* buf, Py_ssize_t n, uint32_t crc=*) noexcept
