# cython: language_level=3
"""Kafka's compression codecs with Kafka's framings, writing into / decompressing into buffer-core buffers."""
from fastmq._native.buffer cimport WriteBuffer

cdef enum:
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4
    CODEC_MASK = 0x07

cdef int compress_into(int codec, const char* data, Py_ssize_t size, WriteBuffer out, int level) except -1
cdef int decompress_into(int codec, const char* data, Py_ssize_t size, WriteBuffer out,
                         Py_ssize_t max_size) except -1
cdef int check_codec(int codec) except -1
