# cython: language_level=3
"""Partitioner and checksum hashes over raw memory, shared through this module's C-API capsule (the C
kernels are linked into this extension only)."""
from libc.stdint cimport int32_t, uint32_t, uint64_t

cdef int32_t murmur2_nogil(const char* key, Py_ssize_t n) noexcept nogil
cdef uint32_t xxh32_nogil(const char* buf, Py_ssize_t n, uint32_t seed) noexcept nogil
cdef uint64_t xxh64_nogil(const char* buf, Py_ssize_t n, uint64_t seed) noexcept nogil
