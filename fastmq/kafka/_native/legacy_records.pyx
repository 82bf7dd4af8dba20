# cython: language_level=3
"""Kafka's legacy message sets, magic 0 (Kafka 0.8-0.9) and magic 1 (0.10): reader and builder.

MessageSet => [Offset int64, MessageSize int32, Message]
Message v0 => Crc uint32, Magic int8, Attributes int8, KeyLength int32 (-1 null), Key, ValueLength int32, Value
Message v1 => Crc uint32, Magic int8, Attributes int8, Timestamp int64, KeyLength int32, Key, ValueLength, Value

Crc is zlib's CRC-32 of Magic .. end. Attributes: bits 0-2 codec (gzip, snappy, lz4; zstd never existed for
these magics), bit 3 timestamp type (v1). A compressed message ("wrapper") carries a whole inner message set,
compressed, as its value. In v1 the inner offsets are relative (0..n-1) and the wrapper's offset is the
absolute offset of the last inner message; in v0 inner offsets are absolute. Magic 0 LZ4 frames carry
Kafka 0.8's wrong header checksum (computed over the frame magic too); the decompressor accepts both.
"""
import struct
import time

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int8_t, int32_t, int64_t, uint32_t
from libc.string cimport memcpy

from fastmq._native.buffer cimport (
    WriteBuffer, load_i32be, load_i64be, load_u32be, store_i32be, store_i64be, store_u32be,
)
from fastmq._native.checksum cimport crc32_of
from fastmq._native.compression cimport (
    CODEC_LZ4, CODEC_MASK, CODEC_NONE, CODEC_ZSTD, check_codec, compress_into, decompress_into,
)
from fastmq._native.hashing cimport xxh32_nogil
from fastmq.kafka._native.records cimport LOG_OVERHEAD

from fastmq.errors import CompressionError
from fastmq.kafka.errors import CorruptRecordError, UnsupportedCodecError

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char* mem, Py_ssize_t size, int flags)
    int PyBUF_READ

cdef enum:
    # Byte offsets inside one message, chained from the shared LOG_OVERHEAD prefix.
    CRC_AT = LOG_OVERHEAD
    MAGIC_AT = CRC_AT + 4
    ATTRIBUTES_AT = MAGIC_AT + 1
    TIMESTAMP_AT = ATTRIBUTES_AT + 1            # v1 only
    KEY_AT_V0 = ATTRIBUTES_AT + 1
    KEY_AT_V1 = TIMESTAMP_AT + 8
    RECORD_OVERHEAD_V0 = KEY_AT_V0 - CRC_AT + 8   # crc + magic + attributes + two lengths
    RECORD_OVERHEAD_V1 = KEY_AT_V1 - CRC_AT + 8
    TIMESTAMP_TYPE_BIT = 0x08
    NO_TIMESTAMP = -1

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


ctypedef struct LegacyMessage:
    int64_t offset              # offset (absolute, or relative inside a v1 wrapper)
    int32_t length              # bytes after the length field
    uint32_t crc                # stored CRC-32
    int8_t magic                # 0 or 1
    int8_t attributes           # codec and timestamp type bits
    int64_t timestamp           # v1 timestamp, -1 for v0
    const char* key             # NULL for a null key
    Py_ssize_t key_len          # -1 for a null key
    const char* value           # NULL for a null value
    Py_ssize_t value_len        # -1 for a null value
    const char* crc_start       # first byte the CRC covers (the magic)


cdef int parse_message(const char* data, Py_ssize_t size, LegacyMessage* out) except -1:
    """Decode the message at data (size bytes available, more than the message may follow)."""
    cdef Py_ssize_t pos, end
    cdef int32_t n
    if size < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"message of {size} bytes is shorter than the smallest message")
    out.offset = load_i64be(data)
    out.length = load_i32be(data + LOG_OVERHEAD - 4)
    if out.length < RECORD_OVERHEAD_V0 or out.length > size - LOG_OVERHEAD:
        raise CorruptRecordError(f"message size {out.length} does not fit the {size} bytes given")
    end = LOG_OVERHEAD + out.length
    out.crc = load_u32be(data + CRC_AT)
    out.magic = <int8_t>data[MAGIC_AT]
    out.attributes = <int8_t>data[ATTRIBUTES_AT]
    out.crc_start = data + MAGIC_AT
    if out.magic == 0:
        out.timestamp = NO_TIMESTAMP
        pos = KEY_AT_V0
    elif out.magic == 1:
        if out.length < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(f"v1 message size {out.length} is below the v1 overhead")
        out.timestamp = load_i64be(data + TIMESTAMP_AT)
        pos = KEY_AT_V1
    else:
        raise CorruptRecordError(f"message magic {out.magic} is not 0 or 1")
    n = load_i32be(data + pos)
    pos += 4
    if n < -1 or n > end - pos - 4:
        raise CorruptRecordError(f"message key length {n} is invalid")
    out.key = data + pos
    if n < 0:
        out.key = NULL
    out.key_len = n
    pos += max(n, 0)
    n = load_i32be(data + pos)
    pos += 4
    if n < -1 or n > end - pos:
        raise CorruptRecordError(f"message value length {n} is invalid")
    out.value = data + pos
    if n < 0:
        out.value = NULL
    out.value_len = n
    pos += max(n, 0)
    if pos != end:
        raise CorruptRecordError(f"message has {end - pos} bytes beyond its value")
    return 0


@cython.freelist(64)
@cython.final
cdef class LegacyRecord:
    """One v0/v1 message: kafka-python's LegacyRecord."""
    cdef readonly int magic
    cdef readonly int64_t offset
    cdef object _timestamp          # None for v0
    cdef object _timestamp_type     # None for v0
    cdef readonly object key
    cdef readonly object value
    cdef readonly uint32_t checksum
    cdef object _crc_bytes          # memoryview of magic .. end, for validate_crc

    @property
    def timestamp(self):
        return self._timestamp

    @property
    def timestamp_type(self):
        return self._timestamp_type

    @property
    def headers(self):
        return []

    def validate_crc(self):
        cdef Py_buffer view
        PyObject_GetBuffer(self._crc_bytes, &view, PyBUF_SIMPLE)
        try:
            return crc32_of(<const char*>view.buf, view.len) == self.checksum
        finally:
            PyBuffer_Release(&view)

    @property
    def size_in_bytes(self):
        return LegacyRecordBatchBuilder.estimate_size_in_bytes(self.magic, None, self.key, self.value)

    def __repr__(self):
        return (f"LegacyRecord(magic={self.magic!r} offset={self.offset!r}, timestamp={self._timestamp!r}, "
                f"timestamp_type={self._timestamp_type!r}, key={self.key!r}, value={self.value!r}, "
                f"crc={self.checksum!r})")


cdef LegacyRecord make_record(const LegacyMessage* message, object owner, const char* owner_start,
                              int64_t offset, object timestamp, object timestamp_type):
    cdef LegacyRecord record = LegacyRecord.__new__(LegacyRecord)
    record.magic = message.magic
    record.offset = offset
    record._timestamp = timestamp
    record._timestamp_type = timestamp_type
    record.key = None if message.key == NULL else PyBytes_FromStringAndSize(message.key, message.key_len)
    record.value = None if message.value == NULL else PyBytes_FromStringAndSize(message.value, message.value_len)
    record.checksum = message.crc
    start = message.crc_start - owner_start
    record._crc_bytes = memoryview(owner)[start:start + message.length - 4]
    return record


cdef class LegacyRecordBase:
    """kafka-python's LegacyRecordBase: the v0/v1 format's constants, shared by the builder and the reader."""
    HEADER_STRUCT_V0 = struct.Struct(">qiIbb")     # offset, length, crc, magic, attributes
    HEADER_STRUCT_V1 = struct.Struct(">qiIbbq")    # ... and timestamp
    LOG_OVERHEAD = CRC_OFFSET = 12
    MAGIC_OFFSET = 16
    RECORD_OVERHEAD_V0 = 14
    RECORD_OVERHEAD_V1 = 22
    KEY_OFFSET_V0 = 18
    KEY_OFFSET_V1 = 26
    KEY_LENGTH = VALUE_LENGTH = 4
    CODEC_MASK = 0x07
    CODEC_NONE = 0x00
    CODEC_GZIP = 0x01
    CODEC_SNAPPY = 0x02
    CODEC_LZ4 = 0x03
    TIMESTAMP_TYPE_MASK = 0x08
    LOG_APPEND_TIME = 1
    CREATE_TIME = 0
    NO_TIMESTAMP = -1


@cython.final
cdef class LegacyRecordBatch(LegacyRecordBase):
    """A top-level v0/v1 message, compressed or not: kafka-python's LegacyRecordBatch."""

    cdef object _buffer             # memoryview of the caller's buffer
    cdef Py_buffer _view            # held view of _buffer
    cdef bint _has_view             # _view must be released
    cdef LegacyMessage _message     # the top-level message
    cdef int _magic                 # magic the caller announced (checked against the message)
    cdef Py_ssize_t _max_decompressed_size   # bound for decompressing a wrapper

    def __cinit__(self, buffer, int magic, Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        self._buffer = memoryview(buffer)
        PyObject_GetBuffer(self._buffer, &self._view, PyBUF_SIMPLE)
        self._has_view = True
        parse_message(<const char*>self._view.buf, self._view.len, &self._message)
        if self._message.magic != magic:
            raise CorruptRecordError(f"message magic {self._message.magic} is not the announced {magic}")
        if LOG_OVERHEAD + self._message.length != self._view.len:
            raise CorruptRecordError("buffer holds more than one top-level message")
        self._magic = magic
        self._max_decompressed_size = max_decompressed_size

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)

    @property
    def base_offset(self):
        return self._message.offset

    @property
    def size_in_bytes(self):
        return self._message.length + LOG_OVERHEAD

    @property
    def timestamp_type(self):
        if self._magic == 0:
            return None
        return 1 if self._message.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def compression_type(self):
        return self._message.attributes & CODEC_MASK

    @property
    def magic(self):
        return self._magic

    def validate_crc(self):
        return crc32_of(self._message.crc_start, self._message.length - 4) == self._message.crc

    def __iter__(self):
        cdef int codec = self._message.attributes & CODEC_MASK
        timestamp_type = self.timestamp_type
        timestamp = None if self._magic == 0 else self._message.timestamp
        if codec == CODEC_NONE:
            yield make_record(&self._message, self._buffer, <const char*>self._view.buf,
                              self._message.offset, timestamp, timestamp_type)
            return
        yield from self._inner(codec, timestamp, timestamp_type)

    def _inner(self, int codec, object wrapper_timestamp, object timestamp_type):
        cdef WriteBuffer out = WriteBuffer(self._message.value_len * 4 + 64)
        cdef LegacyMessage inner
        cdef char* data             # not const: Cython's generator closures drop the qualifier
        cdef Py_ssize_t size, pos = 0
        cdef int64_t base = 0
        cdef list messages = []
        if self._message.value == NULL:
            raise CorruptRecordError("compressed message has a null value")
        try:
            decompress_into(codec, self._message.value, self._message.value_len, out, self._max_decompressed_size)
        except CompressionError as exc:
            raise CorruptRecordError(f"message at offset {self._message.offset}: {exc}") from exc
        inner_set = out.take()
        data = <char*>inner_set
        size = len(inner_set)
        # All inner headers come first: v1's relative offsets are resolved against the last one.
        while pos < size:
            parse_message(data + pos, size - pos, &inner)
            if inner.attributes & CODEC_MASK:
                raise CorruptRecordError(f"message at offset {self._message.offset} is compressed twice")
            messages.append(pos)
            pos += LOG_OVERHEAD + inner.length
        if self._magic == 1 and messages:
            pos = messages[len(messages) - 1]
            parse_message(data + pos, size - pos, &inner)
            # A producer's wrapper may still carry offset 0 (kafka-python writes it so): offsets then stay
            # as written, as kafka-python and the Java client read them.
            base = max(self._message.offset - inner.offset, 0)
        for pos in messages:
            parse_message(data + pos, size - pos, &inner)
            timestamp = wrapper_timestamp if timestamp_type == 1 else (
                None if self._magic == 0 else inner.timestamp)
            yield make_record(&inner, inner_set, data, base + inner.offset, timestamp, timestamp_type)


@cython.freelist(64)
@cython.final
cdef class LegacyRecordMetadata:
    """What LegacyRecordBatchBuilder.append() returns."""
    cdef readonly int64_t offset
    cdef readonly uint32_t crc
    cdef readonly Py_ssize_t size
    cdef readonly int64_t timestamp

    def __repr__(self):
        return (f"LegacyRecordMetadata(offset={self.offset!r}, crc={self.crc!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")


cdef inline Py_ssize_t opt_len(object obj):
    return 0 if obj is None else len(obj)


cdef class LegacyRecordBatchBuilder(LegacyRecordBase):
    """Builds a v0/v1 message set: kafka-python's LegacyRecordBatchBuilder."""

    cdef int _magic                 # 0 or 1
    cdef int _codec                 # compression codec id
    cdef Py_ssize_t _batch_size     # soft size limit
    cdef WriteBuffer _buffer        # messages appended so far
    cdef int64_t _last_offset       # offset of the last appended message
    cdef int64_t _max_timestamp     # largest timestamp appended (v1)

    def __init__(self, int magic, int compression_type, Py_ssize_t batch_size):
        if magic not in (0, 1):
            raise ValueError(f"LegacyRecordBatchBuilder writes magic 0 or 1, not {magic}")
        check_codec(compression_type)
        if compression_type == CODEC_ZSTD:
            raise UnsupportedCodecError("zstd needs message format v2 (magic 2)")
        self._magic = magic
        self._codec = compression_type
        self._batch_size = batch_size
        self._buffer = WriteBuffer(min(max(batch_size, 256), 1 << 20))
        self._max_timestamp = NO_TIMESTAMP

    @property
    def compression_type(self):
        return self._codec

    cdef uint32_t _encode(self, int64_t offset, int64_t timestamp, key, value, int attributes) except? 0:
        cdef Py_ssize_t start = self._buffer.size()
        cdef Py_ssize_t key_len = -1 if key is None else len(key)
        cdef Py_ssize_t value_len = -1 if value is None else len(value)
        cdef char* p
        cdef uint32_t crc
        self._buffer.put_i64(offset)
        self._buffer.put_i32(<int32_t>((RECORD_OVERHEAD_V0 if self._magic == 0 else RECORD_OVERHEAD_V1)
                                       + max(key_len, 0) + max(value_len, 0)))
        self._buffer.put_u32(0)
        self._buffer.put_i8(<int8_t>self._magic)
        self._buffer.put_i8(<int8_t>attributes)
        if self._magic == 1:
            self._buffer.put_i64(timestamp)
        self._buffer.put_i32(<int32_t>key_len)
        if key is not None:
            self._buffer.write_from(key)
        self._buffer.put_i32(<int32_t>value_len)
        if value is not None:
            self._buffer.write_from(value)
        p = self._buffer.pointer_at(start)
        crc = crc32_of(p + MAGIC_AT, self._buffer.size() - start - MAGIC_AT)
        store_u32be(p + CRC_AT, crc)
        return crc

    def append(self, int64_t offset, timestamp, key, value, headers=None):
        """Append a message; returns its metadata, or None when the batch is full."""
        cdef int64_t ts
        cdef Py_ssize_t size
        cdef LegacyRecordMetadata meta
        if headers:
            raise ValueError("Headers not supported in v0/v1")
        if self._magic == 0:
            ts = NO_TIMESTAMP
        elif timestamp is None:
            ts = int(time.time() * 1000)
        else:
            ts = timestamp
        for what, obj in (("key", key), ("value", value)):
            if obj is not None and not isinstance(obj, (bytes, bytearray, memoryview)):
                raise TypeError(f"Not supported type for {what}: {type(obj)}")
        size = self.size_in_bytes(offset, ts, key, value)
        if offset != 0 and self._buffer.size() + size >= self._batch_size:
            return None
        meta = LegacyRecordMetadata.__new__(LegacyRecordMetadata)
        meta.crc = self._encode(offset, ts, key, value, 0)
        meta.offset = offset
        meta.size = size
        meta.timestamp = ts
        self._last_offset = offset
        if ts > self._max_timestamp:
            self._max_timestamp = ts
        return meta

    def build(self):
        """Compress the message set into one wrapper message when a codec is set; returns a bytearray."""
        cdef WriteBuffer compressed
        cdef bytearray inner
        cdef char* frame
        if self._codec == CODEC_NONE:
            return self._buffer.take()
        inner = self._buffer.take()
        compressed = WriteBuffer(len(inner) // 2 + 64)
        compress_into(self._codec, <const char*><char*>inner, len(inner), compressed, -1)
        if self._magic == 0 and self._codec == CODEC_LZ4:
            # Kafka 0.8-0.9 brokers expect (and verify) the header checksum computed over the frame magic.
            frame = compressed.pointer_at(0)
            frame[6] = <char>((xxh32_nogil(frame, 6, 0) >> 8) & 0xFF)
        # As the Java client does: the wrapper of a v1 set carries the last inner offset (inner offsets are
        # relative) and the largest timestamp.
        self._encode(self._last_offset if self._magic == 1 else 0, self._max_timestamp, None,
                     compressed.take(), self._codec)
        return self._buffer.take()

    def size(self):
        return self._buffer.size()

    def size_in_bytes(self, offset, timestamp, key, value, headers=None):
        if headers:
            raise ValueError("Headers not supported in v0/v1")
        return LOG_OVERHEAD + self.record_size(self._magic, key, value)

    @classmethod
    def record_size(cls, magic, key, value):
        return cls.record_overhead(magic) + opt_len(key) + opt_len(value)

    @classmethod
    def record_overhead(cls, magic):
        if magic not in (0, 1):
            raise ValueError("Not supported magic")
        return RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1

    @classmethod
    def estimate_size_in_bytes(cls, magic, compression_type, key, value):
        """Upper bound of the bytes one message adds (a compressed set adds a wrapper's overhead)."""
        size = LOG_OVERHEAD + cls.record_size(magic, key, value)
        if compression_type:
            size += cls.record_overhead(magic)
        return size
