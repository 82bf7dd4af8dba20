# cython: language_level=3
"""Encodes Kafka protocol messages from Python objects and decodes them back, by interpreting compiled schemas.

Wire format (Apache Kafka protocol guide, KIP-482 for the flexible versions); integers are big-endian:

  request frame   int32 size | request header | body
                  header v1: int16 api_key | int16 api_version | int32 correlation_id | client_id
                             (client_id: nullable string with an int16 length, also in v2)
                  header v2: v1 | tagged-field section                      (flexible API versions)
  response frame  int32 size | response header | body
                  header v0: int32 correlation_id
                  header v1: v0 | tagged-field section    (flexible versions; never for ApiVersions)
  `size` counts the bytes after it. Encoders write it; decoders take frames without it (the frame
  splitter removed it).

  body fields, classic | flexible (compact) versions:
    bool, int8 1 byte; int16, uint16 2; int32, uint32 4; int64, float64 (IEEE 754) 8; uuid 16
    string          int16 length, -1 = null      | uvarint(length + 1), 0 = null; then UTF-8 bytes
    bytes, records  int32 length, -1 = null      | uvarint(length + 1), 0 = null; then the bytes
    array           int32 count, -1 = null       | uvarint(count + 1), 0 = null; then the elements
    struct          its fields in order; in flexible versions followed by a tagged-field section
    tagged-field section: uvarint count, then per field uvarint tag | uvarint size | size bytes of value
      (tagged values use the compact encodings; unknown tags are skipped)

Design: fastmq.kafka.protocol parses the declarative schemas, generates one __slots__ class per struct
(subclasses of Struct below) and compiles each (message, version) into StructCodecs: flat arrays of FieldOps
with the wire type, nullability, slot offset and nested codec of every field present in that version. The
interpreter reads and writes instance slots by offset, so decoding costs an allocation per struct and a
conversion per value, with no attribute lookups; fields a version lacks get their schema defaults.

Decoding never trusts the input: every read is bounds-checked by the cursor (TruncatedError), array counts are
checked against the bytes left before any list is allocated, and nulls, negative lengths, bad UTF-8 and
tagged fields whose announced size disagrees with their content raise CorruptDataError. records fields become
memoryviews of the input (no copy; they keep the input alive). Encoding checks every value (type, integer
range, null) and raises EncodeError naming the field's path.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.float cimport PyFloat_AsDouble, PyFloat_Check, PyFloat_FromDouble
from cpython.list cimport PyList_Check, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_Check
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyObject_RichCompareBool, PyObject_TypeCheck, PyTypeObject, Py_EQ
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_Check
from cpython.unicode cimport PyUnicode_Check, PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memmove

from fastmq._native.buffer cimport (
    ReadCursor, WriteBuffer, cursor_i8, cursor_i16, cursor_i32, cursor_i64, cursor_init, cursor_remaining,
    cursor_split, cursor_take, cursor_u16, cursor_u32, cursor_uvarint32, load_u64be, put_uvarint,
    store_i32be, store_u64be, uvarint_size,
)

import uuid as _uuid

from fastmq.errors import CorruptDataError, ProtocolError, TruncatedError
from fastmq.kafka.errors import EncodeError

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    PyTypeObject PyMemberDescr_Type
    PyObject* PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems) except NULL
    object PyMemoryView_FromObject(object obj)
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    object PySequence_GetSlice(object seq, Py_ssize_t start, Py_ssize_t stop)
    object PySequence_Fast(object seq, const char* message)
    Py_ssize_t PySequence_Fast_GET_SIZE(object seq)
    PyObject* PySequence_Fast_GET_ITEM(object seq, Py_ssize_t i)

cdef enum:
    MEMBER_OBJECT_EX = 16    # PyMemberDef.type of a __slots__ entry (T_OBJECT_EX)

cdef object UUID = _uuid.UUID
cdef object ZERO_UUID = _uuid.UUID(int=0)
cdef object UUID_SAFETY_UNKNOWN = _uuid.SafeUUID.unknown
cdef object object_setattr = object.__setattr__
cdef object int_from_bytes = int.from_bytes

KINDS = {
    "bool": K_BOOL, "int8": K_INT8, "int16": K_INT16, "uint16": K_UINT16, "int32": K_INT32,
    "uint32": K_UINT32, "int64": K_INT64, "float64": K_FLOAT64, "uuid": K_UUID, "string": K_STRING,
    "bytes": K_BYTES, "records": K_RECORDS, "struct": K_STRUCT, "array": K_ARRAY,
}
"""Wire type numbers of the schema types, for the schema compiler."""

FILL_MODES = {"value": FILL_VALUE, "list": FILL_LIST, "struct": FILL_STRUCT}


# ---------------------------------------------------------------------------------------------------------
# Slots of the generated classes
# ---------------------------------------------------------------------------------------------------------

cdef inline PyObject** slot_address(object obj, Py_ssize_t offset) noexcept:
    return <PyObject**>((<char*><PyObject*>obj) + offset)


cdef inline void slot_store(object obj, Py_ssize_t offset, object value) noexcept:
    # Takes a new reference to value and drops the one to the slot's previous value (tagged fields may repeat).
    cdef PyObject** slot = slot_address(obj, offset)
    cdef PyObject* previous = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    Py_XDECREF(previous)


cdef inline object new_instance(PyTypeObject* type_ptr):
    # A zeroed instance (every slot NULL); the caller fills all of them before anyone else sees it.
    cdef PyObject* raw = PyType_GenericAlloc(type_ptr, 0)
    cdef object obj = <object>raw
    Py_DECREF(obj)
    return obj


cdef object default_value(const FieldSlot* slot):
    if slot.fill == FILL_VALUE:
        return <object>slot.default
    if slot.fill == FILL_LIST:
        return []
    return new_default_struct(<object>slot.default)


cdef object new_default_struct(object cls):
    cdef FieldTable table = cls._field_table
    cdef object obj = new_instance(<PyTypeObject*>cls)
    cdef Py_ssize_t i
    for i in range(table.count):
        slot_store(obj, table.slots[i].offset, default_value(&table.slots[i]))
    return obj


cdef inline int fill_missing(FieldTable table, object obj) except -1:
    # Fields the wire did not carry (absent in this version, or tagged and omitted) get their defaults.
    cdef Py_ssize_t i
    for i in range(table.count):
        if slot_address(obj, table.slots[i].offset)[0] == NULL:
            slot_store(obj, table.slots[i].offset, default_value(&table.slots[i]))
    return 0


@cython.final
cdef class FieldTable:
    """Where each field of one generated class lives in its instances, and how to default it."""

    def __cinit__(self):
        self.slots = NULL
        self.count = 0

    def __dealloc__(self):
        PyMem_Free(self.slots)

    def __init__(self, cls, fields):
        """fields: (name, default, fill mode name) per field; the class's __slots__ must hold the names."""
        cdef Py_ssize_t i
        cdef object descriptor
        cdef PyMemberDef* member
        self.keep = []
        self.names = tuple(name for name, _, _ in fields)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.slots = <FieldSlot*>PyMem_Malloc(max(1, len(fields)) * sizeof(FieldSlot))
        if self.slots == NULL:
            raise MemoryError()
        for i, (name, default, fill) in enumerate(fields):
            descriptor = cls.__dict__.get(name)
            if descriptor is None or type(descriptor) is not <object>&PyMemberDescr_Type:
                raise TypeError(f"{cls.__name__}.{name} is not a slot of the class itself")
            member = (<PyMemberDescrObject*><PyObject*>descriptor).d_member
            if member.type != MEMBER_OBJECT_EX:
                raise TypeError(f"{cls.__name__}.{name} is not an object slot")
            self.slots[i].offset = member.offset
            self.slots[i].fill = FILL_MODES[fill]
            self.keep.append(default)
            self.slots[i].default = <PyObject*>default
            self.count = i + 1


cdef object MISSING = object()


@cython.auto_pickle(False)
cdef class Struct:
    """Base class of the generated message classes.

    Instances are plain mutable records: one slot per schema field, keyword construction with the schema's
    defaults for every field not given, equality by class and field values.
    """

    def __init__(self, **fields):
        cdef FieldTable table = type(self)._field_table
        cdef Py_ssize_t i, used = 0
        cdef object value
        for i in range(table.count):
            value = fields.get(table.names[i], MISSING)
            if value is MISSING:
                value = default_value(&table.slots[i])
            else:
                used += 1
            slot_store(self, table.slots[i].offset, value)
        if used != len(fields):
            unknown = sorted(set(fields) - set(table.names))
            raise TypeError(f"{type(self).__name__}() got unexpected field(s) {', '.join(unknown)}; "
                            f"its fields are {', '.join(table.names)}")

    def __repr__(self):
        cdef FieldTable table = type(self)._field_table
        cdef Py_ssize_t i
        cdef PyObject* value
        parts = []
        for i in range(table.count):
            value = slot_address(self, table.slots[i].offset)[0]
            if value == NULL:
                continue
            if isinstance(<object>value, memoryview):
                parts.append(f"{table.names[i]}=<{len(<object>value)} bytes>")
            else:
                parts.append(f"{table.names[i]}={<object>value!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def __eq__(self, other):
        cdef FieldTable table
        cdef Py_ssize_t i
        cdef PyObject* mine
        cdef PyObject* theirs
        if type(other) is not type(self):
            return NotImplemented
        table = type(self)._field_table
        for i in range(table.count):
            mine = slot_address(self, table.slots[i].offset)[0]
            theirs = slot_address(other, table.slots[i].offset)[0]
            if mine == theirs:
                continue
            if mine == NULL or theirs == NULL or not PyObject_RichCompareBool(<object>mine, <object>theirs, Py_EQ):
                return False
        return True

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # mutable

    def __reduce__(self):
        # copy, deepcopy and pickle rebuild through the keyword constructor (the slots are the class's, not
        # this base's, so the default reduction would lose them).
        cdef FieldTable table = type(self)._field_table
        return _restore_struct, (type(self), {name: getattr(self, name) for name in table.names})

    def to_dict(self) -> dict:
        """The fields as a dict, nested structs included (for logging and tests)."""
        cdef FieldTable table = type(self)._field_table
        return {name: _plain(getattr(self, name)) for name in table.names}


def _restore_struct(cls, dict fields):
    return cls(**fields)


cdef object _plain(object value):
    if isinstance(value, Struct):
        return value.to_dict()
    if PyList_Check(value):
        return [_plain(item) for item in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


# ---------------------------------------------------------------------------------------------------------
# Compiled codecs
# ---------------------------------------------------------------------------------------------------------

@cython.final
cdef class StructCodec:
    """The program of one struct in one message version: its fields in wire order, then its tagged fields."""

    def __cinit__(self):
        self.ops = NULL
        self.tagged = NULL
        self.n_ops = 0
        self.n_tagged = 0

    def __dealloc__(self):
        PyMem_Free(self.ops)
        PyMem_Free(self.tagged)

    def __init__(self, cls, str label, bint flexible, regular, tagged, Py_ssize_t min_size):
        """regular / tagged: one tuple per field present in the version:
        (name, kind, elem_kind, nullable, tag, elem_min_size, sub_codec or None, omit_value, omit_if_empty)."""
        if not (isinstance(cls, type) and issubclass(cls, Struct)):
            raise TypeError("cls must be a generated Struct class")
        if len(tagged) > MAX_TAGGED_FIELDS:
            raise ValueError(f"{label}: more than {MAX_TAGGED_FIELDS} tagged fields")
        self.cls = cls
        self.type_ptr = <PyTypeObject*>cls
        self.table = cls._field_table
        self.label = label
        self.flexible = flexible
        self.min_size = min_size
        self.keep = []
        self.ops = build_ops(self, regular)
        self.n_ops = len(regular)
        self.tagged = build_ops(self, tagged)
        self.n_tagged = len(tagged)

    def __repr__(self):
        return f"<StructCodec {self.label}: {self.n_ops} fields, {self.n_tagged} tagged>"


# Lays out the field specs of StructCodec.__init__ as a C array.
cdef FieldOp* build_ops(StructCodec codec, list specs) except NULL:
    cdef FieldOp* ops = <FieldOp*>PyMem_Malloc(max(1, len(specs)) * sizeof(FieldOp))
    cdef FieldOp* op
    cdef Py_ssize_t i
    if ops == NULL:
        raise MemoryError()
    for i, (name, kind, elem_kind, nullable, tag, elem_min_size, sub, omit_value, omit_if_empty) in enumerate(specs):
        op = &ops[i]
        op.kind = kind
        op.elem_kind = elem_kind
        op.nullable = nullable
        op.tag = tag
        op.offset = codec.table.slots[codec.table.index[name]].offset
        op.elem_min_size = elem_min_size
        if (kind == K_STRUCT or elem_kind == K_STRUCT) and not isinstance(sub, StructCodec):
            PyMem_Free(ops)
            raise TypeError(f"{codec.label}.{name}: struct fields need a StructCodec")
        if kind == K_ARRAY and elem_min_size < 1:
            PyMem_Free(ops)
            raise ValueError(f"{codec.label}.{name}: array elements must take at least one byte")
        codec.keep.extend((name, sub, omit_value))
        op.sub = <PyObject*>sub if sub is not None else NULL
        op.omit_value = <PyObject*>omit_value
        op.omit_if_empty = omit_if_empty
        op.name = <PyObject*>name
    return ops


@cython.final
@cython.freelist(8)
cdef class DecodeContext:
    """The input of one decode call: holds its buffer while decoding; records fields become views into it."""

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.buffer)

    cdef int open(self, object data, ReadCursor* cur) except -1:
        try:
            PyObject_GetBuffer(data, &self.buffer, PyBUF_SIMPLE)
        except TypeError:
            raise TypeError(f"needs a bytes-like object, got {type(data).__name__}") from None
        self.held = True
        self.source = data
        cursor_init(cur, <const char*>self.buffer.buf, self.buffer.len)
        return 0

    cdef object records_view(self, const char* data, Py_ssize_t size):
        cdef Py_ssize_t start = data - <const char*>self.buffer.buf
        if self.view is None:
            view = PyMemoryView_FromObject(self.source)
            if view.ndim != 1 or view.itemsize != 1:
                view = view.cast("B")
            self.view = view
        return PySequence_GetSlice(self.view, start, start + size)


cdef inline DecodeContext open_input(object data, ReadCursor* cur):
    cdef DecodeContext ctx = DecodeContext.__new__(DecodeContext)
    ctx.open(data, cur)
    return ctx


# ---------------------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------------------

cdef int64_t checked_int(object value, int64_t low, int64_t high, str type_name) except? -1:
    cdef int64_t number
    if not PyLong_Check(value):
        raise EncodeError(f"{type_name} field needs an int, got {type(value).__name__} {value!r}")
    try:
        number = value
    except OverflowError:
        raise EncodeError(f"{value} does not fit in {type_name}") from None
    if number < low or number > high:
        raise EncodeError(f"{value} does not fit in {type_name}")
    return number


cdef int put_null(WriteBuffer out, bint nullable, bint compact, bint wide) except -1:
    # wide: the classic form of the length is int32 (bytes, records, arrays) rather than int16 (strings).
    if not nullable:
        raise EncodeError("null is not allowed here in this version")
    if compact:
        out.put_uvarint(0)
    elif wide:
        out.put_i32(-1)
    else:
        out.put_i16(-1)
    return 0


cdef int encode_bytes_like(object value, bint nullable, WriteBuffer out, bint compact) except -1:
    cdef Py_buffer view
    if value is None:
        return put_null(out, nullable, compact, True)
    try:
        PyObject_GetBuffer(value, &view, PyBUF_SIMPLE)
    except TypeError:
        raise EncodeError(f"needs a bytes-like object, got {type(value).__name__}")
    try:
        if view.len > 0x7FFFFFFF:
            raise EncodeError(f"{view.len} bytes do not fit in one field")
        if compact:
            out.put_uvarint(<uint64_t>view.len + 1)
        else:
            out.put_i32(<int32_t>view.len)
        out.put_bytes_like(value, <const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int encode_value(int kind, bint nullable, PyObject* sub, object value, WriteBuffer out, bint compact) except -1:
    cdef const char* text
    cdef Py_ssize_t size
    cdef double real
    cdef uint64_t bits
    if kind == K_INT32:
        out.put_i32(<int32_t>checked_int(value, -0x80000000, 0x7FFFFFFF, "int32"))
    elif kind == K_INT16:
        out.put_i16(<int16_t>checked_int(value, -0x8000, 0x7FFF, "int16"))
    elif kind == K_INT64:
        out.put_i64(checked_int(value, INT64_MIN, INT64_MAX, "int64"))
    elif kind == K_STRING:
        if value is None:
            return put_null(out, nullable, compact, False)
        if not PyUnicode_Check(value):
            raise EncodeError(f"string field needs a str, got {type(value).__name__} {value!r}")
        try:
            text = PyUnicode_AsUTF8AndSize(value, &size)
        except UnicodeEncodeError as exc:
            raise EncodeError(f"cannot encode as UTF-8: {exc}") from None
        if compact:
            out.put_uvarint(<uint64_t>size + 1)
        elif size > 0x7FFF:
            raise EncodeError(f"a string of {size} UTF-8 bytes does not fit an int16 length")
        else:
            out.put_i16(<int16_t>size)
        out.put_bytes(text, size)
    elif kind == K_STRUCT:
        if nullable:
            # A nullable struct is preceded by a presence byte: -1 for null, 1 for a struct.
            if value is None:
                out.put_i8(-1)
                return 0
            out.put_i8(1)
        encode_struct(<StructCodec>sub, value, out)
    elif kind == K_RECORDS or kind == K_BYTES:
        encode_bytes_like(value, nullable, out, compact)
    elif kind == K_INT8:
        out.put_i8(<int8_t>checked_int(value, -0x80, 0x7F, "int8"))
    elif kind == K_BOOL:
        if value is True or value is False or PyLong_Check(value):
            out.put_i8(1 if checked_int(value, 0, 1, "bool") else 0)
        else:
            raise EncodeError(f"bool field needs a bool, got {type(value).__name__} {value!r}")
    elif kind == K_UINT16:
        out.put_i16(<int16_t><uint16_t>checked_int(value, 0, 0xFFFF, "uint16"))
    elif kind == K_UINT32:
        out.put_u32(<uint32_t>checked_int(value, 0, 0xFFFFFFFF, "uint32"))
    elif kind == K_FLOAT64:
        if not (PyFloat_Check(value) or PyLong_Check(value)):
            raise EncodeError(f"float64 field needs a float, got {type(value).__name__} {value!r}")
        real = PyFloat_AsDouble(value)
        memcpy(&bits, &real, 8)
        store_u64be(out.claim(8), bits)
    elif kind == K_UUID:
        if not isinstance(value, UUID):
            raise EncodeError(f"uuid field needs a uuid.UUID, got {type(value).__name__} {value!r}")
        out.write_from(value.bytes)
    else:
        raise AssertionError(f"unknown wire kind {kind}")
    return 0


cdef int encode_field(const FieldOp* op, object value, WriteBuffer out, bint compact) except -1:
    cdef Py_ssize_t i, count
    cdef object items
    if op.kind != K_ARRAY:
        return encode_value(op.kind, op.nullable, op.sub, value, out, compact)
    if value is None:
        return put_null(out, op.nullable, compact, True)
    if not (PyList_Check(value) or PyTuple_Check(value)):
        raise EncodeError(f"array field needs a list or tuple, got {type(value).__name__}")
    items = PySequence_Fast(value, "")
    count = PySequence_Fast_GET_SIZE(items)
    if compact:
        out.put_uvarint(<uint64_t>count + 1)
    else:
        out.put_i32(<int32_t>count)
    for i in range(count):
        try:
            encode_value(op.elem_kind, False, op.sub, <object>PySequence_Fast_GET_ITEM(items, i), out, compact)
        except EncodeError as exc:
            exc.path_segments.append(i)
            raise
    return 0


cdef inline object slot_value(object obj, const FieldOp* op):
    cdef PyObject* value = slot_address(obj, op.offset)[0]
    if value == NULL:
        raise EncodeError("the field is not set")
    return <object>value


cdef bint tagged_is_default(const FieldOp* op, object value) except -1:
    if op.omit_if_empty:
        return (PyList_Check(value) or PyTuple_Check(value)) and len(value) == 0
    return PyObject_RichCompareBool(value, <object>op.omit_value, Py_EQ)


cdef int encode_tagged(StructCodec codec, object obj, WriteBuffer out) except -1:
    cdef uint64_t present = 0
    cdef Py_ssize_t i, start, size, extra, splice_min, count = 0
    cdef const FieldOp* op
    cdef char* where
    for i in range(codec.n_tagged):
        op = &codec.tagged[i]
        try:
            if tagged_is_default(op, slot_value(obj, op)):
                continue
        except EncodeError as exc:
            exc.path_segments.append(<object>op.name)
            raise
        present |= (<uint64_t>1) << i
        count += 1
    out.put_uvarint(count)
    for i in range(codec.n_tagged):
        if not present & ((<uint64_t>1) << i):
            continue
        op = &codec.tagged[i]
        out.put_uvarint(<uint32_t>op.tag)
        # The size precedes the value but is known only after encoding it: reserve one byte, and shift the
        # value right in the rare case that its size needs a longer varint.
        start = out.size()
        out.put_i8(0)
        # The value is measured and shifted in out's own bytes, so nothing in it may be referenced.
        splice_min = out._splice_min
        out._splice_min = 0
        try:
            encode_field(op, <object>slot_address(obj, op.offset)[0], out, True)
        except EncodeError as exc:
            exc.path_segments.append(<object>op.name)
            raise
        finally:
            out._splice_min = splice_min
        size = out.size() - start - 1
        extra = uvarint_size(size) - 1
        if extra:
            out.claim(extra)
            where = out.pointer_at(start)
            memmove(where + 1 + extra, where + 1, size)
        put_uvarint(out.pointer_at(start), size)
    return 0


cdef int encode_struct(StructCodec codec, object obj, WriteBuffer out) except -1:
    cdef Py_ssize_t i
    cdef const FieldOp* op
    if not PyObject_TypeCheck(obj, codec.type_ptr):
        raise EncodeError(f"needs a {codec.cls.__qualname__}, got {type(obj).__qualname__}")
    for i in range(codec.n_ops):
        op = &codec.ops[i]
        try:
            encode_field(op, slot_value(obj, op), out, codec.flexible)
        except EncodeError as exc:
            exc.path_segments.append(<object>op.name)
            raise
    if codec.flexible:
        encode_tagged(codec, obj, out)
    return 0


# ---------------------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------------------

cdef Py_ssize_t read_length(ReadCursor* cur, bint compact, bint wide) except -2:
    # A length or count; -1 means null. wide: the classic form is int32 rather than int16.
    cdef Py_ssize_t length
    if compact:
        length = <Py_ssize_t>cursor_uvarint32(cur) - 1
    elif wide:
        length = cursor_i32(cur)
    else:
        length = cursor_i16(cur)
    if length < -1:
        raise CorruptDataError(f"negative length {length}")
    return length


cdef object decode_uuid(const char* data):
    cdef object value
    if memcmp(data, b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) == 0:
        return ZERO_UUID
    value = UUID.__new__(UUID)
    object_setattr(value, "int", int_from_bytes(PyBytes_FromStringAndSize(data, 16), "big"))
    object_setattr(value, "is_safe", UUID_SAFETY_UNKNOWN)
    return value


cdef object decode_value(int kind, bint nullable, PyObject* sub, ReadCursor* cur, DecodeContext ctx, bint compact):
    cdef Py_ssize_t length
    cdef const char* data
    cdef uint64_t bits
    cdef double real
    if kind == K_INT32:
        return cursor_i32(cur)
    if kind == K_INT16:
        return cursor_i16(cur)
    if kind == K_INT64:
        return cursor_i64(cur)
    if kind == K_STRUCT:
        if nullable and cursor_i8(cur) < 0:
            return None
        return decode_struct(<StructCodec>sub, cur, ctx)
    if kind == K_STRING or kind == K_BYTES or kind == K_RECORDS:
        length = read_length(cur, compact, kind != K_STRING)
        if length == -1:
            if not nullable:
                raise CorruptDataError("null in a field that is not nullable in this version")
            return None
        data = cursor_take(cur, length)
        if kind == K_STRING:
            try:
                return PyUnicode_DecodeUTF8(data, length, NULL)
            except UnicodeDecodeError as exc:
                raise CorruptDataError(f"string is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
        if kind == K_RECORDS:
            return ctx.records_view(data, length)
        return PyBytes_FromStringAndSize(data, length)
    if kind == K_INT8:
        return cursor_i8(cur)
    if kind == K_BOOL:
        return cursor_i8(cur) != 0
    if kind == K_UINT16:
        return cursor_u16(cur)
    if kind == K_UINT32:
        return cursor_u32(cur)
    if kind == K_FLOAT64:
        bits = load_u64be(cursor_take(cur, 8))
        memcpy(&real, &bits, 8)
        return PyFloat_FromDouble(real)
    if kind == K_UUID:
        return decode_uuid(cursor_take(cur, 16))
    raise AssertionError(f"unknown wire kind {kind}")


cdef object decode_field(const FieldOp* op, ReadCursor* cur, DecodeContext ctx, bint compact):
    cdef Py_ssize_t i, count
    cdef object items, item
    if op.kind != K_ARRAY:
        return decode_value(op.kind, op.nullable, op.sub, cur, ctx, compact)
    count = read_length(cur, compact, True)
    if count == -1:
        if not op.nullable:
            raise CorruptDataError(f"null array {<object>op.name} that is not nullable in this version")
        return None
    if count > cursor_remaining(cur) // op.elem_min_size:
        raise TruncatedError(f"array {<object>op.name} of {count} elements needs at least "
                             f"{count * op.elem_min_size} bytes, {cursor_remaining(cur)} left")
    items = PyList_New(count)
    for i in range(count):
        item = decode_value(op.elem_kind, False, op.sub, cur, ctx, compact)
        Py_INCREF(item)
        PyList_SET_ITEM(items, i, item)
    return items


cdef const FieldOp* find_tagged(StructCodec codec, uint32_t tag) noexcept:
    cdef Py_ssize_t i
    for i in range(codec.n_tagged):
        if <uint32_t>codec.tagged[i].tag == tag:
            return &codec.tagged[i]
    return NULL


cdef int skip_tagged_fields(ReadCursor* cur) except -1:
    cdef uint32_t count = cursor_uvarint32(cur)
    cdef uint32_t i
    if count > <uint64_t>cursor_remaining(cur) // 2:
        raise TruncatedError(f"{count} tagged fields announced, {cursor_remaining(cur)} bytes left")
    for i in range(count):
        cursor_uvarint32(cur)
        cursor_take(cur, cursor_uvarint32(cur))
    return 0


cdef int decode_tagged(StructCodec codec, object obj, ReadCursor* cur, DecodeContext ctx) except -1:
    cdef uint32_t count = cursor_uvarint32(cur)
    cdef uint32_t i, tag, size
    cdef const FieldOp* op
    cdef ReadCursor field
    # Each tagged field takes at least two bytes (tag and size), which bounds a forged count.
    if count > <uint64_t>cursor_remaining(cur) // 2:
        raise TruncatedError(f"{count} tagged fields announced, {cursor_remaining(cur)} bytes left")
    for i in range(count):
        tag = cursor_uvarint32(cur)
        size = cursor_uvarint32(cur)
        cursor_split(cur, &field, size)
        op = find_tagged(codec, tag)
        if op == NULL:
            continue
        slot_store(obj, op.offset, decode_field(op, &field, ctx, True))
        if cursor_remaining(&field):
            raise CorruptDataError(f"tagged field {<object>op.name} announces {size} bytes but its value "
                                   f"takes {size - cursor_remaining(&field)}")
    return 0


cdef object decode_struct(StructCodec codec, ReadCursor* cur, DecodeContext ctx):
    cdef object obj = new_instance(codec.type_ptr)
    cdef Py_ssize_t i
    cdef const FieldOp* op
    for i in range(codec.n_ops):
        op = &codec.ops[i]
        slot_store(obj, op.offset, decode_field(op, cur, ctx, codec.flexible))
    if codec.flexible:
        decode_tagged(codec, obj, cur, ctx)
    fill_missing(codec.table, obj)
    return obj


# ---------------------------------------------------------------------------------------------------------
# Entry points: whole bodies and frames
# ---------------------------------------------------------------------------------------------------------

cdef object decode_all(StructCodec codec, ReadCursor* cur, DecodeContext ctx, bint allow_trailing=False):
    # The body must end exactly where the frame does: leftovers mean a wrong version or a corrupt frame. A broker
    # may allow them (allow_trailing), as Kafka's does: some clients send a few bytes past the body.
    cdef object value
    try:
        value = decode_struct(codec, cur, ctx)
    except ProtocolError as exc:
        raise type(exc)(f"{codec.label}: {exc}") from None
    if cursor_remaining(cur) and not allow_trailing:
        raise CorruptDataError(f"{codec.label}: {cursor_remaining(cur)} bytes left after the end of the body")
    return value


def encode_message(StructCodec codec, object obj, WriteBuffer out=None) -> WriteBuffer:
    """Appends the encoding of obj (no header, no size) to out (a new WriteBuffer by default)."""
    if out is None:
        out = WriteBuffer()
    encode_struct(codec, obj, out)
    return out


def decode_message(StructCodec codec, object data):
    """Decodes a whole body (no header, no size); records fields are views into data."""
    cdef ReadCursor cur
    cdef DecodeContext ctx = open_input(data, &cur)
    return decode_all(codec, &cur, ctx)


cdef WriteBuffer finish_frame(StructCodec codec, object body, WriteBuffer out, Py_ssize_t start,
                              Py_ssize_t total_start, Py_ssize_t splices):
    # The body after the header written from start, then the size prefix at start; a body that fails to
    # encode takes the whole frame back out of out.
    try:
        encode_struct(codec, body, out)
    except BaseException:
        out.rewind(start, splices)
        raise
    store_i32be(out.pointer_at(start), <int32_t>(out.total_size() - total_start - 4))
    return out


def encode_request(StructCodec codec, int16_t api_key, int16_t api_version, bint header_v2,
                   int32_t correlation_id, object client_id, object body, WriteBuffer out=None) -> WriteBuffer:
    """Appends a whole request frame, size prefix included, to out (a new WriteBuffer by default).

    An out made with splice_min references large bytes and records values instead of copying them (a
    produce request's batches): send it with out.parts(), before those values change."""
    cdef Py_ssize_t start, total_start, splices
    if out is None:
        out = WriteBuffer()
    start, total_start, splices = out.size(), out.total_size(), out.splice_count()
    out.put_i32(0)
    out.put_i16(api_key)
    out.put_i16(api_version)
    out.put_i32(correlation_id)
    try:
        encode_value(K_STRING, True, NULL, client_id, out, False)
    except EncodeError as exc:
        exc.path_segments.append("client_id")
        out.truncate_to(start)
        raise
    if header_v2:
        out.put_uvarint(0)
    return finish_frame(codec, body, out, start, total_start, splices)


def encode_response(StructCodec codec, bint header_v1, int32_t correlation_id, object body,
                    WriteBuffer out=None) -> WriteBuffer:
    """Appends a whole response frame, size prefix included, to out (a new WriteBuffer by default); with
    splice_min, large values are referenced as in encode_request()."""
    cdef Py_ssize_t start, total_start, splices
    if out is None:
        out = WriteBuffer()
    start, total_start, splices = out.size(), out.total_size(), out.splice_count()
    out.put_i32(0)
    out.put_i32(correlation_id)
    if header_v1:
        out.put_uvarint(0)
    return finish_frame(codec, body, out, start, total_start, splices)


def peek_correlation_id(object frame) -> int:
    """The correlation id of a response frame (its first four bytes)."""
    cdef ReadCursor cur
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        cursor_init(&cur, <const char*>view.buf, view.len)
        return cursor_i32(&cur)
    finally:
        PyBuffer_Release(&view)


def peek_request_header(object frame) -> tuple:
    """(api_key, api_version, correlation_id) of a request frame: enough to pick its codecs."""
    cdef ReadCursor cur
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        cursor_init(&cur, <const char*>view.buf, view.len)
        api_key = cursor_i16(&cur)
        api_version = cursor_i16(&cur)
        return api_key, api_version, cursor_i32(&cur)
    finally:
        PyBuffer_Release(&view)


def decode_request(StructCodec header_codec, bint header_v2, StructCodec codec, object frame,
                   bint allow_trailing=False) -> tuple:
    """(header, body) of a request frame; header_codec decodes the v1 header fields. allow_trailing ignores
    bytes after the body instead of refusing the frame."""
    cdef ReadCursor cur
    cdef DecodeContext ctx = open_input(frame, &cur)
    try:
        header = decode_struct(header_codec, &cur, ctx)
        if header_v2:
            skip_tagged_fields(&cur)
    except ProtocolError as exc:
        raise type(exc)(f"request header: {exc}") from None
    return header, decode_all(codec, &cur, ctx, allow_trailing)


def decode_response(StructCodec codec, bint header_v1, object frame) -> tuple:
    """(correlation_id, body) of a response frame."""
    cdef ReadCursor cur
    cdef int32_t correlation_id
    cdef DecodeContext ctx = open_input(frame, &cur)
    try:
        correlation_id = cursor_i32(&cur)
        if header_v1:
            skip_tagged_fields(&cur)
    except ProtocolError as exc:
        raise type(exc)(f"response header: {exc}") from None
    return correlation_id, decode_all(codec, &cur, ctx)


def default_struct(cls):
    """An instance of a generated class with every field at its default (what a decoder fills in)."""
    return new_default_struct(cls)
