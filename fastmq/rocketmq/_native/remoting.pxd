# cython: language_level=3
"""The remoting frame writer's steps, for encoders that write a whole request into one buffer (messages.pyx's
SendEncoder): begin_frame, begin_binary_header, put_ext* per extFields entry, end_binary_header, then the body,
then end_frame. And the decoder's shortcut for callers that read only a response's code and a few extFields
(binary_ext_fields: messages.pyx's send results). The layouts are documented at the top of remoting.pyx."""
from libc.stdint cimport int64_t

from fastmq._native.buffer cimport WriteBuffer

cdef int begin_frame(WriteBuffer out) except -1
cdef Py_ssize_t begin_binary_header(WriteBuffer out, int code, int opaque, int flag, int language, int version,
                                    str remark) except -1
cdef int put_ext(WriteBuffer out, const char* key, Py_ssize_t key_length, const char* value,
                 Py_ssize_t value_length) except -1
cdef int put_ext_str(WriteBuffer out, const char* key, Py_ssize_t key_length, str value) except -1
cdef int put_ext_int(WriteBuffer out, const char* key, Py_ssize_t key_length, int64_t value) except -1
cdef int end_binary_header(WriteBuffer out, Py_ssize_t ext_start, int serialize_type) except -1
cdef bytes end_frame(WriteBuffer out)

cdef struct ExtValue:
    const char* value               # NULL: the field is absent
    Py_ssize_t length

cdef int binary_ext_fields(const char* p, Py_ssize_t n, int* code, const char** names, ExtValue* values,
                           int count) except -1
