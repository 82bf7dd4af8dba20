# cython: language_level=3
"""Kafka RecordBatch v2 (magic 2): builder and reader.

RecordBatch =>                      (all integers big-endian)
  BaseOffset            int64       offset of the first record; 0 from producers, set by the broker
  Length                int32       bytes from PartitionLeaderEpoch to the end
  PartitionLeaderEpoch  int32
  Magic                 int8        2
  CRC                   uint32      CRC-32C of Attributes .. end (so the broker may rewrite the epoch)
  Attributes            int16       bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                    bit 3 timestamp type (0 create, 1 log append), bit 4 transactional,
                                    bit 5 control
  LastOffsetDelta       int32       offset delta of the last record (also the last sequence delta)
  FirstTimestamp        int64
  MaxTimestamp          int64
  ProducerId            int64       -1 unless idempotent/transactional
  ProducerEpoch         int16
  BaseSequence          int32
  RecordCount           int32
  Records               [Record]    compressed as one block (without the count) when the codec is set

Record =>                           (varints are zigzag, as protobuf's sint)
  Length                varint      bytes after this field
  Attributes            int8        unused
  TimestampDelta        varlong     from FirstTimestamp
  OffsetDelta           varint      from BaseOffset
  KeyLength             varint      -1 for null
  Key                   bytes
  ValueLength           varint      -1 for null
  Value                 bytes
  HeaderCount           varint
  Headers               [HeaderKeyLength varint, HeaderKey utf8, HeaderValueLength varint (-1 null), Value]

A control batch (bit 5) holds one record whose key is [version int16][type int16] (0 abort, 1 commit).

The classes here present kafka-python's record-layer API (fastmq.kafka.record re-exports them under
kafka-python's names); the compiled pieces (parse_record, read_batch_header, RecordBatchBuilder.append_raw)
are shared with the producer's accumulator, the consumer and the columnar reader.
"""
import struct

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_Check, PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

from fastmq._native.buffer cimport (
    BorrowedRecord, ReadCursor, WriteBuffer, borrow_bytes, borrow_record, cursor_init, cursor_remaining, load_i16be,
    load_i32be, load_i64be, load_u32be, put_varint, release_record, store_i16be, store_i32be, store_i64be,
    store_u32be, uvarint_size, varint_size, zigzag64,
)
from fastmq._native.checksum cimport crc32c_of
from fastmq._native.clock cimport now_ms
from fastmq._native.compression cimport (
    CODEC_MASK, CODEC_NONE, check_codec, compress_into, decompress_into,
)

from fastmq.errors import CompressionError, TruncatedError
from fastmq.kafka.errors import CorruptRecordError

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

cdef tuple RECORD_ERRORS = (      # indexed by the RECORD_* codes of kafka_record.h
    "ok",
    "record varint is truncated or too long",
    "record length is not positive or runs past the batch",
    "record key length is invalid",
    "record value length is invalid",
    "record header count is invalid",
    "record headers are malformed",
    "record length does not match its fields",
)


# ---------------------------------------------------------------------------------------------------------
# Parsing primitives (no Python objects, no GIL)
# ---------------------------------------------------------------------------------------------------------

cdef int raise_record_error(int code, int64_t offset) except -1:
    raise CorruptRecordError(f"corrupt record at offset {offset}: {RECORD_ERRORS[code]}")


cdef list decode_headers(const RecordView* record):
    """The record's headers as kafka-python gives them: a list of (str key, bytes-or-None value)."""
    cdef list headers = PyList_New(record.header_count)
    cdef HeaderCursor header
    cdef int32_t i
    cdef object pair
    headers_begin(&header, record)
    for i in range(record.header_count):
        next_header(&header)
        try:
            name = PyUnicode_DecodeUTF8(header.name, header.name_len, NULL)
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from None
        pair = (name, None if header.value == NULL
                else PyBytes_FromStringAndSize(header.value, header.value_len))
        Py_INCREF(pair)
        PyList_SET_ITEM(headers, i, pair)
    return headers


cdef int read_batch_header(const char* data, Py_ssize_t size, BatchHeader* out) except -1:
    """Decode and sanity-check the fixed header of the v2 batch at `data` (size = bytes available)."""
    if size < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"record batch of {size} bytes is shorter than its {BATCH_HEADER_SIZE}-byte header")
    out.base_offset = load_i64be(data + BASE_OFFSET_AT)
    out.length = load_i32be(data + LENGTH_AT)
    out.leader_epoch = load_i32be(data + LEADER_EPOCH_AT)
    out.magic = <int8_t>data[MAGIC_AT]
    out.crc = load_u32be(data + CRC_AT)
    out.attributes = load_i16be(data + ATTRIBUTES_AT)
    out.last_offset_delta = load_i32be(data + LAST_OFFSET_DELTA_AT)
    out.first_timestamp = load_i64be(data + FIRST_TIMESTAMP_AT)
    out.max_timestamp = load_i64be(data + MAX_TIMESTAMP_AT)
    out.producer_id = load_i64be(data + PRODUCER_ID_AT)
    out.producer_epoch = load_i16be(data + PRODUCER_EPOCH_AT)
    out.base_sequence = load_i32be(data + BASE_SEQUENCE_AT)
    out.record_count = load_i32be(data + RECORD_COUNT_AT)
    if out.magic != 2:
        raise CorruptRecordError(f"record batch magic {out.magic} is not 2")
    if out.length < BATCH_HEADER_SIZE - LOG_OVERHEAD or out.length > size - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch length {out.length} does not fit the {size} bytes given")
    if out.record_count < 0:
        raise CorruptRecordError(f"record batch announces {out.record_count} records")
    return 0


cdef int64_t record_set_end(const char* data, Py_ssize_t size, int64_t fetch_offset) noexcept:
    # The offset after the last whole v2 batch of a fetched record set, read from the batch headers alone (the
    # offset the decoder moves the fetch position to), or -1: no whole batch ending past fetch_offset, or
    # anything but v2 batches of a sane length (the decoder then decides).
    cdef Py_ssize_t pos = 0, batch_size
    cdef int32_t length
    cdef int64_t end = fetch_offset, last
    while size - pos >= LOG_OVERHEAD:
        length = load_i32be(data + pos + LENGTH_AT)
        if length < 0:
            return -1
        if length > size - pos - LOG_OVERHEAD:
            break                           # cut short by the broker's size limit
        batch_size = LOG_OVERHEAD + length
        if batch_size < BATCH_HEADER_SIZE or <int8_t>data[pos + MAGIC_AT] != 2:
            return -1
        last = load_i64be(data + pos + BASE_OFFSET_AT) + load_i32be(data + pos + LAST_OFFSET_DELTA_AT)
        if last + 1 > end:
            end = last + 1
        pos += batch_size
    return end if end > fetch_offset else -1


cdef uint32_t batch_crc(const char* batch, Py_ssize_t size) noexcept:
    return crc32c_of(batch + ATTRIBUTES_AT, size - ATTRIBUTES_AT)


cdef int restamp_producer(object batch, int64_t producer_id, int16_t producer_epoch,
                          int32_t base_sequence) except -1:
    # Gives a built batch (a writable buffer: a bytearray or an ArenaBlock) another producer identity and first
    # sequence (the producer's id was reset), in place; the header's fields and CRC are rewritten, the records
    # (compressed or not) stay as they are.
    cdef Py_buffer view
    cdef char* p
    cdef Py_ssize_t size
    PyObject_GetBuffer(batch, &view, PyBUF_WRITABLE)
    try:
        p = <char*>view.buf
        size = view.len
        if size < BATCH_HEADER_SIZE or p[MAGIC_AT] != 2 or LOG_OVERHEAD + load_i32be(p + LENGTH_AT) != size:
            raise ValueError(f"not one whole record batch v2 ({size} bytes)")
        store_i64be(p + PRODUCER_ID_AT, producer_id)
        store_i16be(p + PRODUCER_EPOCH_AT, producer_epoch)
        store_i32be(p + BASE_SEQUENCE_AT, base_sequence)
        store_u32be(p + CRC_AT, batch_crc(p, size))
    finally:
        PyBuffer_Release(&view)
    return 0


# ---------------------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------------------

@cython.freelist(64)
@cython.final
cdef class RecordMetadata:
    """What append() returns: kafka-python's DefaultRecordMetadata (aiokafka's BatchBuilder.append answers the
    same)."""

    @property
    def crc(self):
        return None

    def __repr__(self):
        return f"DefaultRecordMetadata(offset={self.offset!r}, size={self.size!r}, timestamp={self.timestamp!r})"


cdef Py_ssize_t encoded_headers_size(object headers) except -1:
    # The bytes of a record's headers, [(str, bytes-like or None)], their count included (out of append_raw's
    # line: most records have none).
    cdef Py_ssize_t size = varint_size(len(headers)), name_len, value_len
    cdef Py_buffer view
    cdef const char* data
    for name, value in headers:
        if not PyUnicode_Check(name):
            raise TypeError(f"header keys must be str, not {type(name)}")
        PyUnicode_AsUTF8AndSize(name, &name_len)
        size += varint_size(name_len) + name_len
        if borrow_bytes(value, &view, &data, &value_len, "header value"):
            PyBuffer_Release(&view)
        size += 1 if value_len < 0 else varint_size(value_len) + value_len
    return size


cdef char* put_headers(char* p, object headers) except NULL:
    # Writes what encoded_headers_size() measured.
    cdef Py_ssize_t name_len, value_len
    cdef Py_buffer view
    cdef const char* data
    cdef bint taken
    p = put_varint(p, len(headers))
    for name, value in headers:
        data = PyUnicode_AsUTF8AndSize(name, &name_len)
        p = put_varint(p, name_len)
        memcpy(p, data, name_len)
        p += name_len
        taken = borrow_bytes(value, &view, &data, &value_len, "header value")
        p = put_varint(p, value_len)
        if value_len > 0:
            memcpy(p, data, value_len)
            p += value_len
        if taken:
            PyBuffer_Release(&view)
    return p


cdef class DefaultRecordBase:
    """kafka-python's DefaultRecordBase: the v2 format's constants, shared by the builder and the reader."""
    HEADER_STRUCT = struct.Struct(
        ">q"   # BaseOffset
        "i"    # Length
        "i"    # PartitionLeaderEpoch
        "b"    # Magic
        "I"    # CRC
        "h"    # Attributes
        "i"    # LastOffsetDelta
        "q"    # FirstTimestamp
        "q"    # MaxTimestamp
        "q"    # ProducerId
        "h"    # ProducerEpoch
        "i"    # BaseSequence
        "i"    # RecordCount
    )
    ATTRIBUTES_OFFSET = 21
    CRC_OFFSET = 17
    AFTER_LEN_OFFSET = 12
    CODEC_MASK = 0x07
    CODEC_NONE = 0x00
    CODEC_GZIP = 0x01
    CODEC_SNAPPY = 0x02
    CODEC_LZ4 = 0x03
    CODEC_ZSTD = 0x04
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_MASK = 0x20
    LOG_APPEND_TIME = 1
    CREATE_TIME = 0
    NO_PRODUCER_ID = -1
    NO_SEQUENCE = -1
    MAX_INT = 2147483647


@cython.no_gc      # references its WriteBuffer alone: no cycle can pass through it (see WriteBuffer)
cdef class RecordBatchBuilder(DefaultRecordBase):
    """Builds one v2 batch: kafka-python's DefaultRecordBatchBuilder, plus broker-side fields.

    append() encodes each record straight into the batch buffer; build() compresses (when the codec is
    set and it pays off), writes the header and the CRC, and returns the batch as a bytearray.
    """
    MAX_RECORD_OVERHEAD = RECORD_OVERHEAD_MAX   # kafka-python's name (records.pxd)

    def __init__(self, int magic, int compression_type, is_transactional, int64_t producer_id,
                 int producer_epoch, int32_t base_sequence, Py_ssize_t batch_size, *,
                 int compression_level=-1, int64_t base_offset=0, int32_t leader_epoch=0,
                 int timestamp_type=CREATE_TIME, bint control=False, Py_ssize_t initial_capacity=-1,
                 bytearray storage=None):
        if magic < 2:
            raise ValueError(f"RecordBatchBuilder writes magic 2, not {magic} (use LegacyRecordBatchBuilder)")
        self._setup(compression_type, compression_level, bool(is_transactional), producer_id, <int16_t>producer_epoch,
                    base_sequence, batch_size, base_offset, leader_epoch, timestamp_type, control, initial_capacity,
                    storage)

    cdef int _setup(self, int compression_type, int compression_level, bint transactional, int64_t producer_id,
                    int16_t producer_epoch, int32_t base_sequence, Py_ssize_t batch_size, int64_t base_offset,
                    int32_t leader_epoch, int timestamp_type, bint control, Py_ssize_t initial_capacity,
                    object storage) except -1:
        self._codec = compression_type & CODEC_MASK
        check_codec(self._codec)
        self._compression_level = compression_level
        self._transactional = transactional
        self._control = control
        self._timestamp_type = timestamp_type
        self._base_offset = base_offset
        self._leader_epoch = leader_epoch
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._first_timestamp = 0
        self._max_timestamp = 0
        self._last_offset_delta = 0
        self._record_count = 0
        self._batch_size = batch_size
        self._built = False
        if initial_capacity < 0:
            initial_capacity = min(max(batch_size, 256), 1 << 20) + BATCH_HEADER_SIZE
        self._buffer = WriteBuffer(initial_capacity, 0, storage)
        self._buffer.claim(BATCH_HEADER_SIZE)
        return 0

    cdef int release_storage(self) except -1:
        # For the end of a producer batch's life (or of its records' memory, once compressed): the builder lets go
        # of the memory it encoded into (its counters stay readable).
        if self._buffer._capacity > 16:
            self._buffer = WriteBuffer(16)
        return 0

    cdef int set_producer_fields(self, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
                                 bint transactional) except -1:
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._transactional = transactional
        return 0

    def set_producer_state(self, int64_t producer_id, int producer_epoch, int32_t base_sequence,
                           is_transactional):
        if is_transactional and producer_id == -1:
            raise ValueError("Cannot write transactional messages without a valid producer ID")
        if producer_id != -1 and producer_epoch == -1:
            raise ValueError("Invalid negative producer epoch")
        if producer_id != -1 and base_sequence == -1:
            raise ValueError("Invalid negative sequence number")
        self.set_producer_fields(producer_id, <int16_t>producer_epoch, base_sequence, bool(is_transactional))

    @property
    def producer_id(self):
        return self._producer_id

    @property
    def producer_epoch(self):
        return self._producer_epoch

    @property
    def base_sequence(self):
        return self._base_sequence

    @property
    def record_count(self):
        return self._record_count

    @property
    def compression_type(self):
        return self._codec

    @property
    def uncompressed_size(self):
        """Bytes of header and records before compression (known after build())."""
        return self._uncompressed_size if self._built else self._buffer.size()

    cdef Py_ssize_t append_raw(self, int64_t offset_delta, int64_t timestamp,
                               const char* key, Py_ssize_t key_len,
                               const char* value, Py_ssize_t value_len,
                               object headers, bint force) except -2:
        """Encode one record at the end of the batch. Returns the bytes it took, or -1 when the batch is
        full (a first record, or force, is always taken). key/value NULL with length -1 mean null."""
        cdef int64_t timestamp_delta
        cdef Py_ssize_t body, total
        cdef Py_ssize_t headers_size = 1        # the header count, 0, without headers
        cdef char* p
        if self._built:
            raise ValueError("the batch was already built")
        if self._record_count == 0:
            self._first_timestamp = timestamp
            self._max_timestamp = timestamp
        timestamp_delta = timestamp - self._first_timestamp
        if headers is not None and len(headers):
            headers_size = encoded_headers_size(headers)
        body = (1 + varint_size(timestamp_delta) + varint_size(offset_delta)
                + (1 if key_len < 0 else varint_size(key_len) + key_len)
                + (1 if value_len < 0 else varint_size(value_len) + value_len)
                + headers_size)
        total = varint_size(body) + body
        if (not force and self._record_count
                and self._buffer.size() + total > self._batch_size):
            return -1
        p = self._buffer.claim(total)
        p = put_varint(p, body)
        p[0] = 0
        p = put_varint(p + 1, timestamp_delta)
        p = put_varint(p, offset_delta)
        if key_len < 0:
            p = put_varint(p, -1)
        else:
            p = put_varint(p, key_len)
            memcpy(p, key, key_len)
            p += key_len
        if value_len < 0:
            p = put_varint(p, -1)
        else:
            p = put_varint(p, value_len)
            memcpy(p, value, value_len)
            p += value_len
        if headers_size == 1:
            p[0] = 0
        else:
            put_headers(p, headers)
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_offset_delta = offset_delta
        self._record_count += 1
        return total

    def append(self, int64_t offset, timestamp, key, value, headers):
        """Append a record with offset delta `offset`; returns its metadata, or None when the batch is full."""
        cdef int64_t ts
        cdef BorrowedRecord record
        cdef Py_ssize_t size
        cdef RecordMetadata meta
        if timestamp is None:
            ts = now_ms()
        else:
            ts = timestamp
        borrow_record(key, value, &record)
        try:
            size = self.append_raw(offset, ts, record.key, record.key_len, record.value, record.value_len, headers,
                                   False)
        finally:
            release_record(&record)
        if size < 0:
            return None
        meta = RecordMetadata.__new__(RecordMetadata)
        meta.offset = offset
        meta.size = size
        meta.timestamp = ts
        return meta

    cdef int _write_header(self, WriteBuffer buf, int codec) except -1:
        cdef char* p = buf.pointer_at(0)
        cdef int16_t attributes = <int16_t>codec
        if self._timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self._transactional:
            attributes |= TRANSACTIONAL_BIT
        if self._control:
            attributes |= CONTROL_BIT
        store_i64be(p + BASE_OFFSET_AT, self._base_offset)
        store_i32be(p + LENGTH_AT, <int32_t>(buf.size() - LOG_OVERHEAD))
        store_i32be(p + LEADER_EPOCH_AT, self._leader_epoch)
        p[MAGIC_AT] = 2
        store_i16be(p + ATTRIBUTES_AT, attributes)
        store_i32be(p + LAST_OFFSET_DELTA_AT, <int32_t>self._last_offset_delta)
        store_i64be(p + FIRST_TIMESTAMP_AT, self._first_timestamp)
        store_i64be(p + MAX_TIMESTAMP_AT, self._max_timestamp)
        store_i64be(p + PRODUCER_ID_AT, self._producer_id)
        store_i16be(p + PRODUCER_EPOCH_AT, self._producer_epoch)
        store_i32be(p + BASE_SEQUENCE_AT, self._base_sequence)
        store_i32be(p + RECORD_COUNT_AT, self._record_count)
        store_u32be(p + CRC_AT, batch_crc(p, buf.size()))
        return 0

    cdef object finish(self):
        # The producer's path: the batch is handed over in the memory it was encoded into (an ArenaBlock that
        # returns to the producer's arena with the payload); compressed, that memory is let go of at once.
        cdef object payload = self._finished().detach_written()
        if self._compressed:
            self.release_storage()
        return payload

    cdef WriteBuffer _finished(self):
        # Compresses (where that pays) and writes the header; returns the buffer that holds the whole batch.
        cdef WriteBuffer compressed
        cdef WriteBuffer chosen = self._buffer
        cdef int codec = CODEC_NONE
        cdef Py_ssize_t records_size = self._buffer.size() - BATCH_HEADER_SIZE
        if self._built:
            raise ValueError("the batch was already built")
        self._uncompressed_size = self._buffer.size()
        if self._codec != CODEC_NONE and records_size:
            compressed = WriteBuffer(records_size // 2 + BATCH_HEADER_SIZE + 64)
            compressed.claim(BATCH_HEADER_SIZE)
            compress_into(self._codec, self._buffer.pointer_at(BATCH_HEADER_SIZE), records_size, compressed,
                          self._compression_level)
            # As librdkafka does, keep the records uncompressed when compression does not pay.
            if compressed.size() < self._buffer.size():
                chosen = compressed
                codec = self._codec
                self._compressed = True
        self._write_header(chosen, codec)
        self._built = True
        return chosen

    def build(self):
        """Finish the batch and return it (a bytearray)."""
        # A builder of the kafka-python API lives for one batch and its storage is nobody's to reuse. take() leaves
        # the builder a fresh, untouched block of its capacity, which is freed with the builder: freeing a large
        # block raises glibc's mmap threshold, so the next builders' storage comes from the heap, whose pages are
        # already mapped. detach() would free only the trimmed batch, and every builder would take (and fault in)
        # fresh mmapped pages: 1000 records of 100 B built in 163 ns each instead of 95.
        return self._finished().take()

    def write_header(self, use_compression_type=True):
        """Write the header (and CRC) for the records appended so far, in place, without compressing."""
        self._write_header(self._buffer, self._codec if use_compression_type else CODEC_NONE)

    def size(self):
        """Bytes written so far, header included."""
        return self._buffer.size()

    @classmethod
    def header_size_in_bytes(cls):
        return BATCH_HEADER_SIZE

    @classmethod
    def size_in_bytes(cls, offset_delta, timestamp_delta, key, value, headers):
        body = 1 + varint_size(offset_delta) + varint_size(timestamp_delta) + cls.size_of(key, value, headers)
        return body + varint_size(body)

    @classmethod
    def size_of(cls, key, value, headers):
        cdef Py_ssize_t size = 0
        size += 1 if key is None else varint_size(len(key)) + len(key)
        size += 1 if value is None else varint_size(len(value)) + len(value)
        size += varint_size(len(headers))
        for h_key, h_value in headers:
            encoded = h_key.encode("utf-8")
            size += varint_size(len(encoded)) + len(encoded)
            size += 1 if h_value is None else varint_size(len(h_value)) + len(h_value)
        return size

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        """Upper bound of the bytes one record adds to a batch, batch header included."""
        return BATCH_HEADER_SIZE + 21 + cls.size_of(key, value, headers)

    def __str__(self):
        return (f"DefaultRecordBatchBuilder(magic=2, base_offset={self._base_offset}, "
                f"last_offset_delta={self._last_offset_delta}, first_timestamp={self._first_timestamp}, "
                f"max_timestamp={self._max_timestamp}, is_transactional={self._transactional}, "
                f"producer_id={self._producer_id}, producer_epoch={self._producer_epoch}, "
                f"base_sequence={self._base_sequence}, records_count={self._record_count})")


# ---------------------------------------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------------------------------------

@cython.freelist(256)
cdef class Record:
    """One record of a v2 batch: kafka-python's DefaultRecord."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly Py_ssize_t size_in_bytes
    cdef object _headers    # list, or None for "no headers" (a fresh empty list is made on access)

    @property
    def headers(self):
        if self._headers is None:
            return []
        return self._headers

    @property
    def checksum(self):
        return None

    def validate_crc(self):
        return True

    def __repr__(self):
        return (f"DefaultRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, "
                f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, value={self.value!r}, "
                f"headers={self.headers!r})")


cdef class ControlRecord(Record):
    """The single record of a control batch: a transaction marker."""
    KEY_STRUCT = struct.Struct(">hh")   # version, type (0 abort, 1 commit)
    cdef readonly int16_t version
    cdef readonly int16_t type

    @property
    def abort(self):
        return self.type == 0

    @property
    def commit(self):
        return self.type == 1

    def __repr__(self):
        return (f"ControlRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, "
                f"timestamp_type={self.timestamp_type!r}, version={self.version!r}, type={self.type!r} "
                f"<{'abort' if self.abort else 'commit'}>)")


@cython.final
cdef class RecordBatch(DefaultRecordBase):
    """A v2 batch read from memory: kafka-python's DefaultRecordBatch. Iterating yields its records.

    The batch reads the caller's buffer in place (bytes, bytearray or memoryview, holding a view of it);
    only compressed batches allocate, once, for the decompressed records.
    """

    cdef Py_buffer _view            # the caller's buffer, held for our lifetime
    cdef bint _has_view             # _view must be released
    cdef const char* _data          # the batch's first byte
    cdef Py_ssize_t _size           # LOG_OVERHEAD + length
    cdef BatchHeader _header        # decoded fixed header
    cdef object _decompressed       # bytearray of decompressed records, when compressed
    cdef ReadCursor _cursor         # position of the next record
    cdef int32_t _next_index        # records returned so far
    cdef bint _opened               # records region located (decompressed if needed)
    cdef Py_ssize_t _max_decompressed_size   # bound for decompression

    def __cinit__(self, buffer, Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        PyObject_GetBuffer(buffer, &self._view, PyBUF_SIMPLE)
        self._has_view = True
        read_batch_header(<const char*>self._view.buf, self._view.len, &self._header)
        self._data = <const char*>self._view.buf
        self._size = LOG_OVERHEAD + self._header.length
        self._max_decompressed_size = max_decompressed_size

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)

    cdef int _open(self) except -1:
        cdef int codec = self._header.attributes & CODEC_MASK
        cdef WriteBuffer out
        if self._opened:
            return 0
        if codec == CODEC_NONE:
            cursor_init(&self._cursor, self._data + BATCH_HEADER_SIZE, self._size - BATCH_HEADER_SIZE)
        else:
            out = WriteBuffer((self._size - BATCH_HEADER_SIZE) * 4 + 64)
            try:
                decompress_into(codec, self._data + BATCH_HEADER_SIZE, self._size - BATCH_HEADER_SIZE, out,
                                self._max_decompressed_size)
            except CompressionError as exc:
                raise CorruptRecordError(f"record batch at offset {self._header.base_offset}: {exc}") from exc
            self._decompressed = out.take()
            cursor_init(&self._cursor, <const char*><char*>self._decompressed, len(self._decompressed))
        self._opened = True
        return 0

    cdef Record _next_record(self):
        cdef RecordView view
        cdef Record record
        cdef ControlRecord control
        cdef int status
        cdef int64_t offset
        if self._next_index >= self._header.record_count:
            if cursor_remaining(&self._cursor):
                raise CorruptRecordError(
                    f"{cursor_remaining(&self._cursor)} unconsumed bytes after all records consumed")
            return None
        status = parse_record(&self._cursor.pos, self._cursor.end, &view)
        if status:
            raise_record_error(status, self._header.base_offset + self._next_index)
        offset = self._header.base_offset + view.offset_delta
        if self._header.attributes & CONTROL_BIT:
            if view.key_len < 4:
                raise CorruptRecordError(f"control record at offset {offset} has a key of {view.key_len} bytes")
            control = ControlRecord.__new__(ControlRecord)
            control.version = load_i16be(view.key)
            control.type = load_i16be(view.key + 2)
            record = control
        else:
            record = Record.__new__(Record)
        record.offset = offset
        if self._header.attributes & TIMESTAMP_TYPE_BIT:
            record.timestamp = self._header.max_timestamp
            record.timestamp_type = LOG_APPEND_TIME
        else:
            record.timestamp = self._header.first_timestamp + view.timestamp_delta
            record.timestamp_type = CREATE_TIME
        record.key = None if view.key == NULL else PyBytes_FromStringAndSize(view.key, view.key_len)
        record.value = None if view.value == NULL else PyBytes_FromStringAndSize(view.value, view.value_len)
        record.size_in_bytes = view.size
        if view.header_count:
            record._headers = decode_headers(&view)
        self._next_index += 1
        return record

    def __iter__(self):
        self._open()
        return self

    def __next__(self):
        cdef Record record
        self._open()
        record = self._next_record()
        if record is None:
            raise StopIteration
        return record

    next = __next__

    def validate_crc(self):
        """True when the stored CRC matches the batch's bytes."""
        return batch_crc(self._data, self._size) == self._header.crc

    @property
    def base_offset(self):
        return self._header.base_offset

    @property
    def size_in_bytes(self):
        return self._size

    @property
    def leader_epoch(self):
        return self._header.leader_epoch

    @property
    def magic(self):
        return self._header.magic

    @property
    def crc(self):
        return self._header.crc

    @property
    def attributes(self):
        return self._header.attributes

    @property
    def last_offset_delta(self):
        return self._header.last_offset_delta

    @property
    def last_offset(self):
        return self._header.base_offset + self._header.last_offset_delta

    @property
    def next_offset(self):
        return self._header.base_offset + self._header.last_offset_delta + 1

    @property
    def compression_type(self):
        return self._header.attributes & CODEC_MASK

    @property
    def timestamp_type(self):
        return LOG_APPEND_TIME if self._header.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self):
        return bool(self._header.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control_batch(self):
        return bool(self._header.attributes & CONTROL_BIT)

    @property
    def first_timestamp(self):
        return self._header.first_timestamp

    @property
    def max_timestamp(self):
        return self._header.max_timestamp

    @property
    def producer_id(self):
        return self._header.producer_id

    def has_producer_id(self):
        return self._header.producer_id > NO_PRODUCER_ID

    @property
    def producer_epoch(self):
        return self._header.producer_epoch

    @property
    def base_sequence(self):
        return self._header.base_sequence

    @property
    def has_sequence(self):
        return self._header.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self):
        cdef int64_t base = self._header.base_sequence
        cdef int64_t delta = self._header.last_offset_delta
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap from INT32_MAX to 0.
        return base + delta if base <= 2147483647 - delta else delta - (2147483647 - base) - 1

    @property
    def records_count(self):
        return self._header.record_count

    def __str__(self):
        return (f"DefaultRecordBatch(magic={self._header.magic}, base_offset={self._header.base_offset}, "
                f"last_offset_delta={self._header.last_offset_delta}, "
                f"first_timestamp={self._header.first_timestamp}, max_timestamp={self._header.max_timestamp}, "
                f"is_transactional={self.is_transactional}, producer_id={self._header.producer_id}, "
                f"producer_epoch={self._header.producer_epoch}, base_sequence={self._header.base_sequence}, "
                f"records_count={self._header.record_count})")


cdef RecordBatchBuilder producer_batch_builder(int compression_type, int compression_level, Py_ssize_t batch_size,
                                               ArenaBlock storage):
    # RecordBatchBuilder(2, compression_type, False, -1, -1, -1, batch_size, compression_level=compression_level,
    # leader_epoch=-1, storage=storage) without a Python-level call with keywords: a producer makes one per batch,
    # and over thousands of partitions a batch holds a few records.
    cdef RecordBatchBuilder builder = RecordBatchBuilder.__new__(RecordBatchBuilder)
    builder._setup(compression_type, compression_level, False, NO_PRODUCER_ID, -1, NO_SEQUENCE, batch_size, 0, -1,
                   CREATE_TIME, False, storage.capacity, storage)
    return builder
