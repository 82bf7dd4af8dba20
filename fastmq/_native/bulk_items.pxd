# cython: language_level=3
"""The items of a bulk send, read in place (see bulk_items.pyx)."""
cimport cython

@cython.final
cdef class ArrowBinary:
    cdef Py_ssize_t length          # items
    cdef list items                 # the Python sequence (None for an Arrow column)
    cdef Py_buffer offsets_view     # Arrow: the offsets buffer (int32, or int64 for large_binary)
    cdef Py_buffer data_view        # Arrow: the data buffer
    cdef Py_buffer validity_view    # Arrow: the validity bitmap, when there is one
    cdef bint arrow                 # an Arrow column
    cdef bint large                 # 64-bit offsets
    cdef bint has_validity          # validity_view holds a bitmap
    cdef Py_ssize_t array_offset    # the array's offset into its buffers (slices)
    cdef object owner               # keeps the Arrow array alive
    cdef bytes scratch              # a copy of the last non-bytes Python item (valid until the next item)

    @staticmethod
    cdef ArrowBinary of(object source, str what)
    cdef int _open_arrow(self, array, str what) except -1
    cdef const char* item(self, Py_ssize_t i, Py_ssize_t* length) except? NULL
