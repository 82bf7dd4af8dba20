# cython: language_level=3
"""RocketMQ messages on the wire: what a producer sends and what a pull returns.

SEND_MESSAGE_V2 (request code 310): the message body is the command's body; the header is SendMessageRequestHeaderV2,
    single-letter extFields: a producerGroup, b topic, c defaultTopic, d defaultTopicQueueNums, e queueId,
    f sysFlag, g bornTimestamp, h flag, i properties, j reconsumeTimes, k unitMode, l maxReconsumeTimes, m batch,
    n brokerName (5.x).
PROPERTIES: name \\x01 value \\x02, repeated (TAGS, KEYS space-separated, WAIT, DELAY, UNIQ_KEY, user properties).
SYSFLAG of a sent message: COMPRESSED 0x1 with the codec in bits 8-10 (ZLIB 3 << 8; the broker and old clients
    read 0 as zlib too), MULTI_TAGS 0x2, transaction type bits 2-3. Bodies of at least compress_threshold bytes
    (RocketMQ: 4 KiB) are zlib-compressed, as the Java producer does; batches never are.
SEND_BATCH_MESSAGE (320): the same header with m = true, sysFlag and flag 0, properties WAIT=true; the body is each
    message as MessageDecoder.encodeMessage writes it, back to back:
        [TOTALSIZE i32][MAGICCODE i32 = 0][BODYCRC i32 = 0][FLAG i32][BODYLENGTH i32][BODY]
        [PROPERTIESLENGTH i16][PROPERTIES]
Pull response body (PULL_MESSAGE 11, code SUCCESS): CommitLog records back to back, in the layout documented at
    the top of fastmq/_native/store_codec.pyx; decode_messages reads them with the store's record parser (one
    decoder for the file and the wire) into MessageExt objects, checking BODYCRC and inflating compressed bodies.
Message ids: UNIQ_KEY is the client's id, 32 upper-case hex digits as Java's MessageClientIDSetter lays them out:
    a 20-digit prefix (address, pid, a per-process random part), the milliseconds since the month began (8 digits,
    wrapping) and a counter (4 digits, wrapping). The offset id (offset_msg_id) is hex(store host address and
    port, CommitLog offset i64), upper case.
Send response (code SUCCESS 0, FLUSH_DISK_TIMEOUT 10, SLAVE_NOT_AVAILABLE 11, FLUSH_SLAVE_TIMEOUT 12; any other is
    an error): SendMessageResponseHeader in extFields: msgId (the offset id), queueId, queueOffset (decimal),
    transactionId; no body. decode_send_result reads a ROCKETMQ binary one straight into a SendResult.
SendEncoder writes a whole SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request (frame, ROCKETMQ binary header with the
    fields in the order a..k, m, n; properties; body) into one buffer from the Message objects: the producer's
    only encoder (a signed or JSON-header request is re-encoded from the decoded frame).
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from fastmq._native.buffer cimport WriteBuffer, load_i32be, store_i16be, store_i32be
from fastmq._native.store_codec cimport (
    RECORD_BLANK, RECORD_CORRUPT, RECORD_END, RECORD_INCOMPLETE, RECORD_OK, RecordLayout, RecordStatus,
    SYSFLAG_COMPRESSED, SYSFLAG_TRANSACTION_PREPARED, body_crc_matches, parse_properties, parse_record,
)
from fastmq.rocketmq._native.remoting cimport (
    ExtValue, begin_binary_header, begin_frame, binary_ext_fields, end_binary_header, end_frame, put_ext,
    put_ext_int, put_ext_str,
)

import zlib

from fastmq._native.compression import decompress as codec_decompress
from fastmq._native.store_codec import encode_properties
from fastmq.errors import CompressionError, CorruptDataError, ProtocolError, TruncatedError

cdef enum:
    BATCH_ITEM_FIXED_SIZE = 4 + 4 + 4 + 4 + 4 + 2   # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLENGTH, PROPERTIESLENGTH
    MAX_PROPERTIES_BYTES = 32767                    # PROPERTIESLENGTH is a signed short
    HEADER_ROOM = 384                               # a SEND_MESSAGE_V2 frame's bytes besides its body, usually
    COMPRESSION_TYPE_SHIFT = 8
    COMPRESSION_TYPE_MASK = 0x700
    COMPRESSION_LZ4 = 1 << 8
    COMPRESSION_ZSTD = 2 << 8
    COMPRESSION_ZLIB = 3 << 8
    FASTMQ_CODEC_LZ4 = 3                            # fastmq._native.compression's codec numbers
    FASTMQ_CODEC_ZSTD = 4

SYSFLAG_COMPRESSED_ZLIB = SYSFLAG_COMPRESSED | COMPRESSION_ZLIB
DEFAULT_COMPRESS_THRESHOLD = 4096
DEFAULT_MAX_BODY_SIZE = 64 * 1024 * 1024            # a decompressed body may not grow past this

# Property names (C/message/MessageConst.java).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"

cdef str TAGS = PROPERTY_TAGS
cdef str KEYS = PROPERTY_KEYS
cdef str UNIQ_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


@cython.final
@cython.freelist(64)
cdef class SendResult:
    """How a broker stored a sent message or batch (fastmq.rocketmq.message re-exports it); immutable. Compiled
    because a sync send makes one per call: a frozen dataclass took 11k instructions to make, a fifth of what the
    whole client then spent on a send."""

    cdef readonly object status                   # a SendStatus
    cdef readonly str msg_id                      # the client's id (UNIQ_KEY); for a batch, the ids joined by commas
    cdef readonly str offset_msg_id               # where the broker stored it (for a batch, the ids joined by commas)
    cdef readonly object message_queue            # the MessageQueue it was stored in
    cdef readonly int64_t queue_offset            # its offset in that queue (a batch: the first message's)
    cdef readonly object transaction_id           # str, or None outside a transaction

    def __init__(self, status, str msg_id not None, str offset_msg_id not None, message_queue,
                 int64_t queue_offset, transaction_id=None):
        self.status = status
        self.msg_id = msg_id
        self.offset_msg_id = offset_msg_id
        self.message_queue = message_queue
        self.queue_offset = queue_offset
        self.transaction_id = transaction_id

    cdef tuple _fields(self):
        return (self.status, self.msg_id, self.offset_msg_id, self.message_queue, self.queue_offset,
                self.transaction_id)

    def __eq__(self, other):
        if type(other) is not SendResult:
            return NotImplemented
        return self._fields() == (<SendResult>other)._fields()

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        return SendResult, self._fields()

    def __repr__(self):
        return (f"SendResult(status={self.status!r}, msg_id={self.msg_id!r}, offset_msg_id={self.offset_msg_id!r}, "
                f"message_queue={self.message_queue!r}, queue_offset={self.queue_offset!r}, "
                f"transaction_id={self.transaction_id!r})")


cdef class Message:
    """A message to send: topic and body, with optional tags, keys (one or several), user properties, the
    producer's int flag and a delay level (1..18: 1s 5s 10s 30s 1m 2m ... 2h on a default broker). Compiled: a
    producer's caller makes one a send (the Python class with slots took a tenth of an async send's instructions
    in the caller's thread)."""

    cdef public str topic
    cdef public object body
    cdef public object tags                         # str or None
    cdef public object keys                         # str, a sequence of str, or None
    cdef public object properties                   # dict of str, or None
    cdef public object flag                         # int
    cdef public object delay_level                  # int
    cdef public object wait_store                   # bool

    def __init__(self, str topic, body, *, tags=None, keys=None, properties=None, flag=0, delay_level=0,
                 wait_store=True):
        if not topic:
            raise ValueError("a message needs a topic")
        self.topic = topic
        self.body = body.encode() if isinstance(body, str) else body
        self.tags = tags
        self.keys = keys
        self.properties = properties
        self.flag = flag
        self.delay_level = delay_level
        self.wait_store = wait_store

    def __repr__(self):
        return f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, body={len(self.body)} bytes)"


cdef const char* SEND_RESPONSE_FIELDS[4]
SEND_RESPONSE_FIELDS[0] = b"msgId"
SEND_RESPONSE_FIELDS[1] = b"queueId"
SEND_RESPONSE_FIELDS[2] = b"queueOffset"
SEND_RESPONSE_FIELDS[3] = b"transactionId"


cdef bint parse_decimal(const ExtValue* field, int64_t* out) noexcept:
    # An optional '-' and 1 to 18 digits: what brokers write; anything else is left to int() (False).
    cdef const char* p = field.value
    cdef Py_ssize_t n = field.length
    cdef bint negative = n > 0 and p[0] == b'-'
    cdef int64_t value = 0
    if negative:
        p += 1
        n -= 1
    if n < 1 or n > 18:
        return False
    for i in range(n):
        if p[i] < b'0' or p[i] > b'9':
            return False
        value = value * 10 + (p[i] - 48)
    out[0] = -value if negative else value
    return True


def decode_send_result(frame, str msg_id not None, message_queue, int32_t queue_id, dict statuses not None):
    """The SendResult of a send's response `frame` (without `total`) to message_queue (whose id is queue_id),
    read from its ROCKETMQ binary header with no RemotingCommand or extFields dict made; the status is
    statuses[code]. None when the response needs the general decoder (decode_command) to say what it means: a
    JSON header, a code that is no status (a refusal), a queueId other than queue_id, a number not written as
    plain decimal, a header that cannot be read."""
    cdef Py_buffer view
    cdef int code = 0
    cdef ExtValue values[4]
    cdef int64_t answered_queue_id = queue_id
    cdef int64_t queue_offset = -1
    cdef SendResult result
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        try:
            if not binary_ext_fields(<const char*>view.buf, view.len, &code, SEND_RESPONSE_FIELDS, values, 4):
                return None
        except ProtocolError:
            return None
        status = statuses.get(code)
        if status is None:
            return None
        if values[1].value != NULL and not parse_decimal(&values[1], &answered_queue_id):
            return None
        if answered_queue_id != queue_id:
            return None
        if values[2].value != NULL and not parse_decimal(&values[2], &queue_offset):
            return None
        result = SendResult.__new__(SendResult)
        result.status = status
        result.msg_id = msg_id
        result.message_queue = message_queue
        result.queue_offset = queue_offset
        try:
            result.offset_msg_id = (PyUnicode_DecodeUTF8(values[0].value, values[0].length, NULL)
                                    if values[0].value != NULL else "")
            result.transaction_id = (PyUnicode_DecodeUTF8(values[3].value, values[3].length, NULL)
                                     if values[3].value != NULL else None)
        except UnicodeDecodeError:
            return None
        return result
    finally:
        PyBuffer_Release(&view)


@cython.final
@cython.freelist(256)
cdef class MessageExt:
    """A message as a pull returns it (RocketMQ's MessageExt)."""

    cdef readonly str topic                       # TOPIC (for a retry, %RETRY%group; see real_topic)
    cdef readonly object body                     # BODY (inflated when it was sent compressed)
    cdef readonly dict properties                 # PROPERTIES
    cdef readonly int32_t queue_id                # QUEUEID
    cdef readonly int64_t queue_offset            # QUEUEOFFSET
    cdef readonly int64_t commitlog_offset        # PHYSICALOFFSET
    cdef readonly int32_t flag                    # FLAG (the producer's int)
    cdef readonly int32_t sys_flag                # SYSFLAG
    cdef readonly int64_t born_timestamp          # BORNTIMESTAMP (ms)
    cdef readonly int64_t store_timestamp         # STORETIMESTAMP (ms)
    cdef readonly bytes born_host_bytes           # BORNHOST: address then port i32
    cdef readonly bytes store_host_bytes          # STOREHOST: address then port i32
    cdef readonly int32_t reconsume_times         # RECONSUMETIMES
    cdef readonly int64_t prepared_transaction_offset  # PREPAREDTRANSACTIONOFFSET
    cdef readonly int32_t body_crc                # BODYCRC as stored
    cdef readonly int32_t store_size              # TOTALSIZE

    @property
    def tags(self) -> str | None:
        return self.properties.get(TAGS)

    @property
    def keys(self) -> str | None:
        """KEYS: the message's keys, separated by spaces."""
        return self.properties.get(KEYS)

    @property
    def msg_id(self) -> str:
        """The client's id (UNIQ_KEY) when the producer set one, else the offset id."""
        uniq = self.properties.get(UNIQ_KEY)
        return uniq if uniq else self.offset_msg_id

    @property
    def offset_msg_id(self) -> str:
        """hex(store host, CommitLog offset): where the broker stored the message."""
        return (self.store_host_bytes + self.commitlog_offset.to_bytes(8, "big", signed=True)).hex().upper()

    @property
    def born_host(self) -> str:
        return host_text(self.born_host_bytes)

    @property
    def store_host(self) -> str:
        return host_text(self.store_host_bytes)

    @property
    def real_topic(self) -> str:
        """The topic the message was first sent to (a retried message carries it in RETRY_TOPIC)."""
        return self.properties.get(PROPERTY_RETRY_TOPIC) or self.topic

    def __repr__(self):
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"tags={self.tags!r}, keys={self.keys!r}, body={len(self.body)} bytes)")


cdef str host_text(bytes host):
    if len(host) == 8:
        return f"{host[0]}.{host[1]}.{host[2]}.{host[3]}:{int.from_bytes(host[4:], 'big')}"
    import ipaddress
    return f"[{ipaddress.IPv6Address(host[:16])}]:{int.from_bytes(host[16:], 'big')}"


cdef object inflate(const char* body, Py_ssize_t n, int32_t sys_flag, Py_ssize_t max_size):
    cdef int32_t codec = sys_flag & COMPRESSION_TYPE_MASK
    data = PyBytes_FromStringAndSize(body, n)
    if codec == 0 or codec == COMPRESSION_ZLIB:
        inflater = zlib.decompressobj()
        try:
            out = inflater.decompress(data, max_size)
        except zlib.error as exc:
            raise CompressionError(f"zlib-compressed message body does not inflate: {exc}") from None
        if inflater.unconsumed_tail:
            raise CompressionError(f"message body inflates past {max_size} bytes")
        return out
    if codec == COMPRESSION_LZ4:
        return bytes(codec_decompress(FASTMQ_CODEC_LZ4, data, max_size))
    if codec == COMPRESSION_ZSTD:
        return bytes(codec_decompress(FASTMQ_CODEC_ZSTD, data, max_size))
    raise CompressionError(f"unknown message compression type {codec >> COMPRESSION_TYPE_SHIFT}")


def decode_messages(data, bint check_crc=True, Py_ssize_t max_body_size=DEFAULT_MAX_BODY_SIZE) -> list:
    """The messages of a pull response body (CommitLog records back to back), in order.

    Raises TruncatedError when the last record runs past the data and CorruptDataError (CompressionError for a
    body that does not inflate) for anything else that is not a whole, consistent record.
    """
    cdef Py_buffer view
    cdef const char* p
    cdef Py_ssize_t pos = 0
    cdef RecordLayout r
    cdef RecordStatus status
    cdef MessageExt msg
    cdef list messages = []
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const char*>view.buf
        while pos < view.len:
            # No room limit: a record longer than the body is a truncated body, whatever its size says.
            status = parse_record(p + pos, view.len - pos, 0x7FFFFFFF, &r)
            if status == RECORD_INCOMPLETE:
                raise TruncatedError(f"message record at byte {pos} of the pull body runs past its "
                                     f"{view.len} bytes")
            if status != RECORD_OK:
                reason = r.error.decode("ascii") if status == RECORD_CORRUPT else (
                    "zero total size" if status == RECORD_END else "an end-of-file blank")
                raise CorruptDataError(f"bad message record at byte {pos} of the pull body: {reason}")
            if check_crc and not body_crc_matches(&r):
                raise CorruptDataError(f"message at queue offset {r.queue_offset}: body CRC mismatch")
            msg = MessageExt.__new__(MessageExt)
            try:
                msg.topic = PyUnicode_DecodeUTF8(r.topic, r.topic_length, NULL)
            except UnicodeDecodeError:
                raise CorruptDataError(f"message at byte {pos}: the topic is not valid UTF-8") from None
            msg.properties = parse_properties(r.properties, r.properties_length)
            if r.sys_flag & SYSFLAG_COMPRESSED:
                msg.body = inflate(r.body, r.body_length, r.sys_flag, max_body_size)
            else:
                msg.body = PyBytes_FromStringAndSize(r.body, r.body_length)
            msg.queue_id = r.queue_id
            msg.queue_offset = r.queue_offset
            msg.commitlog_offset = r.physical_offset
            msg.flag = r.flag
            msg.sys_flag = r.sys_flag
            msg.born_timestamp = r.born_timestamp
            msg.store_timestamp = r.store_timestamp
            msg.born_host_bytes = PyBytes_FromStringAndSize(r.born_host, r.born_host_length)
            msg.store_host_bytes = PyBytes_FromStringAndSize(r.store_host, r.store_host_length)
            msg.reconsume_times = r.reconsume_times
            msg.prepared_transaction_offset = r.prepared_transaction_offset
            msg.body_crc = r.body_crc
            msg.store_size = r.total_size
            messages.append(msg)
            pos += r.total_size
        return messages
    finally:
        PyBuffer_Release(&view)


# ---------------------------------------------------------------------------------------------------------
# Sending
# ---------------------------------------------------------------------------------------------------------

def message_properties(str tags=None, keys=None, dict properties=None, int delay_level=0,
                       bint wait_store=True, str uniq_key=None) -> bytes:
    """The PROPERTIES bytes of a message to send: user properties plus the system ones given.

    keys may be one string or a sequence of strings (joined by spaces, as Java's setKeys does).
    """
    cdef dict merged = {} if properties is None else dict(properties)
    if tags:
        merged[TAGS] = tags
    if keys:
        merged[KEYS] = keys if isinstance(keys, str) else " ".join(keys)
    if delay_level > 0:
        merged[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
    merged[PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store else "false"
    if uniq_key:
        merged[UNIQ_KEY] = uniq_key
    encoded = encode_properties(merged)
    if len(encoded) > MAX_PROPERTIES_BYTES:
        raise ValueError(f"message properties are {len(encoded)} bytes, at most {MAX_PROPERTIES_BYTES} fit")
    return encoded


cdef inline bint compressed_on_the_wire(body, Py_ssize_t threshold) except -1:
    return threshold > 0 and len(body) >= threshold


def compress_body(body, Py_ssize_t threshold=DEFAULT_COMPRESS_THRESHOLD, int level=5) -> tuple:
    """(body to send, SYSFLAG bits): zlib over bodies of at least `threshold` bytes (0 never compresses)."""
    if not compressed_on_the_wire(body, threshold):
        return body, 0
    return zlib.compress(body, level), SYSFLAG_COMPRESSED_ZLIB


cdef int read_batch_item(const char* data, Py_ssize_t pos, Py_ssize_t length, BatchItem* item) except -1:
    cdef const char* p = data + pos
    cdef Py_ssize_t left = length - pos
    if left < BATCH_ITEM_FIXED_SIZE:
        raise TruncatedError(f"batch item at byte {pos}: {left} bytes, at least {BATCH_ITEM_FIXED_SIZE} needed")
    item.total = load_i32be(p)
    if item.total < BATCH_ITEM_FIXED_SIZE:
        raise CorruptDataError(f"batch item at byte {pos} announces {item.total} bytes")
    if item.total > left:
        raise TruncatedError(f"batch item at byte {pos} announces {item.total} bytes, {left} left")
    item.flag = load_i32be(p + 12)
    item.body_length = load_i32be(p + 16)
    if item.body_length < 0 or item.body_length > item.total - BATCH_ITEM_FIXED_SIZE:
        raise CorruptDataError(f"batch item at byte {pos}: body length {item.body_length} out of range")
    item.body = p + 20
    item.properties_length = <int16_t>((<uint8_t>p[20 + item.body_length] << 8) | <uint8_t>p[21 + item.body_length])
    if item.properties_length != item.total - BATCH_ITEM_FIXED_SIZE - item.body_length:
        raise CorruptDataError(f"batch item at byte {pos}: lengths do not add up to {item.total}")
    item.properties = p + 22 + item.body_length
    return 0


def decode_batch_body(data) -> list:
    """The (body, properties dict, flag) of each message of a SEND_BATCH_MESSAGE body (what a broker reads)."""
    cdef Py_buffer view
    cdef Py_ssize_t pos = 0
    cdef BatchItem item
    cdef list result = []
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        while pos < view.len:
            read_batch_item(<const char*>view.buf, pos, view.len, &item)
            result.append((PyBytes_FromStringAndSize(item.body, item.body_length),
                           parse_properties(item.properties, item.properties_length), item.flag))
            pos += item.total
        return result
    finally:
        PyBuffer_Release(&view)


# ---------------------------------------------------------------------------------------------------------
# Message ids and whole send requests
# ---------------------------------------------------------------------------------------------------------

cdef enum:
    REQUEST_SEND_MESSAGE_V2 = 310
    REQUEST_SEND_BATCH_MESSAGE = 320
    SERIALIZE_ROCKETMQ = 1
    FLAG_ONEWAY = 2
    LANGUAGE_PYTHON = 3
    CLIENT_VERSION = 453                            # remoting.pyx's VERSION
    UNIQ_ID_LENGTH = 32
    UNIQ_PREFIX_LENGTH = 20

cdef const char* HEX_DIGITS = b"0123456789ABCDEF"


@cython.final
cdef class UniqueIdGenerator:
    """UNIQ_KEY values (see the module doc) after a 20-hex-digit prefix (fastmq.rocketmq.message makes it)."""

    cdef bytes prefix
    cdef int64_t month_start_ms
    cdef uint32_t counter

    def __init__(self, str prefix, int64_t month_start_ms, uint32_t counter_start):
        if len(prefix) != UNIQ_PREFIX_LENGTH or not all(c in "0123456789ABCDEF" for c in prefix):
            raise ValueError(f"a message id prefix is {UNIQ_PREFIX_LENGTH} upper-case hex digits, not {prefix!r}")
        self.prefix = prefix.encode("ascii")
        self.month_start_ms = month_start_ms
        self.counter = counter_start

    cdef void write_id(self, char* out, int64_t now_ms) noexcept:
        cdef uint32_t elapsed = <uint32_t>((now_ms - self.month_start_ms) & 0xFFFFFFFF)
        cdef uint32_t count = self.counter & 0xFFFF
        cdef int i
        self.counter += 1
        memcpy(out, PyBytes_AS_STRING(self.prefix), UNIQ_PREFIX_LENGTH)
        for i in range(8):
            out[UNIQ_PREFIX_LENGTH + 7 - i] = HEX_DIGITS[(elapsed >> (4 * i)) & 0xF]
        for i in range(4):
            out[UNIQ_PREFIX_LENGTH + 11 - i] = HEX_DIGITS[(count >> (4 * i)) & 0xF]

    def next_id(self, int64_t now_ms) -> str:
        """The next id; now_ms is the time in milliseconds since the epoch."""
        cdef char out[UNIQ_ID_LENGTH]
        self.write_id(out, now_ms)
        return PyUnicode_DecodeUTF8(out, UNIQ_ID_LENGTH, NULL)


cdef int put_property(WriteBuffer out, const char* name, Py_ssize_t name_length, const char* value,
                      Py_ssize_t value_length) except -1:
    out.put_bytes(name, name_length)
    out.put_i8(1)
    out.put_bytes(value, value_length)
    out.put_i8(2)
    return 0


cdef int put_str_property(WriteBuffer out, const char* name, Py_ssize_t name_length, str value) except -1:
    # separators inside the value would split it (encode_properties refuses them too)
    cdef Py_ssize_t n
    cdef Py_ssize_t i
    cdef const char* p = PyUnicode_AsUTF8AndSize(value, &n)
    for i in range(n):
        if p[i] == 1 or p[i] == 2:
            raise ValueError(f"property {name[:name_length].decode('ascii')!r} contains the separators "
                             f"\\x01 / \\x02")
    return put_property(out, name, name_length, p, n)


cdef Py_ssize_t put_properties(WriteBuffer out, message, bint with_delay, const char* uniq) except -1:
    # A message's PROPERTIES as message_properties() writes them; returns their length. User properties take
    # that (dict) path; the usual message (tags, keys, the system properties) is written here.
    cdef Py_ssize_t start = out.size()
    cdef Py_ssize_t n
    cdef bytes encoded
    cdef int delay_level = message.delay_level if with_delay else 0
    tags = message.tags
    keys = message.keys
    if message.properties:
        encoded = message_properties(tags, keys, message.properties, delay_level, message.wait_store,
                                     PyUnicode_DecodeUTF8(uniq, UNIQ_ID_LENGTH, NULL))
        out.put_bytes(PyBytes_AS_STRING(encoded), len(encoded))
        return len(encoded)
    if tags:
        put_str_property(out, b"TAGS", 4, tags)
    if keys:
        put_str_property(out, b"KEYS", 4, keys if isinstance(keys, str) else " ".join(keys))
    if delay_level > 0:
        put_str_property(out, b"DELAY", 5, str(delay_level))
    if message.wait_store:
        put_property(out, b"WAIT", 4, b"true", 4)
    else:
        put_property(out, b"WAIT", 4, b"false", 5)
    put_property(out, b"UNIQ_KEY", 8, uniq, UNIQ_ID_LENGTH)
    n = out.size() - start
    if n > MAX_PROPERTIES_BYTES:
        raise ValueError(f"message properties are {n} bytes, at most {MAX_PROPERTIES_BYTES} fit")
    return n


@cython.final
cdef class SendEncoder:
    """The SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE requests of one producer group, each written whole into one frame.

    A message's UNIQ_KEY comes from `ids`; bodies of at least compress_threshold bytes are zlib-compressed (single
    messages only: compress_body). `sys_flag` adds bits the caller decides (a transaction's PREPARED).
    """

    cdef str group
    cdef str default_topic
    cdef int32_t default_topic_queue_nums
    cdef Py_ssize_t compress_threshold
    cdef readonly UniqueIdGenerator ids

    def __init__(self, str group, UniqueIdGenerator ids, *, str default_topic="TBW102",
                 int32_t default_topic_queue_nums=4, Py_ssize_t compress_threshold=DEFAULT_COMPRESS_THRESHOLD):
        self.group = group
        self.ids = ids
        self.default_topic = default_topic
        self.default_topic_queue_nums = default_topic_queue_nums
        self.compress_threshold = compress_threshold

    cdef Py_ssize_t begin(self, WriteBuffer out, int code, int opaque, bint oneway, str topic, int32_t queue_id,
                          int32_t sys_flag, int64_t born_ms, int32_t flag) except -1:
        # the header up to "i" (properties), which the caller writes; returns where its value length goes
        cdef Py_ssize_t ext_start
        begin_frame(out)
        ext_start = begin_binary_header(out, code, opaque, FLAG_ONEWAY if oneway else 0, LANGUAGE_PYTHON,
                                        CLIENT_VERSION, None)
        put_ext_str(out, b"a", 1, self.group)
        put_ext_str(out, b"b", 1, topic)
        put_ext_str(out, b"c", 1, self.default_topic)
        put_ext_int(out, b"d", 1, self.default_topic_queue_nums)
        put_ext_int(out, b"e", 1, queue_id)
        put_ext_int(out, b"f", 1, sys_flag)
        put_ext_int(out, b"g", 1, born_ms)
        put_ext_int(out, b"h", 1, flag)
        out.put_i16(1)
        out.put_bytes(b"i", 1)
        out.put_i32(0)
        return ext_start

    cdef int finish(self, WriteBuffer out, Py_ssize_t ext_start, bint batch, str broker_name) except -1:
        put_ext(out, b"j", 1, b"0", 1)
        put_ext(out, b"k", 1, b"false", 5)
        if batch:
            put_ext(out, b"m", 1, b"true", 4)
        else:
            put_ext(out, b"m", 1, b"false", 5)
        if broker_name is not None:
            put_ext_str(out, b"n", 1, broker_name)
        end_binary_header(out, ext_start, SERIALIZE_ROCKETMQ)
        return 0

    def encode_request(self, int opaque, list messages, bint batch, queue, bint oneway=False) -> tuple:
        """(frame, msg_id) of a producer's request to `queue` (a MessageQueue), born now: a SEND_BATCH_MESSAGE of
        `messages` when batch (msg_id: their UNIQ_KEYs joined by commas, as a batch's SendResult gives them), else
        a SEND_MESSAGE_V2 of messages[0], with sysFlag PREPARED when its TRAN_MSG property is "true" (a
        transaction's half message, which the broker keeps aside until END_TRANSACTION)."""
        cdef timespec now
        cdef int32_t sys_flag = 0
        clock_gettime(CLOCK_REALTIME, &now)
        cdef int64_t born_ms = <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000
        if batch:
            frame, ids = self.encode_batch(opaque, messages, queue.topic, queue.queue_id, queue.broker_name, born_ms,
                                           oneway)
            return frame, ",".join(ids)
        message = messages[0]
        properties = message.properties
        if properties and properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            sys_flag = SYSFLAG_TRANSACTION_PREPARED
        return self.encode_message(opaque, message, queue.topic, queue.queue_id, queue.broker_name, sys_flag,
                                   born_ms, oneway)

    cpdef tuple encode_message(self, int opaque, message, str topic, int32_t queue_id, str broker_name,
                               int32_t sys_flag, int64_t born_ms, bint oneway=False):
        """(frame, UNIQ_KEY) of a SEND_MESSAGE_V2 of `message` (a fastmq.rocketmq.Message) to the queue."""
        cdef WriteBuffer out
        cdef char uniq[UNIQ_ID_LENGTH]
        cdef Py_ssize_t ext_start
        cdef Py_ssize_t length_at
        cdef Py_buffer view
        body = message.body
        if compressed_on_the_wire(body, self.compress_threshold):
            body, compressed = compress_body(body, self.compress_threshold)
            sys_flag |= compressed
        # room for the header (about 250 bytes with short names) and the body, so that it is never grown
        out = WriteBuffer(HEADER_ROOM + len(body))
        self.ids.write_id(uniq, born_ms)
        ext_start = self.begin(out, REQUEST_SEND_MESSAGE_V2, opaque, oneway, topic, queue_id, sys_flag, born_ms,
                               message.flag)
        length_at = out.size() - 4
        store_i32be(out.pointer_at(length_at), <int32_t>put_properties(out, message, True, uniq))
        self.finish(out, ext_start, False, broker_name)
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            out.put_bytes(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        return end_frame(out), PyUnicode_DecodeUTF8(uniq, UNIQ_ID_LENGTH, NULL)

    cpdef tuple encode_batch(self, int opaque, list messages, str topic, int32_t queue_id, str broker_name,
                             int64_t born_ms, bint oneway=False):
        """(frame, [UNIQ_KEY, ...]) of a SEND_BATCH_MESSAGE of `messages` (one topic, no delay levels)."""
        cdef WriteBuffer out = WriteBuffer(256 + 200 * len(messages))
        cdef char uniq[UNIQ_ID_LENGTH]
        cdef Py_ssize_t ext_start
        cdef Py_ssize_t item_start
        cdef Py_ssize_t properties_length
        cdef Py_buffer view
        cdef list ids = []
        ext_start = self.begin(out, REQUEST_SEND_BATCH_MESSAGE, opaque, oneway, topic, queue_id, 0, born_ms, 0)
        store_i32be(out.pointer_at(out.size() - 4), 10)
        out.put_bytes(b"WAIT\x01true\x02", 10)
        self.finish(out, ext_start, True, broker_name)
        for message in messages:
            self.ids.write_id(uniq, born_ms)
            ids.append(PyUnicode_DecodeUTF8(uniq, UNIQ_ID_LENGTH, NULL))
            PyObject_GetBuffer(message.body, &view, PyBUF_SIMPLE)
            try:
                item_start = out.size()
                out.claim(16)                   # TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG: filled below
                out.put_i32(<int32_t>view.len)
                out.put_bytes(<const char*>view.buf, view.len)
                out.put_i16(0)
                properties_length = put_properties(out, message, False, uniq)
                if out.size() - item_start > 0x7FFFFFFF:
                    raise ValueError("a batch item exceeds 2 GiB")
                store_i32be(out.pointer_at(item_start), <int32_t>(out.size() - item_start))
                store_i32be(out.pointer_at(item_start + 4), 0)
                store_i32be(out.pointer_at(item_start + 8), 0)
                store_i32be(out.pointer_at(item_start + 12), <int32_t>message.flag)
                store_i16be(out.pointer_at(item_start + 20 + view.len), <int16_t>properties_length)
            finally:
                PyBuffer_Release(&view)
        return end_frame(out), ids
