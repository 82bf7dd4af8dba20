# cython: language_level=3
"""The compiled interpreter of Kafka message schemas (see kafka_protocol.pyx for the wire format).

fastmq.kafka.protocol compiles every (message, version) into a tree of StructCodecs: one per struct, each a
flat C array of FieldOps in wire order plus the tagged fields sorted by tag. encode_struct / decode_struct
walk those arrays, reading and writing the slots of the generated message classes directly by offset.
"""
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport int32_t

from fastmq._native.buffer cimport ReadCursor, WriteBuffer

cdef enum:
    # Wire types of fields and of array elements.
    K_BOOL = 1
    K_INT8 = 2
    K_INT16 = 3
    K_UINT16 = 4
    K_INT32 = 5
    K_UINT32 = 6
    K_INT64 = 7
    K_FLOAT64 = 8
    K_UUID = 9
    K_STRING = 10
    K_BYTES = 11
    K_RECORDS = 12
    K_STRUCT = 13
    K_ARRAY = 14

cdef enum:
    # How a field absent from the wire gets its value.
    FILL_VALUE = 0      # share the default object (immutable: int, str, None, bytes, UUID)
    FILL_LIST = 1       # a new empty list
    FILL_STRUCT = 2     # a new instance of the field's struct class, all defaults

cdef enum:
    MAX_TAGGED_FIELDS = 64   # tagged fields of one struct; the encoder keeps their presence in a bit mask


ctypedef struct FieldSlot:
    Py_ssize_t offset        # byte offset of the field's slot inside an instance
    int fill                 # FILL_* mode
    PyObject* default        # FILL_VALUE: the value; FILL_STRUCT: the struct class (owned by FieldTable.keep)


ctypedef struct FieldOp:
    int kind                 # K_* of the field
    int elem_kind            # K_* of the elements when kind is K_ARRAY
    bint nullable            # null is allowed in this version
    int32_t tag              # tag number of a tagged field, -1 otherwise
    Py_ssize_t offset        # byte offset of the field's slot inside an instance
    Py_ssize_t elem_min_size # fewest bytes one array element can take (bounds forged counts)
    PyObject* sub            # StructCodec of a struct field or of struct elements, else NULL (owned by keep)
    PyObject* omit_value     # tagged fields: not written when equal to this (owned by keep)
    bint omit_if_empty       # tagged arrays: not written when empty (their default is a new empty list)
    PyObject* name           # the field's name, for error messages (owned by keep)


cdef class FieldTable:
    cdef FieldSlot* slots    # one per field of the class, in declaration order
    cdef Py_ssize_t count    # number of slots
    cdef readonly tuple names  # field names, in declaration order
    cdef dict index          # field name -> position in slots
    cdef list keep           # owns the objects the slots point to


cdef class StructCodec:
    cdef readonly object cls # the generated class decoded instances belong to
    cdef PyTypeObject* type_ptr  # cls, for allocation and type checks
    cdef FieldTable table    # cls's fields, to fill the ones the wire did not carry
    cdef FieldOp* ops        # regular fields, in wire order
    cdef Py_ssize_t n_ops    # length of ops
    cdef FieldOp* tagged     # tagged fields, sorted by tag
    cdef Py_ssize_t n_tagged # length of tagged
    cdef bint flexible       # compact encodings and a tagged-field section (KIP-482)
    cdef readonly Py_ssize_t min_size  # fewest bytes an encoded instance takes
    cdef readonly str label  # e.g. "FetchResponse v12", for error messages
    cdef list keep           # owns the objects the ops point to


cdef class DecodeContext:
    cdef object source       # the object whose bytes are decoded (record views keep it alive)
    cdef Py_buffer buffer    # source's bytes, held for the duration of the decode call
    cdef bint held           # buffer was acquired and must be released
    cdef object view         # byte memoryview of source, made for the first records field

    cdef int open(self, object data, ReadCursor* cur) except -1
    cdef object records_view(self, const char* data, Py_ssize_t size)


cdef int encode_struct(StructCodec codec, object obj, WriteBuffer out) except -1
cdef object decode_struct(StructCodec codec, ReadCursor* cur, DecodeContext ctx)

# The value codecs, for the compiled Produce path (fastmq/kafka/_native/produce.pyx) to write and read the same
# bytes as the interpreter.
cdef int encode_value(int kind, bint nullable, PyObject* sub, object value, WriteBuffer out, bint compact) except -1
cdef int encode_bytes_like(object value, bint nullable, WriteBuffer out, bint compact) except -1
cdef Py_ssize_t read_length(ReadCursor* cur, bint compact, bint wide) except -2
cdef int skip_tagged_fields(ReadCursor* cur) except -1
