# cython: language_level=3
"""The items of a bulk send, read in place (see ArrowBinary)."""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport int32_t, int64_t


@cython.final
cdef class ArrowBinary:
    """Read access to the items of a bulk send: a Python sequence of bytes-like objects, or an Arrow binary/
    string column (pyarrow Array or ChunkedArray of one chunk), whose validity, offsets and data buffers are
    read in place: no Python object per item."""

    @staticmethod
    cdef ArrowBinary of(object source, str what):
        cdef ArrowBinary column = ArrowBinary.__new__(ArrowBinary)
        if hasattr(source, "chunks") and hasattr(source, "num_chunks"):      # pyarrow ChunkedArray
            if source.num_chunks != 1:
                source = source.combine_chunks()
            else:
                source = source.chunk(0)
        if hasattr(source, "buffers") and hasattr(source, "type"):
            column._open_arrow(source, what)
        else:
            column.items = source if isinstance(source, list) else list(source)
            column.length = len(column.items)
        return column

    cdef int _open_arrow(self, array, str what) except -1:
        import pyarrow as pa

        kind = array.type
        if pa.types.is_large_binary(kind) or pa.types.is_large_string(kind):
            self.large = True
        elif not (pa.types.is_binary(kind) or pa.types.is_string(kind)):
            raise TypeError(f"{what}: an Arrow column of binary or string type is needed, not {kind}")
        validity, offsets, data = array.buffers()
        self.owner = array
        self.arrow = True
        self.length = len(array)
        self.array_offset = array.offset
        PyObject_GetBuffer(offsets, &self.offsets_view, PyBUF_SIMPLE)
        if data is None:
            data = pa.py_buffer(b"")
        PyObject_GetBuffer(data, &self.data_view, PyBUF_SIMPLE)
        if validity is not None and array.null_count:
            PyObject_GetBuffer(validity, &self.validity_view, PyBUF_SIMPLE)
            self.has_validity = True
        return 0

    def __dealloc__(self):
        if self.arrow:
            PyBuffer_Release(&self.offsets_view)
            PyBuffer_Release(&self.data_view)
            if self.has_validity:
                PyBuffer_Release(&self.validity_view)

    cdef const char* item(self, Py_ssize_t i, Py_ssize_t* length) except? NULL:
        # Item i (NULL with length -1 for null). Python items must be bytes-like.
        cdef Py_ssize_t at, start, end
        if self.arrow:
            at = i + self.array_offset
            if self.has_validity and not ((<const unsigned char*>self.validity_view.buf)[at >> 3] >> (at & 7)) & 1:
                length[0] = -1
                return NULL
            if self.large:
                start = (<const int64_t*>self.offsets_view.buf)[at]
                end = (<const int64_t*>self.offsets_view.buf)[at + 1]
            else:
                start = (<const int32_t*>self.offsets_view.buf)[at]
                end = (<const int32_t*>self.offsets_view.buf)[at + 1]
            if start < 0 or end < start or end > self.data_view.len:
                raise ValueError("the Arrow column's offsets run outside its data buffer")
            length[0] = end - start
            return <const char*>self.data_view.buf + start
        obj = self.items[i]
        if obj is None:
            length[0] = -1
            return NULL
        if PyBytes_CheckExact(obj):
            length[0] = PyBytes_GET_SIZE(obj)
            return PyBytes_AS_STRING(obj)
        if PyUnicode_Check(obj):
            raise TypeError("bulk send items must be bytes-like, not str (encode them first)")
        # Other buffer objects (bytearray, memoryview) are rare here: a copy keeps the pointer valid.
        self.scratch = bytes(obj)
        length[0] = PyBytes_GET_SIZE(self.scratch)
        return PyBytes_AS_STRING(self.scratch)
