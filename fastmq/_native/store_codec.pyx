# cython: language_level=3
"""CommitLog records of the RocketMQ 4.x store (SmartGo-Store): their byte layout and the loops that read and
write them.

CommitLog record (big-endian; also the body of a RocketMQ pull response, records back to back):
    0  TOTALSIZE i32            whole record, this field included
    4  MAGICCODE i32            MESSAGE_MAGIC_CODE (V1) or MESSAGE_MAGIC_CODE_V2
    8  BODYCRC i32              zlib CRC32(body) & 0x7FFFFFFF
    12 QUEUEID i32
    16 FLAG i32
    20 QUEUEOFFSET i64          logical position in the topic/queue's ConsumeQueue
    28 PHYSICALOFFSET i64       where this record starts in the CommitLog
    36 SYSFLAG i32              0x10: BORNHOST is IPv6, 0x20: STOREHOST is IPv6
    40 BORNTIMESTAMP i64
    48 BORNHOST                 4-byte IPv4 (16-byte IPv6) address, then port i32
    .. STORETIMESTAMP i64
    .. STOREHOST                as BORNHOST
    .. RECONSUMETIMES i32
    .. PREPAREDTRANSACTIONOFFSET i64
    .. BODYLENGTH i32, BODY
    .. TOPICLENGTH u8 (V1) or i16 (V2), TOPIC (UTF-8)
    .. PROPERTIESLENGTH i16, PROPERTIES: key \x01 value \x02, repeated
End of a CommitLog file: [bytes left i32][BLANK_MAGIC_CODE i32]. A record is only written when it leaves at least
END_FILE_MIN_BLANK_LENGTH bytes after it, so that the blank always fits.

The ConsumeQueue's units are in queue_codec.pyx, the IndexFile's entries in index_codec.pyx.

Writers publish a record by storing TOTALSIZE last (after a release fence): a writer killed half-way leaves a zero
size, which readers treat as the end of the data, never as a message.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy

from fastmq._native.buffer cimport (
    WriteBuffer, load_i16be, load_i32be, load_i64be, store_i16be, store_i32be, store_i64be,
)
from fastmq._native.queue_codec cimport CQ_STORE_UNIT_SIZE

from fastmq.errors import CorruptDataError, TruncatedError

import array

cdef extern from *:
    """
    /* Orders the record's other stores before the store of TOTALSIZE (its publication). */
    static inline void fmq_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
    """
    void release_fence "fmq_release_fence"() noexcept nogil

cdef enum:
    INT32_MAX = 0x7FFFFFFF

# Python-visible names for the format constants.
MESSAGE_MAGIC = MESSAGE_MAGIC_CODE
MESSAGE_MAGIC_V2 = MESSAGE_MAGIC_CODE_V2
BLANK_MAGIC = BLANK_MAGIC_CODE
END_FILE_MIN_BLANK = END_FILE_MIN_BLANK_LENGTH
STATUS_OK = RECORD_OK
STATUS_BLANK = RECORD_BLANK
STATUS_END = RECORD_END
STATUS_INCOMPLETE = RECORD_INCOMPLETE
STATUS_CORRUPT = RECORD_CORRUPT
SYSFLAG_TRANSACTION_TYPE_MASK = SYSFLAG_TRANSACTION_MASK
SYSFLAG_PREPARED = SYSFLAG_TRANSACTION_PREPARED
SYSFLAG_ROLLBACK = SYSFLAG_TRANSACTION_ROLLBACK

cdef bytes PROPERTY_TAGS = b"TAGS"
cdef bytes PROPERTY_KEYS = b"KEYS"
cdef bytes PROPERTY_UNIQ_KEY = b"UNIQ_KEY"
cdef array.array INT64_TEMPLATE = array.array("q")
cdef const char* EMPTY_BODY = b""
cdef array.array INT32_TEMPLATE = array.array("i")


# ---------------------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------------------

cdef inline int32_t host_length(int32_t sys_flag, int32_t v6_bit) noexcept nogil:
    return HOST_V6_LENGTH if sys_flag & v6_bit else HOST_V4_LENGTH


cdef RecordStatus parse_record(const char* p, Py_ssize_t readable, Py_ssize_t room,
                               RecordLayout* r) noexcept nogil:
    # Reads the record at p. `readable` bytes are there now; `room` is the most the record may occupy (the rest
    # of its file). Fills r and checks that every length stays inside TOTALSIZE and that they add up to it.
    cdef const char* q
    cdef const char* end
    cdef int32_t topic_length_size
    r.error = NULL
    if readable < 4:
        return RECORD_INCOMPLETE
    r.total_size = load_i32be(p + OFFSET_TOTAL_SIZE)
    if r.total_size == 0:
        return RECORD_END
    if readable < 8:
        return RECORD_INCOMPLETE
    r.magic = load_i32be(p + OFFSET_MAGIC)
    if r.magic == BLANK_MAGIC_CODE:
        if r.total_size < END_FILE_MIN_BLANK_LENGTH or r.total_size != room:
            r.error = "blank record does not reach the end of the file"
            return RECORD_CORRUPT
        return RECORD_BLANK
    if r.magic != MESSAGE_MAGIC_CODE and r.magic != MESSAGE_MAGIC_CODE_V2:
        r.error = "unknown magic code"
        return RECORD_CORRUPT
    if r.total_size < MIN_RECORD_SIZE or r.total_size > room:
        r.error = "total size out of range"
        return RECORD_CORRUPT
    if r.total_size > readable:
        return RECORD_INCOMPLETE
    end = p + r.total_size
    r.body_crc = load_i32be(p + OFFSET_BODY_CRC)
    r.queue_id = load_i32be(p + OFFSET_QUEUE_ID)
    r.flag = load_i32be(p + OFFSET_FLAG)
    r.queue_offset = load_i64be(p + OFFSET_QUEUE_OFFSET)
    r.physical_offset = load_i64be(p + OFFSET_PHYSICAL_OFFSET)
    r.sys_flag = load_i32be(p + OFFSET_SYS_FLAG)
    r.born_timestamp = load_i64be(p + OFFSET_BORN_TIMESTAMP)
    r.born_host_length = host_length(r.sys_flag, SYSFLAG_BORNHOST_V6)
    r.store_host_length = host_length(r.sys_flag, SYSFLAG_STOREHOST_V6)
    topic_length_size = 2 if r.magic == MESSAGE_MAGIC_CODE_V2 else 1
    # Everything up to BODYLENGTH has a fixed size once the host lengths are known.
    q = p + OFFSET_BORN_HOST
    if end - q < r.born_host_length + 8 + r.store_host_length + 4 + 8 + 4:
        r.error = "header longer than the total size"
        return RECORD_CORRUPT
    r.born_host = q
    q += r.born_host_length
    r.store_timestamp = load_i64be(q)
    q += 8
    r.store_host = q
    q += r.store_host_length
    r.reconsume_times = load_i32be(q)
    q += 4
    r.prepared_transaction_offset = load_i64be(q)
    q += 8
    r.body_length = load_i32be(q)
    q += 4
    if r.body_length < 0 or r.body_length > end - q:
        r.error = "body length exceeds the total size"
        return RECORD_CORRUPT
    r.body = q
    q += r.body_length
    if end - q < topic_length_size:
        r.error = "topic length beyond the total size"
        return RECORD_CORRUPT
    r.topic_length = load_i16be(q) if topic_length_size == 2 else <uint8_t>q[0]
    q += topic_length_size
    if r.topic_length <= 0 or r.topic_length > end - q:
        r.error = "topic length out of range"
        return RECORD_CORRUPT
    r.topic = q
    q += r.topic_length
    if end - q < 2:
        r.error = "properties length beyond the total size"
        return RECORD_CORRUPT
    r.properties_length = load_i16be(q)
    q += 2
    if r.properties_length < 0 or r.properties_length != end - q:
        r.error = "field lengths do not add up to the total size"
        return RECORD_CORRUPT
    r.properties = q
    return RECORD_OK


cdef bint find_property(const char* p, Py_ssize_t n, bytes name, const char** value, Py_ssize_t* value_length):
    # Points at the value of `name` in PROPERTIES (see next_property).
    cdef const char* end = p + n
    cdef Property prop
    cdef Py_ssize_t name_length = len(name)
    cdef const char* name_bytes = name
    while next_property(&p, end, &prop):
        if prop.name_length == name_length and memcmp(prop.name, name_bytes, name_length) == 0:
            value[0] = prop.value
            value_length[0] = prop.value_length
            return True
    return False


cdef str decode_utf8(const char* p, Py_ssize_t n, str what):
    try:
        return PyUnicode_DecodeUTF8(<char*>p, n, NULL)
    except UnicodeDecodeError:
        raise CorruptDataError(f"{what} is not valid UTF-8") from None


cdef str property_value(const RecordLayout* r, bytes name):
    cdef const char* value
    cdef Py_ssize_t value_length
    if find_property(r.properties, r.properties_length, name, &value, &value_length):
        return decode_utf8(value, value_length, "a property value")
    return None


cdef int32_t java_string_hash(str s) noexcept:
    # java.lang.String.hashCode over UTF-16 code units: characters beyond the BMP count as surrogate pairs.
    cdef uint32_t h = 0
    cdef uint32_t code_point
    cdef Py_UCS4 c
    for c in s:
        code_point = <uint32_t>c
        if code_point >= 0x10000:
            code_point -= 0x10000
            h = 31 * h + (0xD800 + (code_point >> 10))
            h = 31 * h + (0xDC00 + (code_point & 0x3FF))
        else:
            h = 31 * h + code_point
    return <int32_t>h


def java_hash(str s) -> int:
    """Java's String.hashCode() of s (a signed 32-bit int)."""
    return java_string_hash(s)


def tags_hash_code(str tags) -> int:
    """The ConsumeQueue tags code of a TAGS value: its Java hashCode widened to a long; 0 without tags."""
    if not tags:
        return 0
    return <int64_t>java_string_hash(tags)


@cython.final
@cython.freelist(64)
cdef class DispatchRequest:
    """What the ConsumeQueue and the IndexFile need to know about one stored message (RocketMQ's DispatchRequest)."""

    def __init__(self, str topic, int32_t queue_id, int64_t commitlog_offset, int32_t msg_size,
                 int64_t tags_code, int64_t store_timestamp, int64_t consume_queue_offset, str keys=None,
                 str uniq_key=None, int32_t sys_flag=0, int64_t prepared_transaction_offset=0):
        self.status = RECORD_OK
        self.topic = topic
        self.queue_id = queue_id
        self.commitlog_offset = commitlog_offset
        self.msg_size = msg_size
        self.tags_code = tags_code
        self.store_timestamp = store_timestamp
        self.consume_queue_offset = consume_queue_offset
        self.keys = keys
        self.uniq_key = uniq_key
        self.sys_flag = sys_flag
        self.prepared_transaction_offset = prepared_transaction_offset

    @property
    def ok(self) -> bool:
        return self.status == RECORD_OK

    def __repr__(self):
        if self.status != RECORD_OK:
            return f"DispatchRequest(status={self.status}, size={self.msg_size}, error={self.error!r})"
        return (f"DispatchRequest(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"commitlog_offset={self.commitlog_offset}, msg_size={self.msg_size}, "
                f"queue_offset={self.consume_queue_offset})")


cdef str c_error(const char* error):
    return None if error == NULL else error.decode("ascii")


cdef DispatchRequest status_request(int status, int32_t size, str error):
    cdef DispatchRequest req = DispatchRequest.__new__(DispatchRequest)
    req.status = status
    req.msg_size = size
    req.error = error
    return req


def check_message(buf, Py_ssize_t pos, Py_ssize_t readable_end=-1, int64_t expected_offset=-1,
                  bint check_crc=True) -> DispatchRequest:
    """Validate the record at `pos` of one CommitLog file (`buf` is the whole file) and describe it.

    Only bytes before `readable_end` (default: all of buf) are looked at. When `expected_offset` >= 0 the
    record's PHYSICALOFFSET must equal it, so that stale bytes from another position never pass as a record.
    The status says what was found; nothing raises for bad data.
    """
    cdef Py_buffer view
    cdef RecordLayout r
    cdef RecordStatus status
    cdef DispatchRequest req
    cdef const char* value
    cdef Py_ssize_t value_length
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if readable_end < 0 or readable_end > view.len:
            readable_end = view.len
        if pos < 0 or pos > readable_end:
            raise ValueError(f"position {pos} outside the readable 0..{readable_end}")
        status = parse_record(<const char*>view.buf + pos, readable_end - pos, view.len - pos, &r)
        if status == RECORD_OK:
            if expected_offset >= 0 and r.physical_offset != expected_offset:
                return status_request(RECORD_CORRUPT, r.total_size, "PHYSICALOFFSET differs from the position")
            if check_crc and not body_crc_matches(&r):
                return status_request(RECORD_CORRUPT, r.total_size, "body CRC mismatch")
            try:
                req = DispatchRequest.__new__(DispatchRequest)
                req.status = RECORD_OK
                req.topic = decode_utf8(r.topic, r.topic_length, "the topic")
                # The CRC covers only the body: text that does not decode is damage too.
                decode_utf8(r.properties, r.properties_length, "the properties")
                req.queue_id = r.queue_id
                req.commitlog_offset = r.physical_offset
                req.msg_size = r.total_size
                req.store_timestamp = r.store_timestamp
                req.consume_queue_offset = r.queue_offset
                req.sys_flag = r.sys_flag
                req.prepared_transaction_offset = r.prepared_transaction_offset
                req.keys = property_value(&r, PROPERTY_KEYS)
                req.uniq_key = property_value(&r, PROPERTY_UNIQ_KEY)
                if find_property(r.properties, r.properties_length, PROPERTY_TAGS, &value, &value_length) \
                        and value_length > 0:
                    req.tags_code = <int64_t>java_string_hash(decode_utf8(value, value_length, "the tags"))
                return req
            except CorruptDataError as exc:
                return status_request(RECORD_CORRUPT, r.total_size, str(exc))
        if status == RECORD_BLANK:
            return status_request(status, r.total_size, None)
        return status_request(status, 0, c_error(r.error))
    finally:
        PyBuffer_Release(&view)


cdef dict parse_properties(const char* p, Py_ssize_t n):
    cdef dict result = {}
    cdef const char* end = p + n
    cdef Property prop
    while next_property(&p, end, &prop):
        result[decode_utf8(prop.name, prop.name_length, "a property name")] = decode_utf8(
            prop.value, prop.value_length, "a property value")
    return result


def decode_properties(data) -> dict:
    """The key \\x01 value \\x02 string of a record as a dict."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return parse_properties(<const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def encode_properties(dict properties) -> bytes:
    """A dict of str -> str as key \\x01 value \\x02 ...; separators inside names or values are refused."""
    cdef list parts = []
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"message properties are str -> str, got {type(key).__name__} -> "
                            f"{type(value).__name__}")
        if "\x01" in key or "\x02" in key or "\x01" in value or "\x02" in value or not key:
            raise ValueError(f"property {key!r} is empty or contains the separators \\x01 / \\x02")
        parts.append(key)
        parts.append("\x01")
        parts.append(value)
        parts.append("\x02")
    return "".join(parts).encode("utf-8")


def decode_message(buf, Py_ssize_t pos=0, Py_ssize_t size=-1, bint check_crc=True) -> tuple:
    """Decode the record at `pos` into a tuple (see fastmq.store.message.StoredMessage for the field order).

    `size` bounds the record (default: the rest of buf). Raises TruncatedError when the record runs past the
    end of the data and CorruptDataError for anything that is not one whole, consistent message.
    """
    cdef Py_buffer view
    cdef RecordLayout r
    cdef RecordStatus status
    cdef Py_ssize_t room
    cdef Py_ssize_t readable
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or pos > view.len:
            raise ValueError(f"position {pos} outside the buffer (0..{view.len})")
        readable = view.len - pos
        # Without a size, a record longer than the data is truncated data; with one, it contradicts the unit.
        room = INT32_MAX
        if size >= 0:
            room = size
            if size < readable:
                readable = size
        status = parse_record(<const char*>view.buf + pos, readable, room, &r)
        if status == RECORD_INCOMPLETE:
            raise TruncatedError(f"record at {pos} needs more than the {readable} bytes available")
        if status == RECORD_END:
            raise CorruptDataError(f"no record at {pos}: the total size is zero")
        if status == RECORD_BLANK:
            raise CorruptDataError(f"the end-of-file blank record is at {pos}, not a message")
        if status == RECORD_CORRUPT:
            raise CorruptDataError(f"corrupt record at {pos}: {r.error.decode('ascii')}")
        if size >= 0 and r.total_size != size:
            raise CorruptDataError(f"record at {pos} is {r.total_size} bytes, expected {size}")
        if check_crc and not body_crc_matches(&r):
            raise CorruptDataError(f"record at {pos}: body CRC mismatch")
        return (
            decode_utf8(r.topic, r.topic_length, "the topic"),
            r.queue_id,
            r.queue_offset,
            r.physical_offset,
            PyBytes_FromStringAndSize(r.body, r.body_length),
            parse_properties(r.properties, r.properties_length),
            r.born_timestamp,
            r.store_timestamp,
            PyBytes_FromStringAndSize(r.born_host, r.born_host_length),
            PyBytes_FromStringAndSize(r.store_host, r.store_host_length),
            r.flag,
            r.sys_flag,
            r.reconsume_times,
            r.prepared_transaction_offset,
            r.body_crc,
            r.total_size,
            r.magic,
        )
    finally:
        PyBuffer_Release(&view)


cdef inline Py_ssize_t record_length(Py_ssize_t body_length, Py_ssize_t topic_length,
                                     Py_ssize_t properties_length, Py_ssize_t born_host_length,
                                     Py_ssize_t store_host_length) noexcept:
    return (OFFSET_BORN_HOST + born_host_length + 8 + store_host_length + 4 + 8 + 4 + body_length
            + (2 if topic_length > MAX_SHORT_TOPIC_LENGTH else 1) + topic_length + 2 + properties_length)


def message_length(Py_ssize_t body_length, Py_ssize_t topic_length, Py_ssize_t properties_length,
                   Py_ssize_t born_host_length=HOST_V4_LENGTH, Py_ssize_t store_host_length=HOST_V4_LENGTH) -> int:
    """Size of a record with these parts (RocketMQ's calMsgLength)."""
    return record_length(body_length, topic_length, properties_length, born_host_length, store_host_length)


cdef inline int32_t host_sys_flag(int32_t sys_flag, Py_ssize_t born_length, Py_ssize_t store_length) noexcept:
    # SYSFLAG's host bits always follow the hosts actually written.
    sys_flag &= ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    if born_length == HOST_V6_LENGTH:
        sys_flag |= SYSFLAG_BORNHOST_V6
    if store_length == HOST_V6_LENGTH:
        sys_flag |= SYSFLAG_STOREHOST_V6
    return sys_flag


cdef int check_host(bytes host, str what) except -1:
    if host is None or (len(host) != HOST_V4_LENGTH and len(host) != HOST_V6_LENGTH):
        raise ValueError(f"{what} must be 8 (IPv4) or 20 (IPv6) bytes: address then port")
    return 0


cdef void write_record(char* p, Py_ssize_t total, int32_t body_crc, const char* topic, Py_ssize_t topic_length,
                       int32_t queue_id, int32_t flag, int64_t queue_offset, int64_t physical_offset,
                       int32_t sys_flag, int64_t born_timestamp, const char* born_host, Py_ssize_t born_length,
                       int64_t store_timestamp, const char* store_host, Py_ssize_t store_length,
                       int32_t reconsume_times, int64_t prepared_transaction_offset, const char* body,
                       Py_ssize_t body_length, const char* properties, Py_ssize_t properties_length) noexcept nogil:
    # The one record writer. TOTALSIZE is stored last, after a release fence: until then the record does
    # not exist for readers or for recovery.
    cdef char* q
    store_i32be(p + OFFSET_MAGIC,
                MESSAGE_MAGIC_CODE_V2 if topic_length > MAX_SHORT_TOPIC_LENGTH else MESSAGE_MAGIC_CODE)
    store_i32be(p + OFFSET_BODY_CRC, body_crc)
    store_i32be(p + OFFSET_QUEUE_ID, queue_id)
    store_i32be(p + OFFSET_FLAG, flag)
    store_i64be(p + OFFSET_QUEUE_OFFSET, queue_offset)
    store_i64be(p + OFFSET_PHYSICAL_OFFSET, physical_offset)
    store_i32be(p + OFFSET_SYS_FLAG, sys_flag)
    store_i64be(p + OFFSET_BORN_TIMESTAMP, born_timestamp)
    q = p + OFFSET_BORN_HOST
    memcpy(q, born_host, born_length)
    q += born_length
    store_i64be(q, store_timestamp)
    q += 8
    memcpy(q, store_host, store_length)
    q += store_length
    store_i32be(q, reconsume_times)
    q += 4
    store_i64be(q, prepared_transaction_offset)
    q += 8
    store_i32be(q, <int32_t>body_length)
    q += 4
    memcpy(q, body, body_length)
    q += body_length
    if topic_length > MAX_SHORT_TOPIC_LENGTH:
        store_i16be(q, <int16_t>topic_length)
        q += 2
    else:
        q[0] = <char>topic_length
        q += 1
    memcpy(q, topic, topic_length)
    q += topic_length
    store_i16be(q, <int16_t>properties_length)
    q += 2
    memcpy(q, properties, properties_length)
    release_fence()
    store_i32be(p + OFFSET_TOTAL_SIZE, <int32_t>total)


cdef inline void write_blank(char* p, Py_ssize_t room) noexcept nogil:
    store_i32be(p + OFFSET_MAGIC, BLANK_MAGIC_CODE)
    release_fence()
    store_i32be(p, <int32_t>room)


def encode_message(buf, Py_ssize_t pos, str topic, int32_t queue_id, int32_t flag, int64_t queue_offset,
                   int64_t physical_offset, int32_t sys_flag, int64_t born_timestamp, bytes born_host,
                   int64_t store_timestamp, bytes store_host, int32_t reconsume_times,
                   int64_t prepared_transaction_offset, body, bytes properties, bint end_of_file_blank=True) -> int:
    """Write one record into the writable `buf` at `pos` and return its size.

    With end_of_file_blank (a CommitLog file: buf is the whole file), a record that would not leave
    END_FILE_MIN_BLANK_LENGTH bytes after it is not written; the end-of-file blank is written instead and 0 is
    returned (the caller continues in the next file). Without it, a record that does not fit raises ValueError.
    The hosts are packed address + port (8 bytes IPv4, 20 bytes IPv6); SYSFLAG's host bits follow them.
    """
    cdef Py_buffer out
    cdef Py_buffer body_view
    cdef Py_ssize_t topic_length
    cdef const char* topic_bytes = PyUnicode_AsUTF8AndSize(topic, &topic_length)
    cdef Py_ssize_t total
    cdef Py_ssize_t room
    check_host(born_host, "born_host")
    check_host(store_host, "store_host")
    if topic_length == 0 or topic_length > 32767:
        raise ValueError(f"topic must be 1..32767 UTF-8 bytes, got {topic_length}")
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties are {len(properties)} bytes, at most {MAX_PROPERTIES_LENGTH} fit")
    PyObject_GetBuffer(body, &body_view, PyBUF_SIMPLE)
    try:
        total = record_length(body_view.len, topic_length, len(properties), len(born_host), len(store_host))
        if total > INT32_MAX:
            raise ValueError(f"a record of {total} bytes exceeds the 2 GiB format limit")
        PyObject_GetBuffer(buf, &out, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            if pos < 0 or pos > out.len:
                raise ValueError(f"position {pos} outside the buffer (0..{out.len})")
            room = out.len - pos
            if end_of_file_blank:
                if room < END_FILE_MIN_BLANK_LENGTH:
                    raise ValueError(f"only {room} bytes left at {pos}: the file was not closed by a blank")
                if total + END_FILE_MIN_BLANK_LENGTH > room:
                    write_blank(<char*>out.buf + pos, room)
                    return 0
            elif total > room:
                raise ValueError(f"a record of {total} bytes does not fit in the {room} bytes left")
            write_record(<char*>out.buf + pos, total, body_crc_of(<const char*>body_view.buf, body_view.len),
                         topic_bytes, topic_length, queue_id, flag, queue_offset, physical_offset,
                         host_sys_flag(sys_flag, len(born_host), len(store_host)), born_timestamp, born_host,
                         len(born_host), store_timestamp, store_host, len(store_host), reconsume_times,
                         prepared_transaction_offset, <const char*>body_view.buf, body_view.len, properties,
                         len(properties))
            return total
        finally:
            PyBuffer_Release(&out)
    finally:
        PyBuffer_Release(&body_view)


cdef inline const PendingMessage* pending_row(MessageBatch batch, Py_ssize_t i) noexcept:
    return (<const PendingMessage*>batch._pending.pointer_at(0)) + i


@cython.final
cdef class MessageBatch:
    """Messages of one topic/queue on their way into the CommitLog, kept as columns.

    add() (or append() from compiled front ends) validates and copies each message into one arena; the CommitLog
    then calls begin() under its lock and encode() once per file until done, and the ConsumeQueue writes the
    batch's units with put_units(). Afterwards commitlog_offsets, sizes and queue_offset(i) tell where each
    message went. No Python object is made or kept per message.

    A compiled front end whose bodies already sit in a buffer (the request it decodes) holds that buffer
    (hold()) and appends the bodies as pointers into it instead of copies: the bytes move once, from the request
    into the CommitLog. The batch keeps the buffer exported (so that it cannot move or go) until every message is
    encoded, and releases it then: a fresh, large arena per request cost more in page faults than the copy.
    """

    def __cinit__(self, str topic, int32_t queue_id, bytes store_host, Py_ssize_t max_body_size,
                  Py_ssize_t max_record_size, int32_t sys_flag=0, int32_t reconsume_times=0,
                  int64_t prepared_transaction_offset=0):
        check_host(store_host, "store_host")
        PyUnicode_AsUTF8AndSize(topic, &self._topic_length)
        if self._topic_length == 0 or self._topic_length > 32767:
            raise ValueError(f"topic must be 1..32767 UTF-8 bytes, got {self._topic_length}")
        self.topic = topic
        self.queue_id = queue_id
        self._store_host = store_host
        self._max_body_size = max_body_size
        self._max_record_size = max_record_size
        self.sys_flag = sys_flag
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self._arena = WriteBuffer(4096)
        self._pending = WriteBuffer(sizeof(PendingMessage) * 16)
        self._record_sizes = array.clone(INT32_TEMPLATE, 0, False)
        self._commitlog_offsets = array.clone(INT64_TEMPLATE, 0, False)
        self.index_items = []
        self.count = 0
        self.written = 0
        self.total_bytes = 0
        self.first_queue_offset = 0
        self.store_timestamp = 0

    def __dealloc__(self):
        self.release_held()
        free(self._held)

    def add(self, body, bytes properties=b"", int64_t tags_code=0, int64_t born_timestamp=0, int32_t flag=0,
            str keys=None, str uniq_key=None, bytes born_host=None) -> None:
        """Queue one message. Raises ValueError when it is too large for max_body_size or for one file."""
        cdef Py_buffer view
        cdef const char* host = NULL
        if born_host is not None:
            check_host(born_host, "born_host")
            host = born_host
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            self.append(<const char*>view.buf, view.len, properties, len(properties), tags_code, born_timestamp,
                        flag, host, 0 if born_host is None else len(born_host), False)
        finally:
            PyBuffer_Release(&view)
        if keys or uniq_key:
            self.index_items.append((self.count - 1, keys, uniq_key))

    cdef int reserve(self, Py_ssize_t messages, Py_ssize_t data_bytes) except -1:
        # Room for this many more messages and bytes, so that appends do not grow the buffers step by step.
        self._pending.ensure(messages * sizeof(PendingMessage))
        self._arena.ensure(data_bytes)
        return 0

    cdef const char* hold(self, object source, Py_ssize_t* length) except NULL:
        # Exports source's buffer until the batch is encoded (or dropped) and returns its bytes and length:
        # bodies appended with body_held may point anywhere into them.
        cdef Py_buffer* grown
        cdef Py_buffer* view
        if self.written:
            raise ValueError("the batch was already appended")
        if self._held_count == self._held_capacity:
            grown = <Py_buffer*>realloc(self._held, (self._held_capacity + 2) * sizeof(Py_buffer))
            if grown == NULL:
                raise MemoryError()
            self._held = grown
            self._held_capacity += 2
        view = &self._held[self._held_count]
        PyObject_GetBuffer(source, view, PyBUF_SIMPLE)
        self._held_count += 1
        length[0] = view.len
        if view.buf == NULL:      # an empty buffer may export no memory: no body points into it then
            return EMPTY_BODY
        return <const char*>view.buf

    cdef void release_held(self) noexcept:
        while self._held_count:
            self._held_count -= 1
            PyBuffer_Release(&self._held[self._held_count])

    cdef int append(self, const char* body, Py_ssize_t body_length, const char* properties,
                    Py_ssize_t properties_length, int64_t tags_code, int64_t born_timestamp, int32_t flag,
                    const char* born_host, Py_ssize_t born_host_length, bint body_held) except -1:
        # add() without Python objects, for compiled front ends that fill a batch record by record. born_host
        # NULL: the store host. The bytes are copied (the caller's memory may go once this returns), except a
        # body_held body, which lies in a buffer this batch holds (hold()) and is only pointed to.
        cdef Py_ssize_t total
        cdef int size_value
        cdef PendingMessage* row
        cdef char* data
        if self.written:
            raise ValueError("the batch was already appended")
        if properties_length > MAX_PROPERTIES_LENGTH:
            raise ValueError(f"properties are {properties_length} bytes, at most {MAX_PROPERTIES_LENGTH} fit")
        if body_length > self._max_body_size:
            raise ValueError(f"message body of {body_length} bytes exceeds the maximum {self._max_body_size}")
        total = record_length(body_length, self._topic_length, properties_length,
                              born_host_length if born_host != NULL else len(self._store_host),
                              len(self._store_host))
        if total > self._max_record_size:
            raise ValueError(f"a {total}-byte record exceeds the {self._max_record_size} bytes one file holds")
        row = <PendingMessage*>self._pending.claim(sizeof(PendingMessage))
        row.data_offset = self._arena.size()
        row.born_timestamp = born_timestamp
        row.tags_code = tags_code
        row.body_length = <int32_t>body_length
        row.properties_length = <int32_t>properties_length
        row.born_host_length = <int32_t>born_host_length if born_host != NULL else 0
        row.flag = flag
        row.held_body = body if body_held else NULL
        data = self._arena.claim(row.born_host_length + properties_length + (0 if body_held else body_length))
        if row.born_host_length:
            memcpy(data, born_host, row.born_host_length)
        if properties_length:
            memcpy(data + row.born_host_length, properties, properties_length)
        if body_length and not body_held:
            memcpy(data + row.born_host_length + properties_length, body, body_length)
        size_value = <int>total
        array.extend_buffer(self._record_sizes, <char*>&size_value, 1)
        self.total_bytes += total
        self.count += 1
        return 0

    def __len__(self):
        return self.count

    @property
    def done(self) -> bool:
        return self.written == self.count

    def begin(self, int64_t first_queue_offset, int64_t store_timestamp) -> None:
        """Fix the queue offset of the first message and the STORETIMESTAMP of all (under the put lock)."""
        self.first_queue_offset = first_queue_offset
        self.store_timestamp = store_timestamp
        array.resize(self._commitlog_offsets, self.count)

    def encode(self, buf, Py_ssize_t pos, int64_t file_offset) -> int:
        """Write the next messages into one CommitLog file (buf, whose first byte is at CommitLog offset
        file_offset) from pos on, as many as fit; when the next does not fit, close the file with the blank.
        Returns the new write position (len(buf) once the blank is written)."""
        cdef Py_buffer out
        cdef Py_ssize_t topic_length
        cdef const char* topic_bytes = PyUnicode_AsUTF8AndSize(self.topic, &topic_length)
        cdef Py_ssize_t i
        cdef Py_ssize_t total
        cdef const PendingMessage* row
        cdef const char* data
        cdef const char* born_host
        cdef Py_ssize_t born_length
        cdef const char* body
        cdef const char* store_host = self._store_host
        cdef Py_ssize_t store_length = len(self._store_host)
        cdef bint consumable = (self.sys_flag & SYSFLAG_TRANSACTION_MASK) not in (
            SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)
        PyObject_GetBuffer(buf, &out, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            if pos < 0 or out.len - pos < END_FILE_MIN_BLANK_LENGTH:
                raise ValueError(f"position {pos} leaves no room for the end-of-file blank in {out.len} bytes")
            for i in range(self.written, self.count):
                total = self._record_sizes.data.as_ints[i]
                if total + END_FILE_MIN_BLANK_LENGTH > out.len - pos:
                    write_blank(<char*>out.buf + pos, out.len - pos)
                    return out.len
                row = pending_row(self, i)
                data = self._arena.pointer_at(row.data_offset)
                if row.born_host_length:
                    born_host = data
                    born_length = row.born_host_length
                else:
                    born_host = store_host
                    born_length = store_length
                body = row.held_body
                if body == NULL:
                    body = data + row.born_host_length + row.properties_length
                write_record(<char*>out.buf + pos, total, body_crc_of(body, row.body_length),
                             topic_bytes, topic_length, self.queue_id, row.flag,
                             self.first_queue_offset + i if consumable else 0, file_offset + pos,
                             host_sys_flag(self.sys_flag, born_length, store_length), row.born_timestamp,
                             born_host, born_length, self.store_timestamp, store_host, store_length,
                             self.reconsume_times, self.prepared_transaction_offset, body, row.body_length,
                             data + row.born_host_length, row.properties_length)
                self._commitlog_offsets.data.as_longlongs[i] = file_offset + pos
                pos += total
                self.written = i + 1
            if self.written == self.count:
                self.release_held()
            return pos
        finally:
            PyBuffer_Release(&out)

    def put_units(self, buf, Py_ssize_t pos, Py_ssize_t start) -> int:
        """Write the ConsumeQueue units of written messages start.. into a ConsumeQueue file from pos on, as many
        as fit; returns how many were written."""
        cdef Py_buffer out
        cdef Py_ssize_t i = start
        cdef char* p
        if start < 0 or start > self.written:
            raise ValueError("start index out of range")
        PyObject_GetBuffer(buf, &out, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            if pos < 0 or pos % CQ_STORE_UNIT_SIZE:
                raise ValueError(f"unit position {pos} is not a unit boundary")
            while i < self.written and out.len - pos >= CQ_STORE_UNIT_SIZE:
                p = <char*>out.buf + pos
                store_i64be(p, self._commitlog_offsets.data.as_longlongs[i])
                store_i32be(p + 8, self._record_sizes.data.as_ints[i])
                store_i64be(p + 12, pending_row(self, i).tags_code)
                pos += CQ_STORE_UNIT_SIZE
                i += 1
            return i - start
        finally:
            PyBuffer_Release(&out)

    @property
    def commitlog_offsets(self) -> array.array:
        """Where each written message starts in the CommitLog."""
        return self._commitlog_offsets

    @property
    def sizes(self) -> array.array:
        """Each message's record size."""
        return self._record_sizes

    def commitlog_offset(self, Py_ssize_t i) -> int:
        if not 0 <= i < self.written:
            raise IndexError("message index out of range (or not written yet)")
        return self._commitlog_offsets.data.as_longlongs[i]

    def size(self, Py_ssize_t i) -> int:
        if not 0 <= i < self.count:
            raise IndexError("message index out of range")
        return self._record_sizes.data.as_ints[i]


def pick_store_timestamp(buf, Py_ssize_t pos) -> int:
    """STORETIMESTAMP of the message record at pos, or -1 when no message header is there."""
    cdef Py_buffer view
    cdef const char* p
    cdef int32_t magic
    cdef Py_ssize_t at
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or view.len - pos < OFFSET_BORN_HOST:
            return -1
        p = <const char*>view.buf + pos
        magic = load_i32be(p + OFFSET_MAGIC)
        if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
            return -1
        at = OFFSET_BORN_HOST + host_length(load_i32be(p + OFFSET_SYS_FLAG), SYSFLAG_BORNHOST_V6)
        if view.len - pos < at + 8 or load_i32be(p) < at + 8:
            return -1
        return load_i64be(p + at)
    finally:
        PyBuffer_Release(&view)
