# cython: language_level=3
"""Kafka record batches (magic 2) and legacy message sets (magic 0/1): see records.pyx for the formats."""
cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from fastmq._native.arena cimport ArenaBlock
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
    # Bytes a v2 record may take beyond its key, value and headers: length 5 + timestamp 10 + offset 5 + attrs 1.
    RECORD_OVERHEAD_MAX = 21

    # Attribute bits
    TIMESTAMP_TYPE_BIT = 0x08
    TRANSACTIONAL_BIT = 0x10
    CONTROL_BIT = 0x20

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1
    NO_PRODUCER_ID = -1
    NO_SEQUENCE = -1



cdef extern from "kafka_record.h" nogil:
    # Record parsing in C (kafka_record.h beside this file), forced inline into every reader's loop.
    enum:
        RECORD_OK "FMQ_RECORD_OK"
        RECORD_BAD_VARINT "FMQ_RECORD_BAD_VARINT"
        RECORD_BAD_LENGTH "FMQ_RECORD_BAD_LENGTH"
        RECORD_BAD_KEY_LENGTH "FMQ_RECORD_BAD_KEY_LENGTH"
        RECORD_BAD_VALUE_LENGTH "FMQ_RECORD_BAD_VALUE_LENGTH"
        RECORD_BAD_HEADER_COUNT "FMQ_RECORD_BAD_HEADER_COUNT"
        RECORD_BAD_HEADERS "FMQ_RECORD_BAD_HEADERS"
        RECORD_SIZE_MISMATCH "FMQ_RECORD_SIZE_MISMATCH"

    ctypedef struct RecordView "fmq_record_view":
        # One record located inside a batch's records region; pointers borrow the batch's memory.
        int32_t size                # bytes after the record's length varint
        int8_t attributes           # unused by Kafka so far
        int64_t timestamp_delta     # added to the batch's first timestamp
        int32_t offset_delta        # added to the batch's base offset
        const char* key             # NULL when the key is null
        Py_ssize_t key_len          # -1 when the key is null
        const char* value           # NULL when the value is null
        Py_ssize_t value_len        # -1 when the value is null
        int32_t header_count        # number of headers
        const char* headers         # first byte of the (already validated) header region
        Py_ssize_t headers_len      # bytes of the header region

    int parse_record "fmq_parse_record"(const char** pos, const char* end, RecordView* out)
    const char* take_bytes "fmq_take_bytes"(const char* p, const char* end, const char** data,
                                            Py_ssize_t* length)
    const char* take_varint32 "fmq_take_varint32"(const char* p, const char* end, int32_t* out)
    const char* skip_headers "fmq_skip_headers"(const char* p, const char* end, int32_t count)

    ctypedef struct HeaderCursor "fmq_header_cursor":
        # One header at a time of a record's validated header region (headers_begin, then next_header).
        const char* name            # never NULL
        Py_ssize_t name_len
        const char* value           # NULL when the value is null
        Py_ssize_t value_len        # -1 when the value is null

    void headers_begin "fmq_headers_begin"(HeaderCursor* cursor, const RecordView* record)
    void next_header "fmq_next_header"(HeaderCursor* cursor)


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




cdef int raise_record_error(int code, int64_t offset) except -1
cdef int read_batch_header(const char* data, Py_ssize_t size, BatchHeader* out) except -1
cdef list decode_headers(const RecordView* record)
cdef int64_t record_set_end(const char* data, Py_ssize_t size, int64_t fetch_offset) noexcept
cdef uint32_t batch_crc(const char* batch, Py_ssize_t size) noexcept
cdef int restamp_producer(object batch, int64_t producer_id, int16_t producer_epoch,
                          int32_t base_sequence) except -1


@cython.final
cdef class RecordMetadata:
    # What a batch builder's append answers (kafka-python's and aiokafka's DefaultRecordMetadata).
    cdef readonly int64_t offset
    cdef readonly Py_ssize_t size
    cdef readonly int64_t timestamp


cdef class DefaultRecordBase:
    pass


cdef class RecordBatchBuilder(DefaultRecordBase):
    # What append_raw reads and writes comes first, beside the object's header: a producer over many partitions
    # finds each batch's builder out of the cache, and these span one or two cache lines, not three.
    cdef WriteBuffer _buffer            # header placeholder + records, as they are appended
    cdef int64_t _first_timestamp       # timestamp of the first record appended
    cdef int64_t _max_timestamp         # largest timestamp appended
    cdef int64_t _last_offset_delta     # offset delta of the last record appended
    cdef Py_ssize_t _batch_size         # soft limit: an append that would cross it is refused
    cdef int32_t _record_count          # records appended
    cdef bint _built                    # build() ran; appends are refused afterwards
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
    cdef Py_ssize_t _uncompressed_size  # size before compression, once built
    cdef bint _compressed               # build() returned compressed records (not the encoding buffer)

    cdef Py_ssize_t append_raw(self, int64_t offset_delta, int64_t timestamp,
                               const char* key, Py_ssize_t key_len,
                               const char* value, Py_ssize_t value_len,
                               object headers, bint force) except -2
    cdef int _write_header(self, WriteBuffer buf, int codec) except -1
    cdef object finish(self)
    cdef WriteBuffer _finished(self)
    cdef int release_storage(self) except -1
    cdef int set_producer_fields(self, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
                                 bint transactional) except -1
    cdef int _setup(self, int compression_type, int compression_level, bint transactional, int64_t producer_id,
                    int16_t producer_epoch, int32_t base_sequence, Py_ssize_t batch_size, int64_t base_offset,
                    int32_t leader_epoch, int timestamp_type, bint control, Py_ssize_t initial_capacity,
                    object storage) except -1


cdef RecordBatchBuilder producer_batch_builder(int compression_type, int compression_level, Py_ssize_t batch_size,
                                               ArenaBlock storage)
