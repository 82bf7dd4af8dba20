# cython: language_level=3
"""Kafka's murmur2 partitioner hash and xxHash (XXH32 / XXH64) for Python callers."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer

cdef extern from "murmur2.h" nogil:
    int32_t kafka_murmur2 "fmq_kafka_murmur2"(const void* key, size_t n)

cdef extern from "xxhash.h" nogil:
    uint32_t xxh32 "fmq_xxh32"(const void* buf, size_t n, uint32_t seed)
    uint64_t xxh64 "fmq_xxh64"(const void* buf, size_t n, uint64_t seed)


cdef int32_t murmur2_nogil(const char* key, Py_ssize_t n) noexcept nogil:
    return kafka_murmur2(key, n)


cdef uint32_t xxh32_nogil(const char* buf, Py_ssize_t n, uint32_t seed) noexcept nogil:
    return xxh32(buf, n, seed)


cdef uint64_t xxh64_nogil(const char* buf, Py_ssize_t n, uint64_t seed) noexcept nogil:
    return xxh64(buf, n, seed)


def murmur2(data) -> int:
    """Kafka's murmur2 of a bytes-like key, as the signed 32-bit int the Java client computes."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return kafka_murmur2(view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def kafka_partition(key, int32_t partitions) -> int:
    """The partition Kafka's default partitioner picks for a non-null key: positive murmur2 mod count."""
    if partitions <= 0:
        raise ValueError("partitions must be positive")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def xxhash32(data, uint32_t seed=0) -> int:
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return xxh32(view.buf, view.len, seed)
    finally:
        PyBuffer_Release(&view)


def xxhash64(data, uint64_t seed=0) -> int:
    """XXH64 of a bytes-like object: fastmq's own partitioners hash keys with it."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return xxh64(view.buf, view.len, seed)
    finally:
        PyBuffer_Release(&view)
