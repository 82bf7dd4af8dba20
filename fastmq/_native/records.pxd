# cython: language_level=3
"""Kafka record batches (magic 2) and legacy message sets (magic 0/1): see records.pyx for the formats."""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from fastmq._native.buffer cimport ReadCursor, WriteBuffer

cdef enum:
    # RecordBatch v2 header: each field's byte offset follows from the one before it.
    BASE_OFFSET_AT = 0
    LENGTH_AT = BASE_OFFSET_AT + 8
    LEADER_EPOCH_AT = LENGTH_AT + 4
    MAGIC_AT = LEADER_EPOCH_AT + 4
    CRC_AT = MAGIC_AT + 1
    ATTRIBUTES_AT = CRC_AT + 4
    LAST_OFFSET_DELTA_AT = ATTRIBUTES_AT + 2
    FIRST_TIMESTAMP_AT = LAST_OFFSET_DELTA_AT + 4
    MAX_TIMESTAMP_AT = FIRST_TIMESTAMP_AT + 8
    PRODUCER_ID_AT = MAX_TIMESTAMP_AT + 8
    PRODUCER_EPOCH_AT = PRODUCER_ID_AT + 8
    BASE_SEQUENCE_AT = PRODUCER_EPOCH_AT + 2
    RECORD_COUNT_AT = BASE_SEQUENCE_AT + 4
    BATCH_HEADER_SIZE = RECORD_COUNT_AT + 4
    LOG_OVERHEAD = LENGTH_AT + 4           # offset + length: the prefix every magic shares

    # Attribute bits
    TIMESTAMP_TYPE_BIT = 0x08
    TRANSACTIONAL_BIT = 0x10
    CONTROL_BIT = 0x20

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1
    NO_PRODUCER_ID = -1
    NO_SEQUENCE = -1

    # Record parse outcomes (parse_record runs without the GIL, so it reports instead of raising)
    RECORD_OK = 0
    RECORD_TRUNCATED = 1
    RECORD_BAD_LENGTH = 2
    RECORD_BAD_KEY_LENGTH = 3
    RECORD_BAD_VALUE_LENGTH = 4
    RECORD_BAD_HEADER_COUNT = 5
    RECORD_BAD_HEADER_KEY = 6
    RECORD_BAD_HEADER_VALUE = 7
    RECORD_SIZE_MISMATCH = 8
    RECORD_BAD_VARINT = 9


ctypedef struct RecordView:
    # One record located inside a batch's records region; pointers borrow the batch's memory.
    int32_t size                # bytes after the record's length varint
    int8_t attributes           # unused by Kafka so far, kept for completeness
    int64_t timestamp_delta     # added to the batch's first timestamp
    int32_t offset_delta        # added to the batch's base offset
    const char* key             # NULL when the key is null
    Py_ssize_t key_len          # -1 when the key is null
    const char* value           # NULL when the value is null
    Py_ssize_t value_len        # -1 when the value is null
    int32_t header_count        # number of headers
    const char* headers         # first byte of the (already validated) header region
    Py_ssize_t headers_len      # bytes of the header region


ctypedef struct BatchHeader:
    # The fixed 61-byte header of a v2 batch, decoded.
    int64_t base_offset         # offset of the first record (assigned by the broker)
    int32_t length              # bytes after the length field
    int32_t leader_epoch        # partition leader epoch (assigned by the broker)
    int8_t magic                # 2
    uint32_t crc                # CRC-32C of attributes .. end
    int16_t attributes          # codec, timestamp type, transactional, control bits
    int32_t last_offset_delta   # offset delta of the last record (also its sequence delta)
    int64_t first_timestamp     # timestamp of the first record
    int64_t max_timestamp       # largest timestamp in the batch
    int64_t producer_id         # idempotent/transactional producer id, or -1
    int16_t producer_epoch      # producer epoch, or -1
    int32_t base_sequence       # sequence number of the first record, or -1
    int32_t record_count        # number of records


# Varint and length-prefixed field readers that report RECORD_* codes instead of raising (they run
# without the GIL inside parse_record and the columnar decoder).

cdef inline int read_uvarint(ReadCursor* cur, uint64_t* out, int max_len) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>cur.pos
    cdef uint64_t result = 0
    cdef int shift = 0, i
    cdef uint8_t b
    # Two-byte varints (128..16383: typical record and value lengths) skip the loop.
    if cur.end - cur.pos >= 2 and (p[0] & 0x80) and not (p[1] & 0x80):
        out[0] = (p[0] & 0x7F) | (<uint64_t>p[1] << 7)
        cur.pos += 2
        return RECORD_OK
    for i in range(max_len):
        if cur.pos >= cur.end:
            return RECORD_TRUNCATED
        b = <uint8_t>cur.pos[0]
        cur.pos += 1
        result |= <uint64_t>(b & 0x7F) << shift
        if not (b & 0x80):
            out[0] = result
            return RECORD_OK
        shift += 7
    return RECORD_BAD_VARINT


cdef inline int read_varint32(ReadCursor* cur, int32_t* out) noexcept nogil:
    cdef uint64_t raw
    cdef int status
    if cur.pos < cur.end and not (<uint8_t>cur.pos[0] & 0x80):
        raw = <uint8_t>cur.pos[0]
        cur.pos += 1
    else:
        status = read_uvarint(cur, &raw, 5)
        if status:
            return status
    out[0] = <int32_t>(<uint32_t>raw >> 1) ^ -<int32_t>(raw & 1)
    return RECORD_OK


cdef inline int read_varint64(ReadCursor* cur, int64_t* out) noexcept nogil:
    cdef uint64_t raw
    cdef int status
    if cur.pos < cur.end and not (<uint8_t>cur.pos[0] & 0x80):
        raw = <uint8_t>cur.pos[0]
        cur.pos += 1
    else:
        status = read_uvarint(cur, &raw, 10)
        if status:
            return status
    out[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
    return RECORD_OK


cdef inline int read_bytes_field(ReadCursor* cur, const char** data, Py_ssize_t* length,
                                 int bad_length) noexcept nogil:
    # A varint length (-1 = null) and that many bytes.
    cdef int32_t n
    cdef int status = read_varint32(cur, &n)
    if status:
        return status
    if n < -1 or n > cur.end - cur.pos:
        return bad_length
    if n == -1:
        data[0] = NULL
        length[0] = -1
    else:
        data[0] = cur.pos
        length[0] = n
        cur.pos += n
    return RECORD_OK


cdef inline int parse_record(ReadCursor* cur, RecordView* out) noexcept nogil:
    # Locates the next record at `cur` and steps past it, checking every length against the batch.
    # Inline: it is the inner loop of every reader (per-record objects, columns, the consumer).
    cdef int32_t length, key_len, i
    cdef int status
    cdef ReadCursor rec
    cdef const char* header_key
    cdef const char* header_value
    cdef Py_ssize_t header_key_len, header_value_len
    status = read_varint32(cur, &length)
    if status:
        return status
    if length < 0 or length > cur.end - cur.pos:
        return RECORD_BAD_LENGTH
    rec.pos = cur.pos
    rec.end = cur.pos + length
    cur.pos = rec.end
    out.size = length
    if rec.pos >= rec.end:
        return RECORD_TRUNCATED
    out.attributes = <int8_t>rec.pos[0]
    rec.pos += 1
    status = read_varint64(&rec, &out.timestamp_delta)
    if status:
        return status
    status = read_varint32(&rec, &out.offset_delta)
    if status:
        return status
    status = read_bytes_field(&rec, &out.key, &out.key_len, RECORD_BAD_KEY_LENGTH)
    if status:
        return status
    status = read_bytes_field(&rec, &out.value, &out.value_len, RECORD_BAD_VALUE_LENGTH)
    if status:
        return status
    status = read_varint32(&rec, &out.header_count)
    if status:
        return status
    # Every header takes at least two bytes: a forged count fails here, before anything is allocated.
    if out.header_count < 0 or out.header_count > (rec.end - rec.pos) // 2:
        return RECORD_BAD_HEADER_COUNT
    out.headers = rec.pos
    for i in range(out.header_count):
        status = read_bytes_field(&rec, &header_key, &header_key_len, RECORD_BAD_HEADER_KEY)
        if status:
            return status
        if header_key_len < 0:
            return RECORD_BAD_HEADER_KEY
        status = read_bytes_field(&rec, &header_value, &header_value_len, RECORD_BAD_HEADER_VALUE)
        if status:
            return status
    out.headers_len = rec.pos - out.headers
    if rec.pos != rec.end:
        return RECORD_SIZE_MISMATCH
    return RECORD_OK


cdef int raise_record_error(int code, int64_t offset) except -1
cdef int read_batch_header(const char* data, Py_ssize_t size, BatchHeader* out) except -1
cdef list decode_headers(const RecordView* record)
cdef uint32_t batch_crc(const char* batch, Py_ssize_t size) noexcept


cdef class DefaultRecordBase:
    pass


cdef class RecordBatchBuilder(DefaultRecordBase):
    cdef WriteBuffer _buffer            # header placeholder + records, as they are appended
    cdef int _codec                     # compression codec id
    cdef int _compression_level         # -1 = codec default
    cdef bint _transactional            # sets the transactional attribute bit
    cdef bint _control                  # sets the control attribute bit (broker-written markers)
    cdef int _timestamp_type            # CREATE_TIME or LOG_APPEND_TIME
    cdef int64_t _base_offset           # written into the header (0 from producers)
    cdef int32_t _leader_epoch          # written into the header (0 as kafka-python writes; Java writes -1)
    cdef int64_t _producer_id           # idempotence: producer id or -1
    cdef int16_t _producer_epoch        # idempotence: producer epoch or -1
    cdef int32_t _base_sequence         # idempotence: first sequence or -1
    cdef int64_t _first_timestamp       # timestamp of the first record appended
    cdef int64_t _max_timestamp         # largest timestamp appended
    cdef int64_t _last_offset_delta     # offset delta of the last record appended
    cdef int32_t _record_count          # records appended
    cdef Py_ssize_t _batch_size         # soft limit: an append that would cross it is refused
    cdef Py_ssize_t _uncompressed_size  # size before compression, once built
    cdef bint _built                    # build() ran; appends are refused afterwards

    cdef Py_ssize_t append_raw(self, int64_t offset_delta, int64_t timestamp,
                               const char* key, Py_ssize_t key_len,
                               const char* value, Py_ssize_t value_len,
                               object headers, bint force) except -2
    cdef int _write_header(self, WriteBuffer buf, int codec) except -1
    cdef bytearray finish(self)
    cdef int set_producer_fields(self, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
                                 bint transactional) except -1
