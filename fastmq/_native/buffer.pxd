# cython: language_level=3
"""The byte-level core that every fastmq codec cimports.

ReadCursor: a zero-copy cursor over borrowed memory (the caller keeps the owner alive). Every read checks
the remaining length first and raises TruncatedError on underflow, so parsers never slice Python objects
and never read past the end.
WriteBuffer: a growable output buffer backed by a bytearray (or by an ArenaBlock: a producer's batch, see
arena.pyx), so that a finished buffer is handed to the socket or the caller without a copy (detach()). Given
splice_min, it references large bytes-like objects (a producer's record batches) instead of copying them, and
hands the whole as a list of parts for one vectored write (parts()).
ReadBuffer: an incremental input buffer for stream protocols: bytes are fed (or received) at the end and
consumed from the front.

Integers are big-endian (network order). "uvarint" is the protobuf / Kafka unsigned base-128 varint;
"varint" (no u) is its zigzag-encoded signed form, as Kafka's records use.
"""
from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.string cimport memcpy
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from fastmq._native.arena cimport ArenaBlock

cdef extern from "fastmq_byteorder.h" nogil:
    uint16_t load_u16be "fmq_load_u16be"(const char* p)
    uint32_t load_u32be "fmq_load_u32be"(const char* p)
    uint64_t load_u64be "fmq_load_u64be"(const char* p)
    int16_t load_i16be "fmq_load_i16be"(const char* p)
    int32_t load_i32be "fmq_load_i32be"(const char* p)
    int64_t load_i64be "fmq_load_i64be"(const char* p)
    void store_u16be "fmq_store_u16be"(char* p, uint16_t v)
    void store_u32be "fmq_store_u32be"(char* p, uint32_t v)
    void store_u64be "fmq_store_u64be"(char* p, uint64_t v)
    void store_i16be "fmq_store_i16be"(char* p, int16_t v)
    void store_i32be "fmq_store_i32be"(char* p, int32_t v)
    void store_i64be "fmq_store_i64be"(char* p, int64_t v)
    uint32_t load_u32le "fmq_load_u32le"(const char* p)
    uint64_t load_u64le "fmq_load_u64le"(const char* p)
    void store_u32le "fmq_store_u32le"(char* p, uint32_t v)

cdef bint borrow_buffer(object obj, Py_buffer* view, const char** data, Py_ssize_t* length, str what) except -1

cdef inline bint borrow_bytes(object obj, Py_buffer* view, const char** data, Py_ssize_t* length,
                              str what) except -1:
    # The bytes of a record's key, value or header value: bytes are read in place, other buffer objects through
    # a view the caller releases (True when one was taken: borrow_buffer, kept out of line so that this inlines);
    # None is null (NULL, length -1).
    if obj is None:
        data[0] = NULL
        length[0] = -1
        return False
    if PyBytes_CheckExact(obj):
        data[0] = PyBytes_AS_STRING(obj)
        length[0] = PyBytes_GET_SIZE(obj)
        return False
    return borrow_buffer(obj, view, data, length, what)


ctypedef struct BorrowedRecord:
    # A record's key and value as borrow_bytes() reads them (NULL, -1: null), for the span of one call.
    const char* key
    Py_ssize_t key_len
    const char* value
    Py_ssize_t value_len
    bint key_viewed
    bint value_viewed
    Py_buffer key_view
    Py_buffer value_view

cdef bint borrow_value_buffer(BorrowedRecord* record, object value) except -1

cdef inline int borrow_record(object key, object value, BorrowedRecord* record) except -1:
    # Pair with release_record() (in a finally) once this returned; on an error nothing is left to release. No
    # try block here (Cython saves the exception state on entering one): the value's slow way has it.
    record.value_viewed = False
    record.key_viewed = borrow_bytes(key, &record.key_view, &record.key, &record.key_len, "key")
    if value is None or PyBytes_CheckExact(value):
        borrow_bytes(value, &record.value_view, &record.value, &record.value_len, "value")     # takes no view
    else:
        record.value_viewed = borrow_value_buffer(record, value)
    return 0

cdef inline void release_record(BorrowedRecord* record) noexcept:
    if record.key_viewed:
        PyBuffer_Release(&record.key_view)
    if record.value_viewed:
        PyBuffer_Release(&record.value_view)


cdef enum:
    MAX_UVARINT32_LEN = 5     # bytes of a varint holding 32 bits
    MAX_UVARINT64_LEN = 10    # bytes of a varint holding 64 bits


# ---------------------------------------------------------------------------------------------------------
# Varint arithmetic on raw memory (no bounds; callers guarantee the room).
# ---------------------------------------------------------------------------------------------------------

cdef inline int uvarint_size(uint64_t value) noexcept nogil:
    cdef int size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size

cdef inline uint64_t zigzag64(int64_t value) noexcept nogil:
    return (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)

cdef inline int64_t unzigzag64(uint64_t value) noexcept nogil:
    return <int64_t>(value >> 1) ^ -<int64_t>(value & 1)

cdef inline int varint_size(int64_t value) noexcept nogil:
    return uvarint_size(zigzag64(value))

cdef inline char* put_uvarint(char* p, uint64_t value) noexcept nogil:
    # Writes at most 10 bytes; returns the position after the last one.
    while value >= 0x80:
        p[0] = <char>(value | 0x80)
        value >>= 7
        p += 1
    p[0] = <char>value
    return p + 1

cdef inline char* put_varint(char* p, int64_t value) noexcept nogil:
    return put_uvarint(p, zigzag64(value))


# ---------------------------------------------------------------------------------------------------------
# ReadCursor
# ---------------------------------------------------------------------------------------------------------

ctypedef struct ReadCursor:
    const char* pos     # next byte to read
    const char* end     # one past the last readable byte

cdef int raise_truncated(Py_ssize_t wanted, Py_ssize_t available) except -1
cdef int raise_bad_varint(int max_len) except -1
cdef uint64_t cursor_uvarint_slow(ReadCursor* cur, int max_len) except? 0xFFFFFFFFFFFFFFFF

cdef inline void cursor_init(ReadCursor* cur, const char* buf, Py_ssize_t size) noexcept nogil:
    cur.pos = buf
    cur.end = buf + size

cdef inline Py_ssize_t cursor_remaining(const ReadCursor* cur) noexcept nogil:
    return cur.end - cur.pos

cdef inline const char* cursor_take(ReadCursor* cur, Py_ssize_t n) except NULL:
    # Returns a pointer to the next n bytes and steps over them; raises TruncatedError if fewer remain.
    cdef const char* p = cur.pos
    if n < 0 or cur.end - p < n:
        raise_truncated(n, cur.end - p)
        return NULL
    cur.pos = p + n
    return p

cdef inline int cursor_split(ReadCursor* cur, ReadCursor* sub, Py_ssize_t n) except -1:
    # sub becomes a cursor over the next n bytes; cur steps past them.
    cdef const char* p = cursor_take(cur, n)
    sub.pos = p
    sub.end = p + n
    return 0

cdef inline int8_t cursor_i8(ReadCursor* cur) except? -1:
    return <int8_t>cursor_take(cur, 1)[0]

cdef inline uint8_t cursor_u8(ReadCursor* cur) except? 0xFF:
    return <uint8_t>cursor_take(cur, 1)[0]

cdef inline int16_t cursor_i16(ReadCursor* cur) except? -1:
    return load_i16be(cursor_take(cur, 2))

cdef inline uint16_t cursor_u16(ReadCursor* cur) except? 0xFFFF:
    return load_u16be(cursor_take(cur, 2))

cdef inline int32_t cursor_i32(ReadCursor* cur) except? -1:
    return load_i32be(cursor_take(cur, 4))

cdef inline uint32_t cursor_u32(ReadCursor* cur) except? 0xFFFFFFFF:
    return load_u32be(cursor_take(cur, 4))

cdef inline int64_t cursor_i64(ReadCursor* cur) except? -1:
    return load_i64be(cursor_take(cur, 8))

cdef inline uint32_t cursor_uvarint32(ReadCursor* cur) except? 0xFFFFFFFF:
    # One-byte varints are the common case (lengths and deltas below 128); the rest go out of line.
    cdef const char* p = cur.pos
    if p < cur.end and not (<uint8_t>p[0] & 0x80):
        cur.pos = p + 1
        return <uint8_t>p[0]
    return <uint32_t>cursor_uvarint_slow(cur, MAX_UVARINT32_LEN)

cdef inline uint64_t cursor_uvarint64(ReadCursor* cur) except? 0xFFFFFFFFFFFFFFFF:
    cdef const char* p = cur.pos
    if p < cur.end and not (<uint8_t>p[0] & 0x80):
        cur.pos = p + 1
        return <uint8_t>p[0]
    return cursor_uvarint_slow(cur, MAX_UVARINT64_LEN)

cdef inline int32_t cursor_varint32(ReadCursor* cur) except? -1:
    cdef uint32_t raw = cursor_uvarint32(cur)
    return <int32_t>(raw >> 1) ^ -<int32_t>(raw & 1)

cdef inline int64_t cursor_varint64(ReadCursor* cur) except? -1:
    return unzigzag64(cursor_uvarint64(cur))


# ---------------------------------------------------------------------------------------------------------
# WriteBuffer
# ---------------------------------------------------------------------------------------------------------

cdef class WriteBuffer:
    cdef bytearray _storage     # owns the bytes; its length is the capacity (None while _block holds them)
    cdef ArenaBlock _block      # owns the bytes instead of _storage (a producer's batch), or None
    cdef char* _data            # start of the owner's bytes (refreshed after every resize)
    cdef Py_ssize_t _length     # bytes written so far
    cdef Py_ssize_t _capacity   # bytes at _data
    cdef Py_ssize_t _exports    # live buffer-protocol views; resizing is refused while any exist
    cdef Py_ssize_t _splice_min # bytes-like objects of this size or more are referenced, not copied (0: never)
    cdef list _spliced          # [(position in _storage, object, size)] of referenced objects, in order; or None
    cdef Py_ssize_t _spliced_bytes  # their total size

    cdef int _grow(self, Py_ssize_t needed) except -1
    cdef int clear(self) except -1
    cdef bytearray take(self)
    cdef int write_from(self, object data) except -1
    cdef int put_bytes_like(self, object owner, const char* data, Py_ssize_t n) except -1
    cdef int rewind(self, Py_ssize_t length, Py_ssize_t splice_count) except -1
    cdef int _refuse_spliced(self, str action) except -1
    cdef bytearray detach(self)
    cdef object detach_written(self)
    cdef bytearray _hand_over(self, Py_ssize_t next_capacity)
    cdef object _owner(self)

    cdef inline Py_ssize_t total_size(self) noexcept:
        # Bytes written, referenced parts included.
        return self._length + self._spliced_bytes

    cdef inline Py_ssize_t splice_count(self) noexcept:
        return 0 if self._spliced is None else len(self._spliced)

    cdef inline int ensure(self, Py_ssize_t extra) except -1:
        # Room for `extra` more bytes without a further resize.
        if self._length + extra > self._capacity:
            self._grow(self._length + extra)
        return 0

    cdef inline char* claim(self, Py_ssize_t n) except NULL:
        # Reserves the next n bytes and returns where they start; the caller fills them.
        cdef char* p
        if self._length + n > self._capacity:
            self._grow(self._length + n)
        p = self._data + self._length
        self._length += n
        return p

    cdef inline char* pointer_at(self, Py_ssize_t offset) noexcept:
        # Where byte `offset` lives now; invalid after the next growth.
        return self._data + offset

    cdef inline Py_ssize_t size(self) noexcept:
        return self._length

    cdef inline int truncate_to(self, Py_ssize_t length) noexcept:
        # Forget everything after `length` (used to undo a partly written record).
        if length < self._length:
            self._length = length
        return 0

    cdef inline int put_bytes(self, const char* data, Py_ssize_t n) except -1:
        cdef char* p = self.claim(n)
        if n:
            memcpy(p, data, n)
        return 0

    cdef inline int put_i8(self, int8_t v) except -1:
        self.claim(1)[0] = <char>v
        return 0

    cdef inline int put_i16(self, int16_t v) except -1:
        store_i16be(self.claim(2), v)
        return 0

    cdef inline int put_i32(self, int32_t v) except -1:
        store_i32be(self.claim(4), v)
        return 0

    cdef inline int put_u32(self, uint32_t v) except -1:
        store_u32be(self.claim(4), v)
        return 0

    cdef inline int put_i64(self, int64_t v) except -1:
        store_i64be(self.claim(8), v)
        return 0

    cdef inline int put_uvarint(self, uint64_t v) except -1:
        cdef char* p
        self.ensure(MAX_UVARINT64_LEN)
        p = put_uvarint(self._data + self._length, v)
        self._length = p - self._data
        return 0

    cdef inline int put_varint(self, int64_t v) except -1:
        return self.put_uvarint(zigzag64(v))


# ---------------------------------------------------------------------------------------------------------
# ReadBuffer
# ---------------------------------------------------------------------------------------------------------

cdef class ReadBuffer:
    cdef char* _data            # malloc'd storage
    cdef Py_ssize_t _capacity   # bytes allocated at _data
    cdef Py_ssize_t _start      # first unconsumed byte
    cdef Py_ssize_t _end        # one past the last byte received

    cdef int _make_room(self, Py_ssize_t extra) except -1
    cdef int append(self, const char* data, Py_ssize_t n) except -1
    cdef int feed_object(self, object data) except -1

    cdef inline Py_ssize_t available(self) noexcept:
        return self._end - self._start

    cdef inline const char* head(self) noexcept:
        # The first unconsumed byte; valid until the next append.
        return self._data + self._start

    cdef inline void consume(self, Py_ssize_t n) noexcept:
        self._start += n
        if self._start == self._end:
            self._start = 0
            self._end = 0

    cdef inline void cursor(self, ReadCursor* cur) noexcept:
        cursor_init(cur, self._data + self._start, self._end - self._start)

