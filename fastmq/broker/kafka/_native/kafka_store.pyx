# cython: language_level=3
"""Kafka record batches <-> store CommitLog messages: the data path of the embedded broker's Kafka front end.

One Kafka record is one CommitLog message (layouts: records.pyx for RecordBatch v2, store_codec.pyx for the
CommitLog record):
    value       -> BODY (empty for a null value, which KAFKA_RECORD then marks)
    timestamp   -> BORNTIMESTAMP (the batch's first timestamp + the record's delta; CreateTime), or the
                   broker's append time in a LogAppendTime topic (which keeps that type from its creation)
    key         -> the KEYS property
    headers     -> one property per header, name -> value, in order
    offset      -> QUEUEOFFSET, the ConsumeQueue logical offset the store assigns (a partition is a queue)

PROPERTIES are UTF-8 text, "name \\x01 value \\x02" repeated, and the store's recovery rejects a record whose
properties do not decode. So the plain form above is used only for what the properties can hold: text without
\\x01/\\x02, non-null values, header names other than the reserved ones (KEYS, TAGS and UNIQ_KEY, which the store
interprets, and this mapping's own KAFKA_* names). Any other record carries
    KAFKA_RECORD = base64([flags u8: 1 = null value][key: varint length (-1 null), bytes][header count varint]
                          [headers exactly as in the Kafka record])
instead of its key and header properties, preceded by KEYS when the key alone is text (for the index and for
RocketMQ consumers). Headers cannot take more than the 32767 bytes the properties' i16 length allows.
Producer fields:
    KAFKA_PRODUCER = "<producer id>.<epoch>.<first sequence>.<last sequence>"   on the last record of a batch of
        an idempotent producer, from which the broker rebuilds its de-duplication state after a crash;
    KAFKA_TXN = "<producer id>.<epoch>"   on every record of a transactional batch, since a fetch may cut a
        batch anywhere and every rebuilt batch must say whose transaction it belongs to;
    KAFKA_TXN and KAFKA_CONTROL = "0" (abort) or "1" (commit) on a transaction marker (add_control_record),
        whose body is the control record's value ([version i16 = 0][coordinator epoch i32]); its key
        ([version i16 = 0][type i16]) follows from KAFKA_CONTROL.

Produce (fill_batch): the record set of one partition of a ProduceRequest (RecordBatch v2 only, CRC-32C checked,
decompressed) fills a store MessageBatch in one call: the batch holds the record set (or the decompressed records)
and each value goes in as a pointer into it, its properties as a copy; the value is copied once, into the
CommitLog. No Python object is made per record, and Python runs once per batch.
Fetch (build_batches): CommitLog records back to back (store.read_records) become uncompressed RecordBatches v2,
one per run of records with the same producer fields: offsets are the QUEUEOFFSETs, timestamps the
BORNTIMESTAMPs; a run of transactional records is a transactional batch of its producer id and epoch, a marker a
control batch, anything else a batch without producer (-1: a fetch never needs the sequences). In a LogAppendTime
topic a run also shares its append time, and its batch says LogAppendTime with that time as its max timestamp.
KAFKA_RECORD gives key, headers and null values back exactly; without it KEYS is the key and every other property
a header, so messages from other front ends show their TAGS, UNIQ_KEY, ... as headers.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcmp, memcpy, memchr

from fastmq._native.buffer cimport (
    WriteBuffer, load_i32be, load_i64be, put_varint, store_i16be, store_i32be, store_i64be, store_u32be,
    varint_size,
)
from fastmq._native.checksum cimport crc32c_of
from fastmq._native.compression cimport CODEC_MASK, CODEC_NONE, decompress_into
from fastmq.kafka._native.records cimport (
    ATTRIBUTES_AT, BASE_OFFSET_AT, BASE_SEQUENCE_AT, BATCH_HEADER_SIZE, BatchHeader, CONTROL_BIT, CRC_AT,
    FIRST_TIMESTAMP_AT, HeaderCursor, LAST_OFFSET_DELTA_AT, LEADER_EPOCH_AT, LENGTH_AT, LOG_OVERHEAD, MAGIC_AT,
    MAX_TIMESTAMP_AT, NO_PRODUCER_ID, PRODUCER_EPOCH_AT, PRODUCER_ID_AT, RECORD_COUNT_AT, RecordView,
    TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
    batch_crc, headers_begin, next_header, parse_record as parse_kafka_record, raise_record_error, read_batch_header,
    skip_headers, take_bytes, take_varint32,
)
from fastmq._native.store_codec cimport (
    MAX_PROPERTIES_LENGTH, MessageBatch, Property, RECORD_OK, RecordLayout, RecordStatus, next_property,
    parse_record as parse_store_record,
)

from array import array

from fastmq.errors import CompressionError, CorruptDataError
from fastmq.kafka.errors import (
    CorruptRecordError, InvalidRecordError, MessageSizeTooLargeError,
    UnsupportedForMessageFormatError,
)

cdef enum:
    RAW_NULL_VALUE = 1                 # KAFKA_RECORD flags bit: the value is null
    INT32_MAX = 0x7FFFFFFF
    MAX_RECORD_PREFIX = 5 + 1 + 10 + 5  # length varint, attributes, timestamp delta, offset delta (at most)
    CONTROL_VALUE_SIZE = 6             # a control record's value: version i16, coordinator epoch i32
    NO_CONTROL = -1

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

cdef bytes KEYS = b"KEYS"
cdef bytes KAFKA_RECORD = b"KAFKA_RECORD"
cdef bytes KAFKA_PRODUCER = b"KAFKA_PRODUCER"
cdef bytes KAFKA_TXN = b"KAFKA_TXN"
cdef bytes KAFKA_CONTROL = b"KAFKA_CONTROL"
# Header names that never become plain properties: the store reads the first three, the others are ours.
cdef tuple RESERVED_NAMES = (b"KEYS", b"TAGS", b"UNIQ_KEY", b"KAFKA_RECORD", b"KAFKA_PRODUCER", b"KAFKA_TXN",
                             b"KAFKA_CONTROL")
# The keys of control records ([version i16 = 0][type i16]): abort (0) and commit (1).
cdef const char* CONTROL_KEYS = b"\x00\x00\x00\x00\x00\x00\x00\x01"

cdef bytes EMPTY = b""
cdef const char* BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
cdef signed char BASE64_VALUES[256]


cdef void init_base64_values() noexcept:
    cdef int i
    for i in range(256):
        BASE64_VALUES[i] = -1
    for i in range(64):
        BASE64_VALUES[<uint8_t>BASE64_ALPHABET[i]] = i


init_base64_values()


# ---------------------------------------------------------------------------------------------------------
# Text checks and base64
# ---------------------------------------------------------------------------------------------------------

cdef inline bint is_continuation(uint8_t c) noexcept nogil:
    return (c & 0xC0) == 0x80


cdef bint is_property_text(const char* data, Py_ssize_t n) noexcept nogil:
    # Well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF: what Python's decoder accepts)
    # without the \x01 / \x02 separators.
    cdef const uint8_t* s = <const uint8_t*>data
    cdef Py_ssize_t i = 0
    cdef uint8_t c, lo, hi
    cdef int extra
    while i < n:
        c = s[i]
        if c < 0x80:
            if c == 1 or c == 2:
                return False
            i += 1
            continue
        lo = 0x80
        hi = 0xBF
        if 0xC2 <= c <= 0xDF:
            extra = 1
        elif c == 0xE0:
            extra = 2
            lo = 0xA0
        elif c == 0xED:
            extra = 2
            hi = 0x9F
        elif 0xE1 <= c <= 0xEF:
            extra = 2
        elif c == 0xF0:
            extra = 3
            lo = 0x90
        elif 0xF1 <= c <= 0xF3:
            extra = 3
        elif c == 0xF4:
            extra = 3
            hi = 0x8F
        else:
            return False
        if n - i <= extra or s[i + 1] < lo or s[i + 1] > hi:
            return False
        if extra >= 2 and not is_continuation(s[i + 2]):
            return False
        if extra == 3 and not is_continuation(s[i + 3]):
            return False
        i += extra + 1
    return True


cdef bint is_reserved_name(const char* name, Py_ssize_t n) noexcept:
    cdef bytes reserved
    for reserved in RESERVED_NAMES:
        if len(reserved) == n and memcmp(<const char*>reserved, name, n) == 0:
            return True
    return False


cdef inline Py_ssize_t base64_size(Py_ssize_t n) noexcept nogil:
    return (n + 2) // 3 * 4


cdef char* base64_encode(const uint8_t* src, Py_ssize_t n, char* out) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint32_t v
    while n - i >= 3:
        v = (<uint32_t>src[i] << 16) | (<uint32_t>src[i + 1] << 8) | src[i + 2]
        out[0] = BASE64_ALPHABET[(v >> 18) & 63]
        out[1] = BASE64_ALPHABET[(v >> 12) & 63]
        out[2] = BASE64_ALPHABET[(v >> 6) & 63]
        out[3] = BASE64_ALPHABET[v & 63]
        out += 4
        i += 3
    if n - i == 1:
        v = <uint32_t>src[i] << 16
        out[0] = BASE64_ALPHABET[(v >> 18) & 63]
        out[1] = BASE64_ALPHABET[(v >> 12) & 63]
        out[2] = b'='
        out[3] = b'='
        out += 4
    elif n - i == 2:
        v = (<uint32_t>src[i] << 16) | (<uint32_t>src[i + 1] << 8)
        out[0] = BASE64_ALPHABET[(v >> 18) & 63]
        out[1] = BASE64_ALPHABET[(v >> 12) & 63]
        out[2] = BASE64_ALPHABET[(v >> 6) & 63]
        out[3] = b'='
        out += 4
    return out


cdef Py_ssize_t base64_decode(const char* src, Py_ssize_t n, char* out) noexcept nogil:
    # Decoded length, or -1 for anything but canonical padded base64. `out` has room for n / 4 * 3 bytes.
    cdef Py_ssize_t i, written = 0
    cdef int padding = 0
    cdef uint32_t v
    cdef signed char d
    cdef int j
    if n % 4:
        return -1
    for i in range(0, n, 4):
        v = 0
        for j in range(4):
            if src[i + j] == b'=':
                # Padding only in the last quantum, only at its end, at most two.
                if i + 4 != n or j < 2 or (j == 2 and src[i + 3] != b'='):
                    return -1
                padding += 1
                v <<= 6
                continue
            d = BASE64_VALUES[<uint8_t>src[i + j]]
            if d < 0 or padding:
                return -1
            v = (v << 6) | <uint32_t>d
        out[written] = <char>(v >> 16)
        out[written + 1] = <char>(v >> 8)
        out[written + 2] = <char>v
        written += 3
    return written - padding


# ---------------------------------------------------------------------------------------------------------
# Produce: Kafka batches -> MessageBatch
# ---------------------------------------------------------------------------------------------------------

cdef int put_property(WriteBuffer out, const char* name, Py_ssize_t name_len, const char* value,
                      Py_ssize_t value_len) except -1:
    cdef char* p = out.claim(name_len + value_len + 2)
    memcpy(p, name, name_len)
    p[name_len] = 1
    if value_len:
        memcpy(p + name_len + 1, value, value_len)
    p[name_len + 1 + value_len] = 2
    return 0


cdef bint headers_are_plain(const RecordView* record) noexcept:
    cdef HeaderCursor header
    cdef int32_t i
    headers_begin(&header, record)
    for i in range(record.header_count):
        next_header(&header)
        if (header.name_len <= 0 or header.value == NULL or not is_property_text(header.name, header.name_len)
                or not is_property_text(header.value, header.value_len)
                or is_reserved_name(header.name, header.name_len)):
            return False
    return True


cdef int encode_properties(const RecordView* record, bint key_is_text, WriteBuffer props,
                           WriteBuffer raw) except -1:
    # The record's key and headers as properties (appended to props), plain when possible.
    cdef HeaderCursor header
    cdef Py_ssize_t raw_len
    cdef int32_t i
    cdef char* q
    if record.key != NULL and key_is_text:
        put_property(props, KEYS, 4, record.key, record.key_len)
    if record.value != NULL and (record.key == NULL or key_is_text) and headers_are_plain(record):
        headers_begin(&header, record)
        for i in range(record.header_count):
            next_header(&header)
            put_property(props, header.name, header.name_len, header.value, header.value_len)
        return 0
    raw.clear()
    raw.put_i8(RAW_NULL_VALUE if record.value == NULL else 0)
    raw.put_varint(record.key_len)
    if record.key != NULL:
        raw.put_bytes(record.key, record.key_len)
    raw.put_varint(record.header_count)
    raw.put_bytes(record.headers, record.headers_len)
    raw_len = raw.size()
    q = props.claim(len(KAFKA_RECORD) + base64_size(raw_len) + 2)
    memcpy(q, <const char*>KAFKA_RECORD, len(KAFKA_RECORD))
    q += len(KAFKA_RECORD)
    q[0] = 1
    q = base64_encode(<const uint8_t*>raw.pointer_at(0), raw_len, q + 1)
    q[0] = 2
    return 0


cdef int put_producer_marker(WriteBuffer props, const BatchHeader* header) except -1:
    cdef int64_t last_sequence = <int64_t>header.base_sequence + header.last_offset_delta
    if last_sequence > INT32_MAX:          # sequences wrap after Int.MaxValue, as Kafka's do
        last_sequence -= <int64_t>INT32_MAX + 1
    text = f"{header.producer_id}.{header.producer_epoch}.{header.base_sequence}.{last_sequence}".encode("ascii")
    put_property(props, KAFKA_PRODUCER, len(KAFKA_PRODUCER), text, len(text))
    return 0


def fill_batch(MessageBatch batch, records, Py_ssize_t max_batch_bytes, bint index_keys=False,
               Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, int64_t log_append_time=-1) -> list:
    """Add every record of a produced record set (RecordBatch v2, back to back) to `batch`, one message each;
    with a log_append_time (ms, >= 0) every record takes that timestamp instead of its own.

    Returns one tuple per Kafka batch: (producer_id, producer_epoch, base_sequence, last_sequence,
    record_count, max_timestamp, transactional). With index_keys, text keys go to the store's index too. Raises
    the Kafka error the partition gets: CorruptRecordError (CRC, framing, compression), MessageSizeTooLargeError
    (a batch above max_batch_bytes, a record the store cannot hold), InvalidRecordError (control batches,
    transactional batches without a producer id, oversized headers, an empty set), UnsupportedForMessageFormatError
    (magic 0/1). Nothing is added to the store here: the caller checks the producer (sequences, transaction)
    and appends the batch, or drops it (a duplicate).
    """
    cdef const char* data
    cdef const char* pos
    cdef const char* end
    cdef Py_ssize_t remaining, batch_size, inflated_size
    cdef BatchHeader header
    cdef RecordView record
    cdef int code
    cdef int32_t i
    cdef int64_t timestamp, max_timestamp
    cdef bint key_is_text, transactional
    cdef bytes txn_text = None
    cdef WriteBuffer props = WriteBuffer(256)
    cdef WriteBuffer raw = WriteBuffer(256)
    cdef WriteBuffer inflated
    cdef list produced = []
    data = batch.hold(records, &remaining)
    if remaining == 0:
        raise InvalidRecordError("the produce request holds no record batch for this partition")
    while remaining > 0:
        if remaining < LOG_OVERHEAD + 5:
            raise CorruptRecordError(f"{remaining} bytes after the last batch are not a batch")
        if data[MAGIC_AT] != 2:
            raise UnsupportedForMessageFormatError(
                f"record batches of magic {data[MAGIC_AT]} are not accepted: produce RecordBatch v2 (magic 2)")
        read_batch_header(data, remaining, &header)
        batch_size = LOG_OVERHEAD + header.length
        if batch_size > max_batch_bytes:
            raise MessageSizeTooLargeError(
                f"a record batch of {batch_size} bytes exceeds max.message.bytes ({max_batch_bytes})")
        if batch_crc(data, batch_size) != header.crc:
            raise CorruptRecordError(f"record batch at offset {header.base_offset}: CRC-32C mismatch")
        if header.attributes & CONTROL_BIT:
            raise InvalidRecordError("control batches are written by brokers, not produced")
        transactional = header.attributes & TRANSACTIONAL_BIT != 0
        if transactional:
            if header.producer_id < 0:
                raise InvalidRecordError("a transactional record batch needs a producer id")
            txn_text = f"{header.producer_id}.{header.producer_epoch}".encode("ascii")
        if header.record_count <= 0:
            raise InvalidRecordError("a record batch needs at least one record")
        pos = data + BATCH_HEADER_SIZE
        end = data + batch_size
        if header.attributes & CODEC_MASK != CODEC_NONE:
            # Each compressed batch its own buffer: the batch holds it for the values that point into it.
            inflated = WriteBuffer(max(header.length * 4, 4096))
            try:
                decompress_into(header.attributes & CODEC_MASK, pos, end - pos, inflated, max_decompressed_size)
            except CompressionError as exc:
                raise CorruptRecordError(f"record batch does not decompress: {exc}") from None
            pos = batch.hold(inflated, &inflated_size)
            end = pos + inflated_size
        max_timestamp = header.first_timestamp if log_append_time < 0 else log_append_time
        # The values are held, not copied: the arena takes properties only, and grows as they come.
        batch.reserve(header.record_count, 0)
        # One try around the loop, not one a record: entering a try costs a walk of the exception state.
        # Only the batch's size checks raise ValueError here (keys are decoded after is_property_text said
        # they are UTF-8).
        try:
            for i in range(header.record_count):
                code = parse_kafka_record(&pos, end, &record)
                if code:
                    raise_record_error(code, header.base_offset + i)
                timestamp = log_append_time
                if timestamp < 0:
                    timestamp = header.first_timestamp + record.timestamp_delta
                if timestamp > max_timestamp:
                    max_timestamp = timestamp
                key_is_text = record.key != NULL and is_property_text(record.key, record.key_len)
                props.clear()
                encode_properties(&record, key_is_text, props, raw)
                if transactional:
                    put_property(props, KAFKA_TXN, len(KAFKA_TXN), txn_text, len(txn_text))
                if i == header.record_count - 1 and header.producer_id != NO_PRODUCER_ID:
                    put_producer_marker(props, &header)
                if props.size() > MAX_PROPERTIES_LENGTH:
                    raise InvalidRecordError(
                        f"the key and headers of record {i} take {props.size()} bytes as store properties, "
                        f"more than the {MAX_PROPERTIES_LENGTH} a message holds")
                batch.append(record.value, max(record.value_len, 0), props.pointer_at(0), props.size(), 0,
                             timestamp, 0, NULL, 0, record.value != NULL)
                if index_keys and key_is_text and record.key_len > 0:
                    batch.index_items.append((batch.count - 1, PyUnicode_DecodeUTF8(record.key, record.key_len,
                                                                                    NULL), None))
        except ValueError as exc:
            raise MessageSizeTooLargeError(str(exc)) from None
        if pos != end:
            raise CorruptRecordError(f"record batch at offset {header.base_offset} has bytes after its "
                                     f"{header.record_count} records")
        produced.append((header.producer_id, header.producer_epoch, header.base_sequence,
                         <int64_t>header.base_sequence + header.last_offset_delta, header.record_count,
                         max_timestamp, transactional))
        data += batch_size
        remaining -= batch_size
    return produced


def add_control_record(MessageBatch batch, int64_t producer_id, int producer_epoch, bint commit,
                       int32_t coordinator_epoch, int64_t timestamp) -> None:
    """Add a transaction marker of this producer to `batch`: commit or abort."""
    cdef char value[CONTROL_VALUE_SIZE]
    cdef WriteBuffer props = WriteBuffer(64)
    if producer_id < 0 or not 0 <= producer_epoch <= 32767:
        raise ValueError(f"a transaction marker needs a producer id and epoch, not {producer_id}/{producer_epoch}")
    txn_text = f"{producer_id}.{producer_epoch}".encode("ascii")
    put_property(props, KAFKA_TXN, len(KAFKA_TXN), txn_text, len(txn_text))
    put_property(props, KAFKA_CONTROL, len(KAFKA_CONTROL), b"1" if commit else b"0", 1)
    store_i16be(value, 0)
    store_i32be(value + 2, coordinator_epoch)
    batch.append(value, CONTROL_VALUE_SIZE, props.pointer_at(0), props.size(), 0, timestamp, 0, NULL, 0, False)


# ---------------------------------------------------------------------------------------------------------
# Fetch: CommitLog records -> Kafka batches
# ---------------------------------------------------------------------------------------------------------

ctypedef struct KafkaFields:
    const char* key              # NULL for a null key
    Py_ssize_t key_len           # -1 for a null key
    const char* value            # NULL for a null value
    Py_ssize_t value_len         # -1 for a null value
    int32_t header_count         # headers to write
    const char* raw_headers      # KAFKA_RECORD: the headers, Kafka-encoded; NULL: they are plain properties
    Py_ssize_t headers_size      # bytes the headers take in the Kafka record (without the count)
    int64_t producer_id          # KAFKA_TXN: the transaction's producer; -1 outside transactions
    int16_t producer_epoch
    int control                  # a marker: 0 abort, 1 commit; NO_CONTROL for a data record


cdef inline bint name_is(const char* name, Py_ssize_t n, bytes expected) noexcept:
    return n == len(expected) and memcmp(name, <const char*>expected, n) == 0


cdef inline bint is_producer_field(const char* name, Py_ssize_t n) noexcept:
    return name_is(name, n, KAFKA_PRODUCER) or name_is(name, n, KAFKA_TXN) or name_is(name, n, KAFKA_CONTROL)


cdef bint parse_decimal(const char* s, Py_ssize_t n, int64_t limit, int64_t* out) noexcept:
    # A non-negative decimal of at most `limit`, nothing else.
    cdef int64_t value = 0
    cdef Py_ssize_t i
    if n <= 0 or n > 19:
        return False
    for i in range(n):
        if not c'0' <= s[i] <= c'9':
            return False
        value = value * 10 + (s[i] - c'0')
    if value > limit:
        return False
    out[0] = value
    return True


cdef bint parse_txn(const char* s, Py_ssize_t n, KafkaFields* out) noexcept:
    # "<producer id>.<epoch>"; False (and nothing set) when it is not that.
    cdef const char* dot = <const char*>memchr(s, c'.', n)
    cdef int64_t producer_id, epoch
    if dot == NULL:
        return False
    if not parse_decimal(s, dot - s, 0x7FFFFFFFFFFFFFFF, &producer_id):
        return False
    if not parse_decimal(dot + 1, n - (dot + 1 - s), 32767, &epoch):
        return False
    out.producer_id = producer_id
    out.producer_epoch = <int16_t>epoch
    return True


cdef int kafka_fields(const RecordLayout* r, WriteBuffer scratch, KafkaFields* out) except -1:
    # Where the Kafka key, value and headers of a stored message are. A KAFKA_RECORD is decoded into scratch,
    # which must stay untouched while `out` is used.
    cdef const char* p = r.properties
    cdef const char* end = r.properties + r.properties_length
    cdef Property prop
    cdef const char* raw_text = NULL
    cdef Py_ssize_t raw_text_len = 0
    cdef Py_ssize_t decoded
    cdef int control = NO_CONTROL
    out.key = NULL
    out.key_len = -1
    out.value = r.body
    out.value_len = r.body_length
    out.header_count = 0
    out.raw_headers = NULL
    out.headers_size = 0
    out.producer_id = -1
    out.producer_epoch = -1
    out.control = NO_CONTROL
    while next_property(&p, end, &prop):
        if name_is(prop.name, prop.name_length, KEYS):
            out.key = prop.value
            out.key_len = prop.value_length
        elif name_is(prop.name, prop.name_length, KAFKA_RECORD):
            raw_text = prop.value
            raw_text_len = prop.value_length
        elif name_is(prop.name, prop.name_length, KAFKA_TXN):
            parse_txn(prop.value, prop.value_length, out)
        elif name_is(prop.name, prop.name_length, KAFKA_CONTROL):
            if prop.value_length == 1 and (prop.value[0] == c'0' or prop.value[0] == c'1'):
                control = prop.value[0] - c'0'
        elif not name_is(prop.name, prop.name_length, KAFKA_PRODUCER):
            out.header_count += 1
            out.headers_size += (varint_size(prop.name_length) + prop.name_length + varint_size(prop.value_length)
                                 + prop.value_length)
    if control != NO_CONTROL and out.producer_id >= 0 and r.body_length == CONTROL_VALUE_SIZE:
        # A transaction marker: a control record, whatever else the message carries.
        out.control = control
        out.key = CONTROL_KEYS + 4 * control
        out.key_len = 4
        out.header_count = 0
        out.headers_size = 0
        return 0
    if raw_text == NULL:
        return 0
    scratch.clear()
    decoded = base64_decode(raw_text, raw_text_len, scratch.claim(raw_text_len // 4 * 3 + 1))
    if decoded < 1 or parse_raw(scratch.pointer_at(0), decoded, out) != scratch.pointer_at(0) + decoded:
        raise CorruptDataError("a stored KAFKA_RECORD property is malformed")
    return 0


cdef const char* parse_raw(const char* raw, Py_ssize_t n, KafkaFields* out) noexcept:
    # Fills `out` from a decoded KAFKA_RECORD, checking every length. Returns the position after the last
    # header (raw + n for a well-formed one), NULL when malformed.
    cdef const char* end = raw + n
    cdef const char* p
    cdef int32_t count
    if <uint8_t>raw[0] & RAW_NULL_VALUE:
        out.value = NULL
        out.value_len = -1
    p = take_bytes(raw + 1, end, &out.key, &out.key_len)
    if p == NULL:
        return NULL
    p = take_varint32(p, end, &count)
    if p == NULL or count < 0 or count > (end - p) // 2:
        return NULL
    out.raw_headers = p
    if count:
        p = skip_headers(p, end, count)
        if p == NULL:
            return NULL
    out.header_count = count
    out.headers_size = p - out.raw_headers
    return p


cdef inline Py_ssize_t bytes_field_size(Py_ssize_t length) noexcept:
    return 1 if length < 0 else varint_size(length) + length


cdef inline char* put_bytes_field(char* p, const char* data, Py_ssize_t length) noexcept:
    if length < 0:
        return put_varint(p, -1)
    p = put_varint(p, length)
    if length:
        memcpy(p, data, length)
    return p + length


cdef char* put_plain_headers(char* p, const RecordLayout* r) noexcept:
    cdef const char* q = r.properties
    cdef const char* end = r.properties + r.properties_length
    cdef Property prop
    while next_property(&q, end, &prop):
        if not (name_is(prop.name, prop.name_length, KEYS) or name_is(prop.name, prop.name_length, KAFKA_RECORD)
                or is_producer_field(prop.name, prop.name_length)):
            p = put_bytes_field(p, prop.name, prop.name_length)
            p = put_bytes_field(p, prop.value, prop.value_length)
    return p


cdef int parse_stored(const char* p, Py_ssize_t available, RecordLayout* r) except -1:
    cdef RecordStatus status = parse_store_record(p, available, available, r)
    if status != RECORD_OK:
        raise CorruptDataError(f"a gathered CommitLog record does not parse "
                               f"({r.error.decode('ascii') if r.error != NULL else 'truncated'})")
    return 0


ctypedef struct BatchPlan:
    Py_ssize_t count             # records in the batch
    Py_ssize_t size              # bytes, header included
    int64_t base_offset
    int64_t last_offset
    int64_t first_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int control
    bint log_append_time        # the batch says LogAppendTime (its records share first_timestamp)


cdef inline Py_ssize_t record_body_size(const RecordLayout* r, const KafkaFields* f, const BatchPlan* plan
                                        ) noexcept:
    return (1 + varint_size(r.born_timestamp - plan.first_timestamp) + varint_size(r.queue_offset - plan.base_offset)
            + bytes_field_size(f.key_len) + bytes_field_size(f.value_len) + varint_size(f.header_count)
            + f.headers_size)


cdef inline bint continues(const BatchPlan* plan, const RecordLayout* r, const KafkaFields* f) noexcept:
    # Whether the record can join the batch: same producer fields, not a marker (a control batch holds one
    # record, as Kafka's do), offsets a delta can express, and in a LogAppendTime batch the same append time.
    return (f.producer_id == plan.producer_id and f.producer_epoch == plan.producer_epoch
            and f.control == NO_CONTROL and plan.control == NO_CONTROL and plan.base_offset <= r.queue_offset
            and r.queue_offset - plan.base_offset <= INT32_MAX
            and not (plan.log_append_time and r.born_timestamp != plan.first_timestamp))


cdef void write_batch_header(char* start, const BatchPlan* plan) noexcept:
    cdef int16_t attributes = TIMESTAMP_TYPE_BIT if plan.log_append_time else 0
    if plan.producer_id >= 0:
        attributes |= TRANSACTIONAL_BIT
        if plan.control != NO_CONTROL:
            attributes |= CONTROL_BIT
    store_i64be(start + BASE_OFFSET_AT, plan.base_offset)
    store_i32be(start + LENGTH_AT, <int32_t>(plan.size - LOG_OVERHEAD))
    store_i32be(start + LEADER_EPOCH_AT, 0)
    start[MAGIC_AT] = 2
    store_i16be(start + ATTRIBUTES_AT, attributes)
    store_i32be(start + LAST_OFFSET_DELTA_AT, <int32_t>(plan.last_offset - plan.base_offset))
    store_i64be(start + FIRST_TIMESTAMP_AT, plan.first_timestamp)
    store_i64be(start + MAX_TIMESTAMP_AT, plan.max_timestamp)
    store_i64be(start + PRODUCER_ID_AT, plan.producer_id)
    store_i16be(start + PRODUCER_EPOCH_AT, plan.producer_epoch)
    store_i32be(start + BASE_SEQUENCE_AT, -1)
    store_i32be(start + RECORD_COUNT_AT, <int32_t>plan.count)
    store_u32be(start + CRC_AT, batch_crc(start, plan.size))


def build_batches(records, Py_ssize_t count, Py_ssize_t max_bytes, bint take_first=True,
                  bint log_append_time=False) -> tuple:
    """Uncompressed RecordBatches v2 from `count` CommitLog records back to back (store.read_records): one per
    run of records with the same producer fields (see the top of this module), back to back. With
    log_append_time (the records' topic is a LogAppendTime topic), the batches say so (markers excepted).

    Records are taken while the batches stay within max_bytes; with take_first the first one is taken whatever
    its size (what KIP-74 allows the first partition of a fetch). Returns (batches, records taken, offset after
    the last one taken); (b"", 0, -1) when nothing is taken. Raises CorruptDataError for records that do not
    parse.
    """
    cdef Py_buffer view
    cdef const char* data
    cdef const char* p
    cdef Py_ssize_t available, i, b, taken = 0, size, body, total = 0, batches = 0
    cdef RecordLayout r
    cdef KafkaFields f
    cdef WriteBuffer scratch = WriteBuffer(256)
    cdef WriteBuffer plans = WriteBuffer(sizeof(BatchPlan) * 4)
    cdef BatchPlan* plan = NULL
    cdef BatchPlan candidate
    cdef bytes out_bytes
    cdef char* out
    cdef char* start
    if count <= 0:
        return EMPTY, 0, -1
    PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
    try:
        data = <const char*>view.buf
        # Pass 1: how many records fit, in which batches, and their sizes.
        p = data
        available = view.len
        for i in range(count):
            parse_stored(p, available, &r)
            kafka_fields(&r, scratch, &f)
            if plan == NULL or not continues(plan, &r, &f):
                candidate.count = 0
                candidate.size = BATCH_HEADER_SIZE
                candidate.base_offset = candidate.last_offset = r.queue_offset
                candidate.first_timestamp = candidate.max_timestamp = r.born_timestamp
                candidate.producer_id = f.producer_id
                candidate.producer_epoch = f.producer_epoch
                candidate.control = f.control
                candidate.log_append_time = log_append_time and f.control == NO_CONTROL
                body = record_body_size(&r, &f, &candidate)
                size = BATCH_HEADER_SIZE + varint_size(body) + body
                if (taken or not take_first) and total + size > max_bytes:
                    break
                plans.put_bytes(<const char*>&candidate, sizeof(BatchPlan))
                plan = <BatchPlan*>plans.pointer_at((plans.size() // sizeof(BatchPlan) - 1) * sizeof(BatchPlan))
                size -= BATCH_HEADER_SIZE
            else:
                body = record_body_size(&r, &f, plan)
                size = varint_size(body) + body
                if (taken or not take_first) and total + size > max_bytes:
                    break
            total += size + (BATCH_HEADER_SIZE if plan.count == 0 else 0)
            plan.size += size
            plan.count += 1
            plan.last_offset = r.queue_offset
            if r.born_timestamp > plan.max_timestamp:
                plan.max_timestamp = r.born_timestamp
            taken += 1
            p += r.total_size
            available -= r.total_size
        if taken == 0:
            return EMPTY, 0, -1
        # Pass 2: write.
        out_bytes = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(out_bytes)
        p = data
        batches = plans.size() // sizeof(BatchPlan)
        for b in range(batches):
            plan = <BatchPlan*>plans.pointer_at(b * sizeof(BatchPlan))
            start = out
            out += BATCH_HEADER_SIZE
            for i in range(plan.count):
                parse_stored(p, view.len - (p - data), &r)
                kafka_fields(&r, scratch, &f)
                body = record_body_size(&r, &f, plan)
                out = put_varint(out, body)
                out[0] = 0
                out = put_varint(out + 1, r.born_timestamp - plan.first_timestamp)
                out = put_varint(out, r.queue_offset - plan.base_offset)
                out = put_bytes_field(out, f.key, f.key_len)
                out = put_bytes_field(out, f.value, f.value_len)
                out = put_varint(out, f.header_count)
                if f.raw_headers != NULL:
                    memcpy(out, f.raw_headers, f.headers_size)
                    out += f.headers_size
                elif f.control == NO_CONTROL:
                    out = put_plain_headers(out, &r)
                p += r.total_size
            if out - start != plan.size:
                raise AssertionError(f"batch size {out - start} differs from the computed {plan.size}")
            write_batch_header(start, plan)
        return out_bytes, taken, plan.last_offset + 1
    finally:
        PyBuffer_Release(&view)


# ---------------------------------------------------------------------------------------------------------
# Scans for the broker's bookkeeping (time index, producer state)
# ---------------------------------------------------------------------------------------------------------

def record_timestamps(records, Py_ssize_t count) -> tuple:
    """(queue offsets, born timestamps) of `count` CommitLog records back to back, as two array('q')."""
    cdef Py_buffer view
    cdef const char* p
    cdef Py_ssize_t i
    cdef RecordLayout r
    cdef long long offset, timestamp
    offsets = array("q")
    timestamps = array("q")
    PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
    try:
        p = <const char*>view.buf
        for i in range(count):
            parse_stored(p, view.len - (p - <const char*>view.buf), &r)
            offset = r.queue_offset
            timestamp = r.born_timestamp
            offsets.append(offset)
            timestamps.append(timestamp)
            p += r.total_size
        return offsets, timestamps
    finally:
        PyBuffer_Release(&view)


def producer_markers(records, Py_ssize_t count) -> list:
    """(queue offset, producer id, epoch, first sequence, last sequence) of every KAFKA_PRODUCER property in
    `count` CommitLog records back to back (the last record of each idempotent batch)."""
    cdef Py_buffer view
    cdef const char* p
    cdef const char* q
    cdef const char* end
    cdef Property prop
    cdef Py_ssize_t i
    cdef RecordLayout r
    cdef list found = []
    PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
    try:
        p = <const char*>view.buf
        for i in range(count):
            parse_stored(p, view.len - (p - <const char*>view.buf), &r)
            q = r.properties
            end = r.properties + r.properties_length
            while next_property(&q, end, &prop):
                if name_is(prop.name, prop.name_length, KAFKA_PRODUCER):
                    fields = PyBytes_FromStringAndSize(prop.value, prop.value_length).split(b".")
                    if len(fields) == 4:
                        try:
                            found.append((r.queue_offset, int(fields[0]), int(fields[1]), int(fields[2]),
                                          int(fields[3])))
                        except ValueError:
                            pass      # not ours after all: a message from elsewhere with this property
            p += r.total_size
        return found
    finally:
        PyBuffer_Release(&view)
