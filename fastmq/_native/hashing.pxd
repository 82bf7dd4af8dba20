# cython: language_level=3
"""Partitioner hashes over raw memory."""
from libc.stdint cimport int32_t, uint32_t, uint64_t

cdef extern from "murmur2.h" nogil:
    int32_t kafka_murmur2 "fmq_kafka_murmur2"(const void* key, size_t n)

cdef extern from "xxhash.h" nogil:
    uint32_t xxh32 "fmq_xxh32"(const void* buf, size_t n, uint32_t seed)
    uint64_t xxh64 "fmq_xxh64"(const void* buf, size_t n, uint64_t seed)
