# cython: language_level=3
"""Out-of-line parts of the buffer core (see buffer.pxd) and the Python-facing methods of its classes."""
cimport cython
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_FillInfo, PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_Check
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy, memmove

from fastmq.errors import ProtocolError, TruncatedError

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char* mem, Py_ssize_t size, int flags)
    int PyBUF_READ
    int PyBUF_WRITE


cdef int raise_truncated(Py_ssize_t wanted, Py_ssize_t available) except -1:
    if wanted < 0:
        raise TruncatedError(f"negative length {wanted}")
    raise TruncatedError(f"needed {wanted} bytes, {available} left")


cdef int raise_bad_varint(int max_len) except -1:
    raise ProtocolError(f"varint longer than {max_len} bytes")


cdef bint borrow_buffer(object obj, Py_buffer* view, const char** data, Py_ssize_t* length, str what) except -1:
    # borrow_bytes() of what is neither None nor bytes.
    if PyUnicode_Check(obj):
        raise TypeError(f"{what} must be bytes-like, not str: encode it (or set a serializer)")
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like, not {type(obj).__name__}") from None
    data[0] = <const char*>view.buf
    length[0] = view.len
    return True


cdef bint borrow_value_buffer(BorrowedRecord* record, object value) except -1:
    # borrow_record()'s value when it is neither None nor bytes; releases the key's view if it fails.
    try:
        return borrow_buffer(value, &record.value_view, &record.value, &record.value_len, "value")
    except BaseException:
        release_record(record)
        raise


cdef uint64_t cursor_uvarint_slow(ReadCursor* cur, int max_len) except? 0xFFFFFFFFFFFFFFFF:
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef int i
    cdef uint8_t b
    for i in range(max_len):
        if cur.pos >= cur.end:
            raise_truncated(1, 0)
        b = <uint8_t>cur.pos[0]
        cur.pos += 1
        result |= <uint64_t>(b & 0x7F) << shift
        if not (b & 0x80):
            return result
        shift += 7
    raise_bad_varint(max_len)


cdef inline bytearray _unfilled_bytearray(Py_ssize_t size):
    # bytearray(n) zero-fills; a batch builder's megabyte of capacity would cost more to clear than to encode.
    return PyByteArray_FromStringAndSize(NULL, size)


# Not tracked by the cyclic GC: it references only bytes-like objects, which cannot lead back to it, and a busy
# producer makes one per batch (tracked, the batches waiting for their answers made every older-generation
# collection longer).
@cython.no_gc
@cython.final
cdef class WriteBuffer:
    """A growable byte buffer. Python callers use the write_* methods; compiled codecs use put_* / claim().

    With splice_min > 0, put_bytes_like() keeps a reference to bytes-like objects of at least that size
    instead of copying them: the buffer is then read through parts() (or getvalue(), which joins them), and
    the referenced objects must not change until the parts are written.
    """

    # splice_min and storage may come by position too: compiled callers that make one per batch (a producer's
    # builders) pass them so, without the keyword dictionary a call by name costs. storage: memory to write into,
    # a bytearray or an ArenaBlock (a producer's batch: arena.pyx), grown in place of a new bytearray.
    def __cinit__(self, Py_ssize_t capacity=1024, Py_ssize_t splice_min=0, object storage=None):
        if capacity < 16:
            capacity = 16
        if type(storage) is ArenaBlock:
            self._block = <ArenaBlock>storage
            self._block.resize(capacity, 0)
            capacity = self._block.capacity         # a block may hold more than was asked: all of it is used
            self._data = self._block.data
        else:
            if storage is None:
                storage = _unfilled_bytearray(capacity)
            else:
                # Recycled storage: its bytes are stale, and are written before they are read.
                PyByteArray_Resize(storage, capacity)
            self._storage = storage
            self._data = PyByteArray_AS_STRING(self._storage)
        self._capacity = capacity
        self._length = 0
        self._exports = 0
        self._splice_min = splice_min
        self._spliced = None
        self._spliced_bytes = 0

    cdef int _grow(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t capacity = self._capacity
        if self._exports:
            raise BufferError("WriteBuffer cannot grow while a memoryview of it is alive")
        while capacity < needed:
            capacity = capacity * 2 if capacity < (1 << 24) else capacity + (capacity >> 1)
        if self._block is not None:
            self._block.resize(capacity, self._length)
            self._data = self._block.data
            self._capacity = self._block.capacity
            return 0
        PyByteArray_Resize(self._storage, capacity)
        self._data = PyByteArray_AS_STRING(self._storage)
        self._capacity = capacity
        return 0

    cdef int clear(self) except -1:
        if self._exports:
            raise BufferError("WriteBuffer cannot be cleared while a memoryview of it is alive")
        self._length = 0
        self._spliced = None
        self._spliced_bytes = 0
        return 0

    cdef int _refuse_spliced(self, str action) except -1:
        if self._spliced:
            raise BufferError(f"WriteBuffer cannot {action}: it references {len(self._spliced)} part(s) "
                              f"it did not copy (read it with parts())")
        return 0

    cdef bytearray take(self):
        # Hands over the storage (trimmed to what was written) and starts a fresh one of the same capacity.
        # (Allocating it now rather than at the next write matters: freeing a large unused block is what
        # lets glibc serve the next ones from its heap, whose pages are mapped, instead of fresh mmaps.)
        return self._hand_over(self._capacity)

    cdef bytearray detach(self):
        # take() for a buffer that is done (a built record batch): the fresh storage is minimal, not another
        # buffer's worth allocated only to be freed unused.
        return self._hand_over(16)

    cdef object detach_written(self):
        # detach() for a buffer of either storage: an ArenaBlock is handed over as it is, exporting what was
        # written (its block is not trimmed: it returns to the arena whole when the block object dies).
        cdef ArenaBlock block = self._block
        if block is None:
            return self.detach()
        if self._exports:
            raise BufferError("WriteBuffer cannot be detached while a memoryview of it is alive")
        self._refuse_spliced("be detached")
        block.length = self._length
        self._block = None
        self._storage = _unfilled_bytearray(16)
        self._data = PyByteArray_AS_STRING(self._storage)
        self._capacity = 16
        self._length = 0
        return block

    cdef object _owner(self):
        # The object that owns the bytes, exporting all of them that were written.
        if self._block is not None:
            self._block.length = self._length
            return self._block
        return self._storage

    cdef bytearray _hand_over(self, Py_ssize_t next_capacity):
        cdef bytearray out = self._storage
        if self._exports:
            raise BufferError("WriteBuffer cannot be detached while a memoryview of it is alive")
        if self._block is not None:
            raise BufferError("WriteBuffer over an ArenaBlock hands it over with detach_written()")
        self._refuse_spliced("be detached")
        PyByteArray_Resize(out, self._length)
        self._storage = _unfilled_bytearray(next_capacity)
        self._data = PyByteArray_AS_STRING(self._storage)
        self._capacity = next_capacity
        self._length = 0
        return out

    cdef int write_from(self, object data) except -1:
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self.put_bytes_like(data, <const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        return 0

    cdef int put_bytes_like(self, object owner, const char* data, Py_ssize_t n) except -1:
        # data/n are owner's bytes: copied, or (from splice_min bytes on) referenced through owner.
        if self._splice_min <= 0 or n < self._splice_min:
            return self.put_bytes(data, n)
        if self._spliced is None:
            self._spliced = []
        self._spliced.append((self._length, owner, n))
        self._spliced_bytes += n
        return 0

    cdef int rewind(self, Py_ssize_t length, Py_ssize_t splice_count) except -1:
        # Forget what was written after the buffer held `length` bytes and `splice_count` references.
        while self.splice_count() > splice_count:
            self._spliced_bytes -= <Py_ssize_t>self._spliced.pop()[2]
        self.truncate_to(length)
        return 0

    def parts(self) -> list:
        """What was written, as a list of bytes-like parts in order (referenced objects in place), for one
        vectored write. The buffer's own bytes are memoryviews: it cannot grow while they are alive."""
        cdef list parts = []
        cdef Py_ssize_t start = 0, position
        if self._length == 0 and not self._spliced:
            return parts
        storage = memoryview(self._owner())
        for position, owner, _ in self._spliced or ():
            if position > start:
                parts.append(storage[start:position])
            parts.append(owner)
            start = position
        if self._length > start:
            parts.append(storage[start:self._length])
        return parts

    def __len__(self):
        return self.total_size()

    def __getbuffer__(self, Py_buffer* view, int flags):
        self._refuse_spliced("export one buffer")
        PyBuffer_FillInfo(view, self, self._data, self._length, 1, flags)
        self._exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self._exports -= 1

    def getvalue(self) -> bytes:
        """A copy of the bytes written so far (referenced parts joined in)."""
        if self._spliced:
            return b"".join(self.parts())
        return PyBytes_FromStringAndSize(self._data, self._length)

    def detach(self) -> bytearray:
        """The bytes written so far, without a copy; the buffer starts over empty."""
        return self.take()

    def reset(self) -> None:
        """Forget what was written, keeping the allocation."""
        self.clear()

    def write(self, data) -> None:
        """Append any bytes-like object."""
        self.write_from(data)

    def write_int8(self, int8_t v) -> None:
        self.put_i8(v)

    def write_int16(self, int16_t v) -> None:
        self.put_i16(v)

    def write_int32(self, int32_t v) -> None:
        self.put_i32(v)

    def write_uint32(self, uint32_t v) -> None:
        self.put_u32(v)

    def write_int64(self, int64_t v) -> None:
        self.put_i64(v)

    def write_uvarint(self, uint64_t v) -> None:
        """Unsigned base-128 varint (protobuf, Kafka compact lengths)."""
        self.put_uvarint(v)

    def write_varint(self, int64_t v) -> None:
        """Zigzag varint (Kafka record fields, protobuf sint64)."""
        self.put_varint(v)


@cython.final
cdef class ReadBuffer:
    """Bytes arriving from a stream: appended at the end, consumed from the front.

    The unconsumed region is kept contiguous so that a frame can be parsed in place; space is reclaimed
    by sliding the unconsumed bytes to the front when that is cheaper than growing.
    """

    def __cinit__(self, Py_ssize_t capacity=65536):
        if capacity < 64:
            capacity = 64
        self._data = <char*>PyMem_Realloc(NULL, capacity)
        if self._data == NULL:
            raise MemoryError()
        self._capacity = capacity
        self._start = 0
        self._end = 0

    def __dealloc__(self):
        PyMem_Free(self._data)

    cdef int _make_room(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t unread = self._end - self._start
        cdef Py_ssize_t capacity
        cdef char* grown
        if self._capacity - self._end >= extra:
            return 0
        if self._start and self._capacity - unread >= extra and unread <= self._capacity // 2:
            memmove(self._data, self._data + self._start, unread)
            self._start = 0
            self._end = unread
            return 0
        capacity = self._capacity
        while capacity - unread < extra:
            capacity *= 2
        if self._start:
            memmove(self._data, self._data + self._start, unread)
            self._start = 0
            self._end = unread
        grown = <char*>PyMem_Realloc(self._data, capacity)
        if grown == NULL:
            raise MemoryError()
        self._data = grown
        self._capacity = capacity
        return 0

    cdef int append(self, const char* data, Py_ssize_t n) except -1:
        self._make_room(n)
        memcpy(self._data + self._end, data, n)
        self._end += n
        return 0

    cdef int feed_object(self, object data) except -1:
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self.append(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        return 0

    def __len__(self):
        return self._end - self._start

    def feed(self, data) -> None:
        """Append any bytes-like object."""
        self.feed_object(data)

    def writable(self, Py_ssize_t min_size=65536) -> memoryview:
        """Free space at the end, at least min_size bytes, for sock.recv_into(); follow with commit(n).

        The view is only valid until the next call on this buffer.
        """
        self._make_room(min_size)
        return PyMemoryView_FromMemory(self._data + self._end, self._capacity - self._end, PyBUF_WRITE)

    def commit(self, Py_ssize_t n) -> None:
        """Record that n bytes were written into the view from writable()."""
        if n < 0 or n > self._capacity - self._end:
            raise ValueError(f"commit({n}) exceeds the writable region")
        self._end += n

    def peek(self, Py_ssize_t n=-1) -> bytes:
        """A copy of the first n unconsumed bytes (all when n < 0), leaving them in place."""
        cdef Py_ssize_t unread = self._end - self._start
        if n < 0 or n > unread:
            n = unread
        return PyBytes_FromStringAndSize(self._data + self._start, n)

    def read(self, Py_ssize_t n) -> bytes:
        """Consume and return exactly n bytes; raises TruncatedError when fewer are buffered."""
        cdef bytes out
        if n < 0 or n > self._end - self._start:
            raise_truncated(n, self._end - self._start)
        out = PyBytes_FromStringAndSize(self._data + self._start, n)
        self.consume(n)
        return out
