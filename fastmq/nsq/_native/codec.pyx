# cython: language_level=3
"""NSQ's TCP protocol V2 with Youzan's extensions: commands (client -> nsqd), frames and messages (nsqd -> client).

Connection start: the client sends the magic b"  V2" once.

Commands: one line "NAME p1 p2\n" (single spaces), then a body for the commands that carry one:
  [size u32 BE][size bytes]
  IDENTIFY\n              body: JSON of the client's settings
  AUTH\n                  body: the secret
  PUB topic [partition]\n body: the message
  MPUB topic [partition]\n  body: [count u32]([len u32][message])*count
  DPUB topic defer_ms\n   body: the message (vanilla nsqd only)
  PUB_TRACE topic partition\n   body: [trace id u64][message]                     (Youzan)
  MPUB_TRACE topic partition\n  body: [count u32]([len u32 = 8 + n][trace id u64][n bytes])*count (Youzan)
  PUB_EXT topic partition\n     body: [json len u16][json header][message]       (Youzan)
  SUB topic channel [partition]; SUB_ORDERED topic channel partition;
  SUB_ADVANCED topic channel partition [offset "type:value"]                     (Youzan)
  RDY n; FIN id; REQ id timeout_ms; TOUCH id; NOP; CLS
A message id is 16 bytes: 16 hex digits from vanilla nsqd, [internal id u64][trace id u64] raw from Youzan's, so it
may hold any byte (\n, spaces): FIN, REQ and TOUCH are read by position (id at bytes 4..20, 4..20, 6..22).
Names (topics, channels): ^[.a-zA-Z0-9_-]+(#ephemeral)?$, 1 to 64 characters.

Frames from nsqd (cut by fastmq._native.frames.NSQFrameSplitter): [size u32 = 4 + n][type u32][n bytes], type 0
response ("OK", "_heartbeat_", "CLOSE_WAIT", JSON), 1 error ("E_CODE description"), 2 message:
  [timestamp ns i64][attempts u16][id 16 bytes]
  [ext version u8] and, when it is not 0, [ext len u16][ext bytes]   only with extend_support on an ext topic
                                                                      (2: a tag, 4: a JSON header)
  [queue offset i64][raw size u32]                                   only after SUB_ADVANCED / SUB_ORDERED
  [body]
PUB_TRACE's reply is a 30-byte response: "OK"[message id u64][trace id u64][disk queue offset u64][raw size u32].

MessageRunSplitter cuts nsqd's stream with fastmq._native.frames.NSQFrameSplitter and joins consecutive message
frames into one (FRAME_MESSAGES, [data, ...]) that decode_messages() turns into Messages in one call: a consumer
pays the per-frame path of the io engine once per run (up to a receive buffer's worth), not once per message.
decode_message() builds Message objects straight from a frame's data; a message carries the responder that
finishes it (the consumer's connection). parse_command() is the server side: it reads one command from a buffer.
Bad bytes raise fastmq.errors.ProtocolError (TruncatedError for short data); bad arguments to an encoder raise
NSQConfigurationError.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy

from fastmq._native.frames cimport NSQFrameSplitter
from fastmq._native.buffer cimport (
    ReadCursor, WriteBuffer, cursor_init, cursor_remaining, cursor_take, cursor_u8, cursor_u16, cursor_u32,
    cursor_i64, load_u64be, store_u16be, store_u32be, store_u64be,
)

import json

from fastmq.errors import ProtocolError
from fastmq.nsq.errors import NSQConfigurationError

MAGIC_V2 = b"  V2"
FRAME_RESPONSE = 0
FRAME_ERROR = 1
FRAME_MESSAGE = 2
HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"
NOP = b"NOP\n"
CLS = b"CLS\n"

# A run of message frames joined by MessageRunSplitter: (FRAME_MESSAGES, [data, ...]).
FRAME_MESSAGES = 3

# decode_message flags: what the subscription makes nsqd put between the id and the body.
WITH_EXT = 1        # IDENTIFY extend_support on a topic with ext headers (Youzan)
WITH_OFFSET = 2     # SUB_ADVANCED / SUB_ORDERED: queue offset and raw size (Youzan)

EXT_NONE = 0
EXT_TAG = 2
EXT_JSON_HEADER = 4

cdef enum:
    ID_SIZE = 16
    MESSAGE_HEADER_SIZE = 26        # timestamp 8 + attempts 2 + id 16
    MAX_NAME_LENGTH = 64
    TRACE_REPLY_SIZE = 30
    MAX_LINE = 1024                 # longer than any command line a client sends (names are <= 64)

# Commands whose line is followed by a [size u32][data] body.
BODY_COMMANDS = frozenset({b"IDENTIFY", b"AUTH", b"PUB", b"MPUB", b"DPUB", b"PUB_TRACE", b"MPUB_TRACE",
                           b"PUB_EXT", b"MPUB_EXT"})
# Commands whose first argument is a binary message id read by position.
cdef dict _ID_OFFSETS = {b"FIN": 4, b"REQ": 4, b"TOUCH": 6}
_EPHEMERAL = b"#ephemeral"


# ---------------------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------------------

cdef bint _name_char(uint8_t c) noexcept:
    return (c >= b'a' and c <= b'z') or (c >= b'A' and c <= b'Z') or (c >= b'0' and c <= b'9') \
        or c == b'.' or c == b'_' or c == b'-'


cpdef bint is_valid_name(object name):
    """True for a valid topic or channel name (bytes or str)."""
    cdef bytes raw = name.encode("ascii", "replace") if isinstance(name, str) else bytes(name)
    cdef Py_ssize_t n = len(raw), i, stem
    cdef const char* p = raw
    if n < 1 or n > MAX_NAME_LENGTH:
        return False
    stem = n - len(_EPHEMERAL) if raw.endswith(_EPHEMERAL) else n
    if stem < 1:
        return False
    for i in range(stem):
        if not _name_char(<uint8_t>p[i]):
            return False
    return True


cdef bytes _name(object name, str what):
    cdef bytes raw
    if isinstance(name, str):
        raw = (<str>name).encode("utf-8")
    elif isinstance(name, bytes):
        raw = <bytes>name
    else:
        raise NSQConfigurationError(f"the {what} name must be str or bytes, not {type(name).__name__}")
    if not is_valid_name(raw):
        raise NSQConfigurationError(f"invalid {what} name {name!r}: 1 to 64 characters of [.a-zA-Z0-9_-], "
                                    f"optionally ending in #ephemeral")
    return raw


cdef bytes _number(object value, str what, int64_t low, int64_t high):
    if not isinstance(value, int) or isinstance(value, bool) or value < low or value > high:
        raise NSQConfigurationError(f"{what} must be an integer in {low}..{high}, got {value!r}")
    return str(value).encode()


cdef bytes _partition_arg(object partition):
    # -1 / None: no partition argument (vanilla nsqd, or Youzan's default partition).
    if partition is None or partition == -1:
        return b""
    return b" " + _number(partition, "partition", 0, 0x7FFFFFFF)


cdef bytes _message_id(object message_id):
    if not isinstance(message_id, bytes) or PyBytes_GET_SIZE(message_id) != ID_SIZE:
        raise NSQConfigurationError(f"a message id is 16 bytes, got {message_id!r}")
    return <bytes>message_id


# ---------------------------------------------------------------------------------------------------------
# Commands (client -> nsqd)
# ---------------------------------------------------------------------------------------------------------

cdef inline bytes _with_body(bytes line, const char* data, Py_ssize_t n):
    cdef bytes out = PyBytes_FromStringAndSize(NULL, len(line) + 4 + n)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef Py_ssize_t k = len(line)
    memcpy(p, <const char*>line, k)
    store_u32be(p + k, <uint32_t>n)
    if n:
        memcpy(p + k + 4, data, n)
    return out


cdef bytes _body_command(bytes line, object body):
    cdef const unsigned char[::1] view
    if isinstance(body, str):
        raise NSQConfigurationError("a message body is bytes, not str (encode it first)")
    view = memoryview(body).cast("B") if not isinstance(body, bytes) else body
    if view.shape[0] == 0:
        return _with_body(line, NULL, 0)
    return _with_body(line, <const char*>&view[0], view.shape[0])


def identify(object settings) -> bytes:
    """IDENTIFY with the settings dict as its JSON body."""
    return _body_command(b"IDENTIFY\n", json.dumps(settings, separators=(",", ":")).encode())


def auth(object secret) -> bytes:
    return _body_command(b"AUTH\n", secret.encode() if isinstance(secret, str) else secret)


def pub(object topic, object body, object partition=None) -> bytes:
    """PUB topic [partition] with one message."""
    return _body_command(b"PUB " + _name(topic, "topic") + _partition_arg(partition) + b"\n", body)


def dpub(object topic, object defer_ms, object body) -> bytes:
    """DPUB: deliver the message after defer_ms milliseconds (vanilla nsqd)."""
    return _body_command(b"DPUB " + _name(topic, "topic") + b" " + _number(defer_ms, "defer_ms", 0, 0x7FFFFFFF)
                         + b"\n", body)


def pub_trace(object topic, object partition, uint64_t trace_id, object body) -> bytes:
    """PUB_TRACE topic partition: the body carries the trace id first (Youzan)."""
    cdef bytes raw = bytes(body)
    cdef bytes head = PyBytes_FromStringAndSize(NULL, 8)
    store_u64be(PyBytes_AS_STRING(head), trace_id)
    return _body_command(b"PUB_TRACE " + _name(topic, "topic") + b" " + _number(partition, "partition", 0,
                         0x7FFFFFFF) + b"\n", head + raw)


def pub_ext(object topic, object partition, object header, object body) -> bytes:
    """PUB_EXT topic partition with a JSON header (a dict or encoded JSON; Youzan)."""
    cdef bytes encoded = header if isinstance(header, bytes) else json.dumps(
        header, separators=(",", ":")).encode()
    cdef bytes size
    if len(encoded) > 0xFFFF:
        raise NSQConfigurationError(f"a PUB_EXT header is at most 65535 bytes of JSON, got {len(encoded)}")
    size = PyBytes_FromStringAndSize(NULL, 2)
    store_u16be(PyBytes_AS_STRING(size), <uint16_t>len(encoded))
    return _body_command(b"PUB_EXT " + _name(topic, "topic") + b" " + _number(partition, "partition", 0,
                         0x7FFFFFFF) + b"\n", size + encoded + bytes(body))


cdef bytes _multi(bytes line, list bodies, list trace_ids):
    # [size][count]([len][trace?][body])*: sized first, then written into the one bytes object returned (the
    # publish hot path: no typed memoryview per body, no intermediate buffer). bodies is the caller's own copy:
    # bytes-like bodies that are not bytes are replaced by bytes copies in it.
    cdef Py_ssize_t i, size, n = len(bodies)
    cdef Py_ssize_t extra = 8 if trace_ids is not None else 0
    cdef Py_ssize_t line_size = PyBytes_GET_SIZE(line)
    cdef Py_ssize_t total = line_size + 8 + n * (4 + extra)
    cdef object body
    cdef bytes out
    cdef char* p
    if n == 0:
        raise NSQConfigurationError("MPUB needs at least one message")
    for i in range(n):
        body = bodies[i]
        if type(body) is not bytes:
            if isinstance(body, str):
                raise NSQConfigurationError("a message body is bytes, not str (encode it first)")
            body = bytes(memoryview(body).cast("B"))
            bodies[i] = body
        total += PyBytes_GET_SIZE(body)
    if total - line_size - 4 > 0xFFFFFFFF:
        raise NSQConfigurationError(f"an MPUB body of {total - line_size - 4} bytes does not fit its u32 size")
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    memcpy(p, PyBytes_AS_STRING(line), line_size)
    p += line_size
    store_u32be(p, <uint32_t>(total - line_size - 4))
    store_u32be(p + 4, <uint32_t>n)
    p += 8
    for i in range(n):
        body = bodies[i]
        size = PyBytes_GET_SIZE(body)
        store_u32be(p, <uint32_t>(size + extra))
        p += 4
        if extra:
            store_u64be(p, <uint64_t>trace_ids[i])
            p += 8
        memcpy(p, PyBytes_AS_STRING(body), size)
        p += size
    return out


def bodies_size(list bodies) -> int:
    """The bytes of a list of message bodies (bytes-like), or -1 when one is empty (nsqd refuses an empty message,
    and with it the whole MPUB): the producer's check of every publish, in one pass."""
    cdef Py_ssize_t i, size, total = 0
    cdef object body
    for i in range(len(bodies)):
        body = bodies[i]
        size = PyBytes_GET_SIZE(body) if type(body) is bytes else len(body)
        if size == 0:
            return -1
        total += size
    return total


def mpub(object topic, object bodies, object partition=None) -> bytes:
    """MPUB topic [partition] with several messages."""
    return _multi(b"MPUB " + _name(topic, "topic") + _partition_arg(partition) + b"\n", list(bodies), None)


def mpub_trace(object topic, object partition, object trace_ids, object bodies) -> bytes:
    """MPUB_TRACE topic partition: each message carries its trace id first (Youzan)."""
    bodies = list(bodies)
    trace_ids = list(trace_ids)
    if len(trace_ids) != len(bodies):
        raise NSQConfigurationError(f"{len(trace_ids)} trace ids for {len(bodies)} messages")
    return _multi(b"MPUB_TRACE " + _name(topic, "topic") + b" " + _number(partition, "partition", 0, 0x7FFFFFFF)
                  + b"\n", bodies, trace_ids)


def sub(object topic, object channel, object partition=None) -> bytes:
    return b"SUB " + _name(topic, "topic") + b" " + _name(channel, "channel") + _partition_arg(partition) + b"\n"


def sub_ordered(object topic, object channel, object partition) -> bytes:
    """SUB_ORDERED: nsqd sends the next message of the partition only after the previous one's FIN (Youzan)."""
    return (b"SUB_ORDERED " + _name(topic, "topic") + b" " + _name(channel, "channel") + b" "
            + _number(partition, "partition", 0, 0x7FFFFFFF) + b"\n")


def sub_advanced(object topic, object channel, object partition, object offset=None) -> bytes:
    """SUB_ADVANCED with a start offset "type:value", type timestamp|virtual_queue|special|msgcount (Youzan)."""
    cdef bytes line = (b"SUB_ADVANCED " + _name(topic, "topic") + b" " + _name(channel, "channel") + b" "
                       + _number(partition, "partition", 0, 0x7FFFFFFF))
    cdef bytes raw
    if offset is not None:
        raw = offset.encode() if isinstance(offset, str) else bytes(offset)
        kind, sep, value = raw.partition(b":")
        if not sep or kind not in (b"timestamp", b"virtual_queue", b"special", b"msgcount") or not value \
                or b" " in raw or b"\n" in raw:
            raise NSQConfigurationError(f"a SUB_ADVANCED offset is \"type:value\" with type timestamp, "
                                        f"virtual_queue, special or msgcount; got {offset!r}")
        line += b" " + raw
    return line + b"\n"


def rdy(object count) -> bytes:
    return b"RDY " + _number(count, "RDY count", 0, 0x7FFFFFFF) + b"\n"


def fin(object message_id) -> bytes:
    return b"FIN " + _message_id(message_id) + b"\n"


def req(object message_id, object timeout_ms) -> bytes:
    return b"REQ " + _message_id(message_id) + b" " + _number(timeout_ms, "requeue delay", 0, 0x7FFFFFFF) + b"\n"


def touch(object message_id) -> bytes:
    return b"TOUCH " + _message_id(message_id) + b"\n"


def encode_answers(list answers) -> bytes:
    """A consumer's queued answers as one write: a 16-byte item is a message id to FIN, anything else a command
    already encoded (REQ, TOUCH: always longer than 16 bytes), copied as it is. The consume hot path: finishing
    a message costs its caller one list append, and the FIN lines are built here."""
    cdef Py_ssize_t i, size, total = 0, n = len(answers)
    cdef object item
    cdef bytes out
    cdef char* p
    for i in range(n):
        item = answers[i]
        if type(item) is not bytes:
            raise TypeError(f"an answer is bytes, not {type(item).__name__}")
        size = PyBytes_GET_SIZE(item)
        total += 4 + ID_SIZE + 1 if size == ID_SIZE else size
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    for i in range(n):
        item = answers[i]
        size = PyBytes_GET_SIZE(item)
        if size == ID_SIZE:
            memcpy(p, b"FIN ", 4)
            memcpy(p + 4, PyBytes_AS_STRING(item), ID_SIZE)
            p[4 + ID_SIZE] = 10
            p += 4 + ID_SIZE + 1
        else:
            memcpy(p, PyBytes_AS_STRING(item), size)
            p += size
    return out


# ---------------------------------------------------------------------------------------------------------
# Commands, server side
# ---------------------------------------------------------------------------------------------------------

def parse_command(object data, Py_ssize_t max_body_size=1024 * 1024):
    """Read one command from the start of data: (name, params, body or None, bytes used), or None when data
    does not hold a whole command yet. params are bytes; FIN/REQ/TOUCH's id is taken by position (16 raw
    bytes). Raises ProtocolError for a line longer than 1024 bytes without its end, a body over
    max_body_size, or a FIN/REQ/TOUCH line of the wrong shape."""
    cdef const unsigned char[::1] view = data if isinstance(data, bytes) else memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0], line_end, name_end, id_at, body_size
    cdef const char* p
    cdef const char* nl
    cdef bytes name
    cdef list params
    if n == 0:
        return None
    p = <const char*>&view[0]
    name_end = 0
    while name_end < n and p[name_end] != b' ' and p[name_end] != b'\n':
        name_end += 1
    if name_end == n:
        if n > MAX_LINE:
            raise ProtocolError(f"an NSQ command line has no end within {MAX_LINE} bytes")
        return None
    name = PyBytes_FromStringAndSize(p, name_end)
    id_at = _ID_OFFSETS.get(name, 0)
    if id_at:
        # The id may hold \n or spaces: it is 16 bytes from its position, whatever they are.
        if n < id_at + ID_SIZE + 1:
            return None
        if p[name_end] != b' ':
            raise ProtocolError(f"{name.decode()} needs a message id")
        nl = <const char*>memchr(p + id_at + ID_SIZE, b'\n', min(n - id_at - ID_SIZE, MAX_LINE))
        if nl == NULL:
            if n - id_at - ID_SIZE > MAX_LINE:
                raise ProtocolError(f"an NSQ command line has no end within {MAX_LINE} bytes")
            return None
        line_end = nl - p
        params = [PyBytes_FromStringAndSize(p + id_at, ID_SIZE)]
        rest = PyBytes_FromStringAndSize(p + id_at + ID_SIZE, line_end - id_at - ID_SIZE).rstrip(b"\r")
        if rest:
            if rest[:1] != b" ":
                raise ProtocolError(f"{name.decode()}: the message id must be 16 bytes")
            params.extend(rest[1:].split(b" "))
    else:
        nl = <const char*>memchr(p, b'\n', min(n, MAX_LINE + 1))
        if nl == NULL:
            if n > MAX_LINE:
                raise ProtocolError(f"an NSQ command line has no end within {MAX_LINE} bytes")
            return None
        line_end = nl - p
        params = PyBytes_FromStringAndSize(p, line_end).rstrip(b"\r").split(b" ")
        name = params.pop(0)
    if name not in BODY_COMMANDS:
        return name, params, None, line_end + 1
    if n < line_end + 5:
        return None
    body_size = <Py_ssize_t>(<uint32_t>((<uint8_t>p[line_end + 1] << 24) | (<uint8_t>p[line_end + 2] << 16)
                                        | (<uint8_t>p[line_end + 3] << 8) | <uint8_t>p[line_end + 4]))
    if body_size > max_body_size:
        raise ProtocolError(f"{name.decode()} body of {body_size} bytes exceeds the limit of {max_body_size}")
    if n < line_end + 5 + body_size:
        return None
    return name, params, PyBytes_FromStringAndSize(p + line_end + 5, body_size), line_end + 5 + body_size


def split_multi(object body, bint traced=False, Py_ssize_t max_count=1 << 20):
    """An MPUB body -> list of messages; traced (MPUB_TRACE): list of (trace id, message). Raises ProtocolError
    for a count or length that does not fit the body."""
    cdef const unsigned char[::1] view = body if isinstance(body, bytes) else memoryview(body).cast("B")
    cdef ReadCursor cur
    cdef uint32_t count, i, size
    cdef const char* p
    cdef list out = []
    if view.shape[0] == 0:
        raise ProtocolError("an MPUB body needs at least its message count")
    cursor_init(&cur, <const char*>&view[0], view.shape[0])
    count = cursor_u32(&cur)
    if count == 0 or count > max_count or count > <uint32_t>(cursor_remaining(&cur) // 4):
        raise ProtocolError(f"an MPUB body cannot hold {count} messages in {view.shape[0]} bytes")
    for i in range(count):
        size = cursor_u32(&cur)
        p = cursor_take(&cur, size)
        if traced:
            if size < 8:
                raise ProtocolError(f"an MPUB_TRACE message of {size} bytes has no room for its trace id")
            out.append((load_u64be(p), PyBytes_FromStringAndSize(p + 8, size - 8)))
        else:
            out.append(PyBytes_FromStringAndSize(p, size))
    if cursor_remaining(&cur):
        raise ProtocolError(f"{cursor_remaining(&cur)} bytes follow the last of {count} MPUB messages")
    return out


# ---------------------------------------------------------------------------------------------------------
# Frames and messages (nsqd -> client)
# ---------------------------------------------------------------------------------------------------------

def encode_frame(int frame_type, object data) -> bytes:
    """One frame: [size u32][type u32][data]."""
    cdef bytes raw = bytes(data)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 8 + len(raw))
    cdef char* p = PyBytes_AS_STRING(out)
    store_u32be(p, <uint32_t>(4 + len(raw)))
    store_u32be(p + 4, <uint32_t>frame_type)
    memcpy(p + 8, <const char*>raw, len(raw))
    return out


def encode_message(int64_t timestamp, uint16_t attempts, bytes message_id, object body, int flags=0,
                   uint8_t ext_version=0, bytes ext=b"", int64_t queue_offset=0, uint32_t raw_size=0) -> bytes:
    """A whole message frame (what nsqd sends), laid out as decode_message() reads it with the same flags."""
    cdef WriteBuffer out = WriteBuffer()
    cdef bytes raw = bytes(body)
    out.put_u32(0)
    out.put_u32(FRAME_MESSAGE)
    out.put_i64(timestamp)
    store_u16be(out.claim(2), attempts)
    out.put_bytes(_message_id(message_id), ID_SIZE)
    if flags & WITH_EXT:
        out.put_i8(<char>ext_version)
        if ext_version:
            if len(ext) > 0xFFFF:
                raise NSQConfigurationError(f"ext data is at most 65535 bytes, got {len(ext)}")
            store_u16be(out.claim(2), <uint16_t>len(ext))
            out.put_bytes(ext, len(ext))
    if flags & WITH_OFFSET:
        out.put_i64(queue_offset)
        out.put_u32(raw_size)
    out.put_bytes(raw, len(raw))
    store_u32be(out.pointer_at(0), <uint32_t>(out.size() - 4))
    return bytes(out.take())


def encode_trace_reply(uint64_t message_id, uint64_t trace_id, uint64_t disk_offset, uint32_t raw_size) -> bytes:
    """PUB_TRACE's response data (30 bytes)."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, TRACE_REPLY_SIZE)
    cdef char* p = PyBytes_AS_STRING(out)
    p[0] = b'O'
    p[1] = b'K'
    store_u64be(p + 2, message_id)
    store_u64be(p + 10, trace_id)
    store_u64be(p + 18, disk_offset)
    store_u32be(p + 26, raw_size)
    return out


def decode_trace_reply(bytes data):
    """PUB_TRACE's response data -> (message id, trace id, disk queue offset, raw size)."""
    cdef const char* p = data
    if len(data) != TRACE_REPLY_SIZE or data[:2] != OK:
        raise ProtocolError(f"a PUB_TRACE reply is \"OK\" and 28 bytes, got {data[:40]!r}")
    return load_u64be(p + 2), load_u64be(p + 10), load_u64be(p + 18), <uint32_t>(
        (<uint8_t>p[26] << 24) | (<uint8_t>p[27] << 16) | (<uint8_t>p[28] << 8) | <uint8_t>p[29])


# Not tracked by the cycle collector: a consumer makes thousands of Messages a second, and the collections their
# allocations set off cost more than decoding them. A Message refers to bytes and to its responder alone; the
# responder (the consumer's connection) never refers to messages, and the consumer empties its queue of
# undelivered ones when it closes, so no cycle runs through a Message.
@cython.final
@cython.freelist(64)
@cython.no_gc
cdef class Message:
    """One message from nsqd. finish(), requeue() and touch() go through the responder (the consumer's
    connection); each message is answered once (finish or requeue), touched any number of times before."""

    cdef readonly bytes id              # 16 bytes (hex digits from vanilla nsqd, binary from Youzan's)
    cdef readonly bytes body
    cdef readonly int64_t timestamp     # nanoseconds since the epoch, when nsqd took the message
    cdef readonly int attempts          # deliveries so far, this one included
    cdef readonly int ext_version       # 0 none, 2 tag, 4 JSON header (Youzan, extend_support)
    cdef readonly bytes ext             # the ext bytes as sent
    cdef readonly int64_t queue_offset  # position in the partition's queue (SUB_ADVANCED / SUB_ORDERED), else -1
    cdef readonly int64_t raw_size      # its size in the queue, else -1
    cdef readonly object responder      # has finish(msg), requeue(msg, delay_ms, backoff), touch(msg)
    cdef public bint responded          # finish() or requeue() happened
    cdef public bint answered_later     # enable_async(): the handler answers after it returns

    @property
    def trace_id(self) -> int:
        """Youzan's trace id: the last 8 bytes of the id (0 from vanilla nsqd, whose ids are hex text)."""
        return 0 if _is_hex(self.id) else load_u64be(<const char*>self.id + 8)

    @property
    def internal_id(self) -> int:
        """Youzan's internal message id: the first 8 bytes of the id (vanilla: the hex digits' value)."""
        if _is_hex(self.id):
            return int(self.id, 16)
        return load_u64be(<const char*>self.id)

    @property
    def tag(self) -> bytes | None:
        return self.ext if self.ext_version == EXT_TAG else None

    @property
    def headers(self) -> dict:
        """The JSON header of a PUB_EXT message (empty without one)."""
        if self.ext_version != EXT_JSON_HEADER or not self.ext:
            return {}
        return json.loads(self.ext)

    def finish(self) -> None:
        if self.responded:
            raise RuntimeError(f"message {self.id!r} was already answered")
        self.responded = True
        self.responder.finish(self)

    def requeue(self, delay_ms=None, backoff=True, *, delay=None, time_ms=None) -> None:
        """Send it back; delay_ms None lets the consumer choose a delay from the attempts. pynsq's spellings
        work too: delay in seconds (-1: from the attempts) and time_ms."""
        if time_ms is not None and time_ms >= 0:
            delay_ms = time_ms
        elif delay is not None and delay >= 0:
            delay_ms = int(delay * 1000)
        if self.responded:
            raise RuntimeError(f"message {self.id!r} was already answered")
        self.responded = True
        self.responder.requeue(self, delay_ms, backoff)

    def enable_async(self) -> None:
        """The handler answers after it returns (pynsq's API): the consumer does not finish it on return."""
        self.answered_later = True

    def is_async(self) -> bool:
        return self.answered_later

    def has_responded(self) -> bool:
        return self.responded

    def touch(self) -> None:
        if self.responded:
            raise RuntimeError(f"message {self.id!r} was already answered")
        self.responder.touch(self)

    def __repr__(self) -> str:
        return f"<nsq Message id={self.id!r} attempts={self.attempts} {len(self.body)} bytes>"


cdef bint _is_hex(bytes message_id) noexcept:
    cdef const char* p = message_id
    cdef Py_ssize_t i
    cdef char c
    for i in range(ID_SIZE):
        c = p[i]
        if not ((c >= b'0' and c <= b'9') or (c >= b'a' and c <= b'f')):
            return False
    return True


def decode_message(bytes data, int flags=0, object responder=None) -> Message:
    """A message frame's data -> Message (flags: WITH_EXT, WITH_OFFSET, as the subscription makes nsqd send)."""
    return _decode_message(data, flags, responder)


cdef Message _decode_message(bytes data, int flags, object responder):
    cdef ReadCursor cur
    cdef Message msg = Message.__new__(Message)
    cdef const char* p
    cdef uint16_t ext_size
    cursor_init(&cur, <const char*>data, PyBytes_GET_SIZE(data))
    if PyBytes_GET_SIZE(data) < MESSAGE_HEADER_SIZE:
        raise ProtocolError(f"an NSQ message needs {MESSAGE_HEADER_SIZE} bytes of header, got {len(data)}")
    msg.timestamp = cursor_i64(&cur)
    msg.attempts = cursor_u16(&cur)
    msg.id = PyBytes_FromStringAndSize(cursor_take(&cur, ID_SIZE), ID_SIZE)
    msg.ext = b""
    msg.queue_offset = -1
    msg.raw_size = -1
    if flags & WITH_EXT:
        msg.ext_version = cursor_u8(&cur)
        if msg.ext_version:
            ext_size = cursor_u16(&cur)
            msg.ext = PyBytes_FromStringAndSize(cursor_take(&cur, ext_size), ext_size)
    if flags & WITH_OFFSET:
        msg.queue_offset = cursor_i64(&cur)
        msg.raw_size = cursor_u32(&cur)
    p = cur.pos
    msg.body = PyBytes_FromStringAndSize(p, cursor_remaining(&cur))
    msg.responder = responder
    return msg


def decode_messages(list datas, int flags=0, object responder=None) -> list:
    """decode_message() of every data of a FRAME_MESSAGES run."""
    cdef Py_ssize_t i, n = len(datas)
    cdef list out = [None] * n
    for i in range(n):
        out[i] = _decode_message(<bytes>datas[i], flags, responder)
    return out


@cython.final
cdef class MessageRunSplitter:
    """nsqd's frames, as NSQFrameSplitter cuts them, with each run of consecutive message frames returned as one
    (FRAME_MESSAGES, [data, ...]); responses and errors come alone, in stream order (the frame that ended a run is
    held for the next call). The FrameSplitter interface of fastmq.io."""

    cdef NSQFrameSplitter _frames
    cdef object _held                   # a frame read past the end of a run, returned by the next call

    def __init__(self, Py_ssize_t max_frame_size=16 * 1024 * 1024):
        self._frames = NSQFrameSplitter(max_frame_size)
        self._held = None

    def feed(self, data) -> None:
        self._frames.feed(data)

    def writable(self, Py_ssize_t min_size=65536) -> memoryview:
        return self._frames.writable(min_size)

    def commit(self, Py_ssize_t n) -> None:
        self._frames.commit(n)

    @property
    def buffered(self) -> int:
        # A held frame counts too: bytes received past any upgrade point.
        return self._frames.buffered + (0 if self._held is None else 1)

    def take_buffered(self) -> bytes:
        if self._held is not None:
            raise ValueError("a frame is held after a run of messages: the stream is not at a frame boundary")
        return self._frames.take_buffered()

    def next_frame(self):
        cdef object frame = self._held
        cdef list run
        self._held = None
        if frame is None:
            frame = self._frames._next()
        if frame is None or (<tuple>frame)[0] != FRAME_MESSAGE:
            return frame
        run = [(<tuple>frame)[1]]
        while True:
            frame = self._frames._next()
            if frame is None:
                break
            if (<tuple>frame)[0] != FRAME_MESSAGE:
                self._held = frame
                break
            run.append((<tuple>frame)[1])
        return (FRAME_MESSAGES, run)
