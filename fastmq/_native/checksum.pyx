# cython: language_level=3
"""Checksums over buffers; the GIL is released for inputs of GIL_RELEASE_THRESHOLD bytes and more."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer

cdef extern from "crc32c.h" nogil:
    uint32_t crc32c_update "fmq_crc32c"(uint32_t crc, const void* buf, size_t n)
    uint32_t crc32c_portable_update "fmq_crc32c_portable"(uint32_t crc, const void* buf, size_t n)
    int crc32c_hw_available "fmq_crc32c_hw_available"()

cdef extern from "crc32.h" nogil:
    uint32_t crc32_update "fmq_crc32"(uint32_t crc, const void* buf, size_t n)
    uint32_t crc32_portable_update "fmq_crc32_portable"(uint32_t crc, const void* buf, size_t n)
    int crc32_hw_available "fmq_crc32_hw_available"()

ctypedef uint32_t (*checksum_update)(uint32_t crc, const void* buf, size_t n) noexcept nogil


cdef uint32_t crc32c_nogil(uint32_t crc, const char* buf, Py_ssize_t n) noexcept nogil:
    return crc32c_update(crc, buf, n)


cdef uint32_t crc32_nogil(uint32_t crc, const char* buf, Py_ssize_t n) noexcept nogil:
    return crc32_update(crc, buf, n)


cdef inline uint32_t checksum_of(checksum_update update, const char* buf, Py_ssize_t n, uint32_t crc) noexcept:
    # `update` is a constant at every call site, so the compiler calls it directly.
    if n >= GIL_RELEASE_THRESHOLD:
        with nogil:
            return update(crc, buf, n)
    return update(crc, buf, n)


cdef uint32_t crc32c_of(const char* buf, Py_ssize_t n, uint32_t crc=0) noexcept:
    return checksum_of(crc32c_update, buf, n, crc)


cdef uint32_t crc32_of(const char* buf, Py_ssize_t n, uint32_t crc=0) noexcept:
    return checksum_of(crc32_update, buf, n, crc)


cdef object checksum_of_buffer(checksum_update update, data, uint32_t crc):
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return checksum_of(update, <const char*>view.buf, view.len, crc)
    finally:
        PyBuffer_Release(&view)


def crc32c(data, uint32_t crc=0) -> int:
    """CRC-32C (Castagnoli) of any bytes-like object, continuing from `crc`."""
    return checksum_of_buffer(crc32c_update, data, crc)


def crc32(data, uint32_t crc=0) -> int:
    """zlib's CRC-32 of any bytes-like object, continuing from `crc` (same results as zlib.crc32)."""
    return checksum_of_buffer(crc32_update, data, crc)


def crc32c_portable(data, uint32_t crc=0) -> int:
    """The table-driven CRC-32C, whatever the CPU has (for tests and benchmarks of the fallback)."""
    return checksum_of_buffer(crc32c_portable_update, data, crc)


def crc32_portable(data, uint32_t crc=0) -> int:
    """The table-driven CRC-32, whatever the CPU has (for tests and benchmarks of the fallback)."""
    return checksum_of_buffer(crc32_portable_update, data, crc)


def crc32c_uses_hardware() -> bool:
    """True when crc32c() runs on the SSE4.2 instruction."""
    return crc32c_hw_available() != 0


def crc32_uses_hardware() -> bool:
    """True when crc32() folds with the PCLMULQDQ instruction."""
    return crc32_hw_available() != 0
