# cython: language_level=3
"""CRC-32C (Kafka record batches) and CRC-32 (zlib's; RocketMQ bodies, TubeMQ payloads, legacy Kafka)
over raw memory. Chained like zlib.crc32: start from 0, pass the previous result to continue.

Other modules cimport these functions (Cython shares them through the module's C-API capsule), so the C
kernels are linked into this extension only."""
from libc.stdint cimport uint32_t

cdef enum:
    GIL_RELEASE_THRESHOLD = 65536   # below this many bytes, releasing the GIL costs more than it frees

cdef uint32_t crc32c_nogil(uint32_t crc, const char* buf, Py_ssize_t n) noexcept nogil
cdef uint32_t crc32_nogil(uint32_t crc, const char* buf, Py_ssize_t n) noexcept nogil
# The _of variants hold the GIL for small inputs and release it for large ones.
cdef uint32_t crc32c_of(const char* buf, Py_ssize_t n, uint32_t crc=*) noexcept
cdef uint32_t crc32_of(const char* buf, Py_ssize_t n, uint32_t crc=*) noexcept
