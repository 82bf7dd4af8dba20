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
SEND_BATCH_MESSAGE (320): the same header with m = true; the body is each message as MessageDecoder.encodeMessage
    writes it, back to back:
        [TOTALSIZE i32][MAGICCODE i32 = 0][BODYCRC i32 = 0][FLAG i32][BODYLENGTH i32][BODY]
        [PROPERTIESLENGTH i16][PROPERTIES]
Pull response body (PULL_MESSAGE 11, code SUCCESS): CommitLog records back to back, in the layout documented at
    the top of fastmq/_native/store_codec.pyx; decode_messages reads them with the store's record parser (one
    decoder for the file and the wire) into MessageExt objects, checking BODYCRC and inflating compressed bodies.
Message ids: UNIQ_KEY is the client's id (32 hex digits); the offset id (offset_msg_id) is hex(store host address
    and port, CommitLog offset i64), upper case.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from fastmq._native.buffer cimport WriteBuffer, load_i32be, store_i32be
from fastmq._native.checksum cimport crc32_of
from fastmq._native.store_codec cimport (
    RECORD_BLANK, RECORD_CORRUPT, RECORD_END, RECORD_INCOMPLETE, RECORD_OK, RecordLayout, RecordStatus,
    SYSFLAG_COMPRESSED, parse_properties, parse_record,
)

import zlib

from fastmq._native.compression import decompress as codec_decompress
from fastmq._native.store_codec import encode_properties
from fastmq.errors import CompressionError, CorruptDataError, TruncatedError

cdef enum:
    BATCH_ITEM_FIXED_SIZE = 4 + 4 + 4 + 4 + 4 + 2   # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLENGTH, PROPERTIESLENGTH
    MAX_PROPERTIES_BYTES = 32767                    # PROPERTIESLENGTH is a signed short
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

cdef str TAGS = PROPERTY_TAGS
cdef str KEYS = PROPERTY_KEYS
cdef str UNIQ_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


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
            if check_crc and <int32_t>(crc32_of(r.body, r.body_length) & 0x7FFFFFFF) != r.body_crc:
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


def compress_body(body, Py_ssize_t threshold=DEFAULT_COMPRESS_THRESHOLD, int level=5) -> tuple:
    """(body to send, SYSFLAG bits): zlib over bodies of at least `threshold` bytes (0 never compresses)."""
    if threshold <= 0 or len(body) < threshold:
        return body, 0
    return zlib.compress(body, level), SYSFLAG_COMPRESSED_ZLIB


def send_header(str producer_group, str topic, int32_t queue_id, int32_t sys_flag, int64_t born_timestamp,
                int32_t flag, properties, str broker_name=None, int32_t reconsume_times=0,
                int32_t max_reconsume_times=-1, bint batch=False, str default_topic="TBW102",
                int32_t default_topic_queue_nums=4) -> dict:
    """The extFields of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (single-letter names: see the module doc)."""
    cdef dict fields = {
        "a": producer_group, "b": topic, "c": default_topic, "d": str(default_topic_queue_nums),
        "e": str(queue_id), "f": str(sys_flag), "g": str(born_timestamp), "h": str(flag),
        "i": properties if isinstance(properties, str) else bytes(properties).decode("utf-8"),
        "j": str(reconsume_times), "k": "false", "m": "true" if batch else "false",
    }
    if max_reconsume_times >= 0:
        fields["l"] = str(max_reconsume_times)
    if broker_name is not None:
        fields["n"] = broker_name
    return fields


def encode_batch_body(list items) -> bytes:
    """SEND_BATCH_MESSAGE's body from (body, properties bytes, flag) triples (see the module doc)."""
    cdef WriteBuffer out = WriteBuffer(4096)
    cdef Py_buffer body
    cdef Py_ssize_t properties_length
    cdef const char* properties
    cdef tuple item
    for item in items:
        if len(item) != 3:
            raise ValueError("batch items are (body, properties, flag) triples")
        properties_obj = item[1]
        if not isinstance(properties_obj, bytes):
            raise TypeError(f"batch item properties are bytes, not {type(properties_obj).__name__}")
        properties = PyBytes_AS_STRING(properties_obj)
        properties_length = len(<bytes>properties_obj)
        if properties_length > MAX_PROPERTIES_BYTES:
            raise ValueError(f"message properties are {properties_length} bytes, at most {MAX_PROPERTIES_BYTES} fit")
        PyObject_GetBuffer(item[0], &body, PyBUF_SIMPLE)
        try:
            if BATCH_ITEM_FIXED_SIZE + body.len + properties_length > 0x7FFFFFFF:
                raise ValueError("a batch item exceeds 2 GiB")
            out.put_i32(<int32_t>(BATCH_ITEM_FIXED_SIZE + body.len + properties_length))
            out.put_i32(0)
            out.put_i32(0)
            out.put_i32(<int32_t>item[2])
            out.put_i32(<int32_t>body.len)
            out.put_bytes(<const char*>body.buf, body.len)
            out.put_i16(<int16_t>properties_length)
            out.put_bytes(properties, properties_length)
        finally:
            PyBuffer_Release(&body)
    return PyBytes_FromStringAndSize(out.pointer_at(0), out.size())


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
