# cython: language_level=3
"""Kafka's murmur2 partitioner hash and xxHash (XXH32 / XXH64) for Python callers."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer


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
