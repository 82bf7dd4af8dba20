# cython: language_level=3
"""Python access to the buffer core's zigzag varints, with kafka-python's kafka.record.util signatures."""
from libc.stdint cimport int64_t, uint8_t, uint64_t

from fastmq._native.buffer cimport put_varint, varint_size, zigzag64


def encode_varint(int64_t value, write) -> int:
    """Zigzag-encode `value`, calling write(byte) for each byte; returns the number of bytes."""
    cdef char scratch[10]
    cdef char* end = put_varint(scratch, value)
    cdef Py_ssize_t i, n = end - scratch
    for i in range(n):
        write(<uint8_t>scratch[i])
    return n


def size_of_varint(int64_t value) -> int:
    """Bytes the zigzag varint of `value` takes."""
    return varint_size(value)


def decode_varint(buffer, Py_ssize_t pos=0) -> tuple:
    """Decode the zigzag varint at buffer[pos]; returns (value, position after it).

    As kafka-python's: IndexError when the buffer ends first, ValueError past 64 bits.
    """
    cdef const uint8_t[:] data = memoryview(buffer).cast("B") if not isinstance(buffer, bytes) else buffer
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef uint8_t b
    cdef Py_ssize_t n = data.shape[0]
    while True:
        if pos < 0 or pos >= n:
            raise IndexError("varint runs past the end of the buffer")
        b = data[pos]
        pos += 1
        raw |= <uint64_t>(b & 0x7F) << shift
        if not (b & 0x80):
            return <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1), pos
        shift += 7
        if shift >= 64:
            raise ValueError("Out of int64 range")
