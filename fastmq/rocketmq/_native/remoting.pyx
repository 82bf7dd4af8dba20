# cython: language_level=3
"""RocketMQ remoting commands: the frame every request and response travels in, both header encodings.

Frame (big-endian; R/RemotingCommand.java of apache/rocketmq):
    [total i32][(serializeType << 24) | headerLength (low 24 bits)][header: headerLength bytes][body]
    `total` counts everything after itself: 4 + headerLength + len(body). serializeType JSON 0, ROCKETMQ 1.
    Encoders write `total`; decoders take the frame without it (RocketMQFrameSplitter removed it).

JSON header (serializeType 0), an object:
    {"code": int, "language": "JAVA"|..., "version": int, "opaque": int, "flag": int, "remark": str (absent when
     null), "extFields": {str: str}, "serializeTypeCurrentRPC": "JSON"}
    Request and response headers of every command travel only in extFields, every value as a string.
ROCKETMQ binary header (serializeType 1; R/RocketMQSerializable.java), at least 21 bytes:
    code i16 | language u8 | version i16 | opaque i32 | flag i32 | remarkLength i32, remark (UTF-8)
    | extFieldsLength i32, then [keyLength i16, key, valueLength i32, value] until extFieldsLength is used up
flag: bit 0 = response, bit 1 = oneway. A response echoes its request's opaque; requests from the server (the
broker asks a consumer for its running info, tells it that the group changed) carry the server's own opaques.

A JSON header of the shape brokers and clients write (integer fields, strings without escapes, extFields of strings)
is read in one pass, straight into the command (about 0.3 us for a send response, 2-3 us through the json module);
any other shape goes through the json module, which decides what it means.

Decoding is lenient where real clients and servers are sloppy: JSON strings holding raw control characters
(the .NET client writes \\x01/\\x02 inside them), numbers and booleans as extFields values (the C++ client,
ali-ons; kept as the strings Java would print), the language as its enum number or an unknown name, a frame
whose serialize type says JSON but whose header is binary is not guessed at (the type decides). Everything
else that is wrong raises: TruncatedError when a length runs past the header, CorruptDataError for negative
lengths, bad UTF-8, a header that is not an object or fields of the wrong type.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, strlen

from fastmq._native.buffer cimport (
    ReadCursor, WriteBuffer, cursor_i16, cursor_i32, cursor_init, cursor_remaining, cursor_split, cursor_take,
    cursor_u8, load_i32be, store_i32be, store_u32be,
)

import json

from fastmq.errors import CorruptDataError, ProtocolError, TruncatedError

cdef enum:
    SERIALIZE_JSON_TYPE = 0
    SERIALIZE_ROCKETMQ_TYPE = 1
    FLAG_RESPONSE_BIT = 1
    FLAG_ONEWAY_BIT = 2
    BINARY_FIXED_SIZE = 21             # code .. remarkLength, plus extFieldsLength
    HEADER_LENGTH_MASK = 0xFFFFFF
    MAX_HEADER_LENGTH = 0xFFFFFF       # the 24 bits the header length has
    LANGUAGE_PYTHON = 3
    LANGUAGE_OTHER = 7
    DEFAULT_VERSION = 453              # a 4.9-era client: >= 401 asks the namesrv for standard JSON
    MAX_JSON_INT = 0x7FFFFFFF          # opaque and flag are 32-bit; larger numbers are not ours

SERIALIZE_JSON = SERIALIZE_JSON_TYPE
SERIALIZE_ROCKETMQ = SERIALIZE_ROCKETMQ_TYPE
FLAG_RESPONSE = FLAG_RESPONSE_BIT
FLAG_ONEWAY = FLAG_ONEWAY_BIT
VERSION = DEFAULT_VERSION

# LanguageCode (R/LanguageCode.java): JSON headers name it, binary ones number it.
LANGUAGES = {
    "JAVA": 0, "CPP": 1, "DOTNET": 2, "PYTHON": 3, "DELPHI": 4, "ERLANG": 5, "RUBY": 6, "OTHER": 7,
    "HTTP": 8, "GO": 9, "PHP": 10, "OMS": 11, "RUST": 12, "NODE_JS": 13,
}
LANGUAGE_NAMES = {number: name for name, number in LANGUAGES.items()}
# One decoder for every JSON header: json.loads(..., strict=False) would build a decoder and its scanner per call.
cdef object LENIENT_JSON = json.JSONDecoder(strict=False)


cdef str text_of(object value, str what):
    # An extFields value as Java prints it: strings as they are, booleans lower case, numbers in decimal.
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise CorruptDataError(f"{what} is a {type(value).__name__}, expected a string or a number")


cdef int int_field(dict header, str name, int default) except? -1:
    value = header.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise CorruptDataError(f"remoting header field {name!r} is {value!r}, expected an integer")
    if not -2147483648 <= value <= 2147483647:
        raise CorruptDataError(f"remoting header field {name!r} ({value}) does not fit 32 bits")
    return value


cdef int language_code(object value) except -1:
    if value is None:
        return LANGUAGE_OTHER
    if isinstance(value, str):
        return LANGUAGES.get(value, LANGUAGE_OTHER)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
        return value
    raise CorruptDataError(f"remoting header field 'language' is {value!r}, expected a name or a number")


cdef str utf8(const char* p, Py_ssize_t n, str what, str key=None):
    # `what`, or what[key]: the error's words are made only when there is an error (an extFields value's
    # f-string with its key's repr cost the decode of every field a repr and a format)
    try:
        return PyUnicode_DecodeUTF8(p, n, NULL)
    except UnicodeDecodeError:
        raise CorruptDataError(f"{what if key is None else f'{what}[{key!r}]'} is not valid UTF-8") from None


@cython.final
@cython.freelist(64)
cdef class RemotingCommand:
    """One remoting command: a request (flag bit 0 clear) or a response (set) with its extFields and body."""

    cdef readonly int code              # request code, or the response's status code
    cdef readonly int language          # LanguageCode number of the sender
    cdef readonly int version           # the sender's version ordinal
    cdef readonly int opaque            # request id; a response echoes it
    cdef readonly int flag              # bit 0 response, bit 1 oneway
    cdef readonly str remark            # error text of a response, or None
    cdef readonly dict ext_fields       # the custom header: str -> str
    cdef readonly object body           # bytes, or None for no body
    cdef readonly int serialize_type    # how the header was (or will be) encoded

    def __init__(self, int code, int opaque=0, *, int flag=0, dict ext_fields=None, body=None, str remark=None,
                 int language=LANGUAGE_PYTHON, int version=DEFAULT_VERSION,
                 int serialize_type=SERIALIZE_JSON_TYPE):
        if serialize_type != SERIALIZE_JSON_TYPE and serialize_type != SERIALIZE_ROCKETMQ_TYPE:
            raise ValueError(f"serialize_type must be SERIALIZE_JSON (0) or SERIALIZE_ROCKETMQ (1), "
                             f"not {serialize_type}")
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.ext_fields = {} if ext_fields is None else {str(k): text_of(v, f"extFields[{k!r}]")
                                                         for k, v in ext_fields.items()}
        self.body = None if body is None else bytes(body)
        self.remark = remark
        self.language = language
        self.version = version
        self.serialize_type = serialize_type

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE_BIT)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY_BIT)

    @property
    def language_name(self) -> str:
        return LANGUAGE_NAMES.get(self.language, "OTHER")

    def encode(self) -> bytes:
        """The whole frame, `total` prefix included."""
        return encode_frame(self.code, self.opaque, self.ext_fields, self.body, self.flag, self.serialize_type,
                            self.language, self.version, self.remark)

    def __eq__(self, other):
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        cdef RemotingCommand o = other
        return (self.code == o.code and self.language == o.language and self.version == o.version
                and self.opaque == o.opaque and self.flag == o.flag and self.remark == o.remark
                and self.ext_fields == o.ext_fields and self.body == o.body)

    __hash__ = None

    def __repr__(self):
        kind = "response" if self.flag & FLAG_RESPONSE_BIT else "request"
        return (f"RemotingCommand({kind} code={self.code}, opaque={self.opaque}, flag={self.flag}, "
                f"remark={self.remark!r}, ext_fields={self.ext_fields!r}, "
                f"body={'None' if self.body is None else str(len(self.body)) + ' bytes'})")


# ---------------------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------------------

cdef int put_text(WriteBuffer out, object value, bint long_length, str what, object key=None) except -1:
    # [length i16 or i32][UTF-8]; `what` names the value in errors, formatted with key when there is one (only
    # then: this runs for every extFields entry of every request)
    cdef Py_ssize_t n
    cdef const char* p
    cdef str text = value if isinstance(value, str) else text_of(value, what if key is None else what.format(key))
    p = PyUnicode_AsUTF8AndSize(text, &n)
    if long_length:
        out.put_i32(<int32_t>n)
    else:
        if n > 32767:
            raise ValueError(f"{what if key is None else what.format(key)} is longer than 32767 bytes")
        out.put_i16(<int16_t>n)
    out.put_bytes(p, n)
    return 0


cdef int begin_frame(WriteBuffer out) except -1:
    # room for `total` and the serialize-type/header-length word, written at the end
    out.claim(8)
    return 0


cdef Py_ssize_t begin_binary_header(WriteBuffer out, int code, int opaque, int flag, int language, int version,
                                    str remark) except -1:
    # The fixed part and the remark; returns where the extFields length goes (end_binary_header fills it).
    cdef Py_ssize_t ext_start
    out.put_i16(<int16_t>code)
    out.put_i8(<char>language)
    out.put_i16(<int16_t>version)
    out.put_i32(opaque)
    out.put_i32(flag)
    if remark is None:
        out.put_i32(0)
    else:
        put_text(out, remark, True, "the remark")
    ext_start = out.size()
    out.put_i32(0)
    return ext_start


cdef int put_ext(WriteBuffer out, const char* key, Py_ssize_t key_length, const char* value,
                 Py_ssize_t value_length) except -1:
    out.put_i16(<int16_t>key_length)
    out.put_bytes(key, key_length)
    out.put_i32(<int32_t>value_length)
    out.put_bytes(value, value_length)
    return 0


cdef int put_ext_str(WriteBuffer out, const char* key, Py_ssize_t key_length, str value) except -1:
    cdef Py_ssize_t n
    cdef const char* p = PyUnicode_AsUTF8AndSize(value, &n)
    return put_ext(out, key, key_length, p, n)


cdef int put_ext_int(WriteBuffer out, const char* key, Py_ssize_t key_length, int64_t value) except -1:
    # in decimal, as Java's String.valueOf writes it
    cdef char digits[24]
    cdef int n = 0
    cdef int i
    cdef uint64_t magnitude = <uint64_t>(-(value + 1)) + 1 if value < 0 else <uint64_t>value
    while True:
        digits[23 - n] = <char>(48 + magnitude % 10)
        n += 1
        magnitude //= 10
        if magnitude == 0:
            break
    if value < 0:
        n += 1
        digits[24 - n] = b'-'
    return put_ext(out, key, key_length, &digits[24 - n], n)


cdef int end_binary_header(WriteBuffer out, Py_ssize_t ext_start, int serialize_type) except -1:
    # the extFields length and the header-length word; the body follows
    cdef Py_ssize_t header_length = out.size() - 8
    store_i32be(out.pointer_at(ext_start), <int32_t>(out.size() - ext_start - 4))
    if header_length > MAX_HEADER_LENGTH:
        raise ValueError(f"remoting header of {header_length} bytes exceeds the 24-bit length field")
    store_u32be(out.pointer_at(4), (<uint32_t>serialize_type << 24) | <uint32_t>header_length)
    return 0


cdef bytes end_frame(WriteBuffer out):
    store_i32be(out.pointer_at(0), <int32_t>(out.size() - 4))
    return PyBytes_FromStringAndSize(out.pointer_at(0), out.size())


cdef int put_binary_header(WriteBuffer out, int code, int opaque, dict ext_fields, int flag, int language,
                           int version, str remark) except -1:
    cdef Py_ssize_t ext_start = begin_binary_header(out, code, opaque, flag, language, version, remark)
    if ext_fields:
        for key, value in ext_fields.items():
            if value is None:
                continue
            if not isinstance(key, str):
                raise TypeError(f"extFields keys are strings, not {type(key).__name__}")
            put_text(out, key, False, "an extFields key")
            put_text(out, value, True, "extFields[{!r}]", key)
    end_binary_header(out, ext_start, SERIALIZE_ROCKETMQ_TYPE)
    return 0


cdef bytes json_header(int code, int opaque, dict ext_fields, int flag, int language, int version, str remark):
    cdef dict header = {"code": code, "flag": flag, "language": LANGUAGE_NAMES.get(language, "OTHER"),
                        "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": version}
    if remark is not None:
        header["remark"] = remark
    if ext_fields:
        header["extFields"] = {k: text_of(v, f"extFields[{k!r}]") for k, v in ext_fields.items() if v is not None}
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_frame(int code, int opaque, dict ext_fields=None, body=None, int flag=0,
                 int serialize_type=SERIALIZE_JSON_TYPE, int language=LANGUAGE_PYTHON, int version=DEFAULT_VERSION,
                 str remark=None) -> bytes:
    """One remoting command as wire bytes ([total] included). extFields values may be str, int or bool."""
    cdef WriteBuffer out = WriteBuffer(256)
    cdef Py_ssize_t header_length
    cdef bytes header
    cdef Py_buffer view
    begin_frame(out)
    if serialize_type == SERIALIZE_ROCKETMQ_TYPE:
        put_binary_header(out, code, opaque, ext_fields, flag, language, version, remark)
    elif serialize_type == SERIALIZE_JSON_TYPE:
        header = json_header(code, opaque, ext_fields, flag, language, version, remark)
        out.put_bytes(PyBytes_AS_STRING(header), len(header))
        header_length = out.size() - 8
        if header_length > MAX_HEADER_LENGTH:
            raise ValueError(f"remoting header of {header_length} bytes exceeds the 24-bit length field")
        store_u32be(out.pointer_at(4), <uint32_t>header_length)
    else:
        raise ValueError(f"unknown serialize type {serialize_type}")
    if body is not None:
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            out.put_bytes(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
    return end_frame(out)


# ---------------------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------------------

cdef int split_frame(ReadCursor* cur, ReadCursor* header) except -1:
    # cur at a frame's header-length word: header becomes a cursor over its header, cur steps past it to the body.
    # Returns the serialize type; raises TruncatedError for a header longer than the frame, or a binary one shorter
    # than its fixed part.
    cdef uint32_t word
    cdef Py_ssize_t header_length
    if cursor_remaining(cur) < 4:
        raise TruncatedError(f"remoting frame of {cursor_remaining(cur)} bytes has no header-length word")
    word = <uint32_t>cursor_i32(cur)
    header_length = word & HEADER_LENGTH_MASK
    if header_length > cursor_remaining(cur):
        raise TruncatedError(f"remoting header of {header_length} bytes but only {cursor_remaining(cur)} follow")
    if word >> 24 == SERIALIZE_ROCKETMQ_TYPE and header_length < BINARY_FIXED_SIZE:
        raise TruncatedError(f"ROCKETMQ remoting header of {header_length} bytes, at least {BINARY_FIXED_SIZE} "
                             f"needed")
    cursor_split(cur, header, header_length)
    return word >> 24


cdef struct BinaryHead:
    int16_t code
    uint8_t language
    int16_t version
    int32_t opaque
    int32_t flag
    const char* remark
    int32_t remark_length
    ReadCursor ext                      # over the extFields entries


cdef int read_binary_head(ReadCursor* cur, BinaryHead* head) except -1:
    # A ROCKETMQ binary header up to its extFields, whose entries ext_part reads.
    cdef int32_t n
    head.code = cursor_i16(cur)
    head.language = cursor_u8(cur)
    head.version = cursor_i16(cur)
    head.opaque = cursor_i32(cur)
    head.flag = cursor_i32(cur)
    n = cursor_i32(cur)
    if n < 0:
        raise CorruptDataError(f"remoting header remark length {n} is negative")
    head.remark = cursor_take(cur, n)
    head.remark_length = n
    n = cursor_i32(cur)
    if n < 0:
        raise CorruptDataError(f"remoting header extFields length {n} is negative")
    cursor_split(cur, &head.ext, n)
    return 0


cdef const char* ext_part(ReadCursor* ext, bint value, int32_t* length) except NULL:
    # The next key (an i16 length) or value (an i32 length) of an extFields entry.
    cdef int32_t n = cursor_i32(ext) if value else cursor_i16(ext)
    if n < 0:
        raise CorruptDataError(f"extFields {'value' if value else 'key'} length {n} is negative")
    length[0] = n
    return cursor_take(ext, n)


cdef RemotingCommand decode_binary_header(RemotingCommand cmd, ReadCursor* cur):
    cdef BinaryHead head
    cdef int32_t n
    cdef const char* p
    cdef dict fields = {}
    cdef str key
    read_binary_head(cur, &head)
    cmd.code = head.code
    cmd.language = head.language
    cmd.version = head.version
    cmd.opaque = head.opaque
    cmd.flag = head.flag
    cmd.remark = utf8(head.remark, head.remark_length, "the remark") if head.remark_length > 0 else None
    while cursor_remaining(&head.ext) > 0:
        p = ext_part(&head.ext, False, &n)
        key = utf8(p, n, "an extFields key")
        p = ext_part(&head.ext, True, &n)
        fields[key] = utf8(p, n, "extFields", key)
    cmd.ext_fields = fields
    return cmd


cdef inline const char* skip_space(const char* p, const char* end) noexcept nogil:
    while p < end and (p[0] == b' ' or p[0] == b'\t' or p[0] == b'\n' or p[0] == b'\r'):
        p += 1
    return p


cdef inline bint is_digit(char c) noexcept nogil:
    return 48 <= c <= 57        # '0' .. '9'


cdef const char* skip_string(const char* p, const char* end) noexcept nogil:
    # p is at the opening quote; returns the position after the closing one, or NULL.
    p += 1
    while p < end:
        if p[0] == b'\\':
            p += 2
            continue
        if p[0] == b'"':
            return p + 1
        p += 1
    return NULL


cdef const char* json_member(const char* p, const char* end, const char** name,
                             Py_ssize_t* name_length) noexcept nogil:
    # p at the opening quote of an object member: its name (as written, escapes included) and the start of its
    # value after the colon; NULL when p is not at one.
    cdef const char* name_end
    if p >= end or p[0] != b'"':
        return NULL
    name_end = skip_string(p, end)
    if name_end == NULL:
        return NULL
    name[0] = p + 1
    name_length[0] = name_end - 1 - (p + 1)
    p = skip_space(name_end, end)
    if p >= end or p[0] != b':':
        return NULL
    return skip_space(p + 1, end)


cdef inline const char* plain_string_end(const char* p, const char* end) noexcept nogil:
    # p is just after an opening quote: the closing quote, or NULL for a string with escapes (or no end)
    while p < end:
        if p[0] == b'"':
            return p
        if p[0] == b'\\':
            return NULL
        p += 1
    return NULL


cdef inline bint is_ascii(const char* p, const char* end) noexcept nogil:
    while p < end:
        if <unsigned char>p[0] >= 0x80:
            return False
        p += 1
    return True


cdef const char* json_int32(const char* p, const char* end, int* out) noexcept nogil:
    # A JSON integer that fits 32 bits, as Python's json reads it; NULL for anything else (a fraction, an exponent,
    # a leading zero, a string, a literal, a larger number).
    cdef bint negative = p < end and p[0] == b'-'
    cdef int64_t value = 0
    cdef const char* digits
    if negative:
        p += 1
    digits = p
    while p < end and is_digit(p[0]):
        value = value * 10 + (p[0] - 48)
        if value > <int64_t>MAX_JSON_INT + 1:      # -2**31 fits, 2**31 does not (checked below)
            return NULL
        p += 1
    if p == digits or (p - digits > 1 and digits[0] == b'0'):
        return NULL
    if p < end and (p[0] == b'.' or p[0] == b'e' or p[0] == b'E'):
        return NULL
    if negative:
        value = -value
    if value > MAX_JSON_INT:
        return NULL
    out[0] = <int>value
    return p


cdef inline bint key_is(const char* key, Py_ssize_t length, const char* name, Py_ssize_t name_length) noexcept nogil:
    return length == name_length and memcmp(key, name, length) == 0


cdef object plain_string(const char** at, const char* end):
    # *at is at an opening quote: the str of a string without escapes, *at moved past its closing quote; None for a
    # string with escapes, no end or bytes that are not UTF-8 (the json module's path reads or refuses those).
    cdef const char* start = at[0] + 1
    cdef const char* close = plain_string_end(start, end)
    if close == NULL:
        return None
    try:
        text = PyUnicode_DecodeUTF8(start, close - start, NULL)
    except UnicodeDecodeError:
        return None
    at[0] = close + 1
    return text


cdef const char* json_ext_fields(const char* p, const char* end, dict fields) except? NULL:
    # p at the '{' of extFields: its string values into fields (nulls left out, as the json path does); NULL for
    # any other shape.
    p = skip_space(p + 1, end)
    if p < end and p[0] == b'}':
        return p + 1
    while True:
        if p >= end or p[0] != b'"':
            return NULL
        key = plain_string(&p, end)
        if key is None:
            return NULL
        p = skip_space(p, end)
        if p >= end or p[0] != b':':
            return NULL
        p = skip_space(p + 1, end)
        if p < end and p[0] == b'"':
            value = plain_string(&p, end)
            if value is None:
                return NULL
            fields[key] = value
        elif end - p >= 4 and memcmp(p, b"null", 4) == 0:
            fields.pop(key, None)
            p += 4
        else:
            return NULL         # numbers and booleans: the json path prints them as Java would
        p = skip_space(p, end)
        if p < end and p[0] == b',':
            p = skip_space(p + 1, end)
        elif p < end and p[0] == b'}':
            return p + 1
        else:
            return NULL


cdef bint decode_json_header_fast(RemotingCommand cmd, const char* p, Py_ssize_t n) except -1:
    # The headers brokers and clients write (integers, plain strings, extFields of strings) read in one pass without
    # building the JSON object; False, with cmd untouched, for anything else, which decode_json_header then reads
    # with the json module (escapes, numbers or booleans as extFields values, unknown keys, malformed JSON).
    cdef const char* end = p + n
    cdef const char* key
    cdef const char* value_end
    cdef Py_ssize_t key_length
    cdef int code = 0
    cdef int version = 0
    cdef int opaque = 0
    cdef int flag = 0
    cdef int language = LANGUAGE_OTHER
    cdef int number
    cdef object remark = None
    cdef dict fields = None
    p = skip_space(p, end)
    if p >= end or p[0] != b'{':
        return False
    p = skip_space(p + 1, end)
    if p < end and p[0] == b'}':
        p += 1
    else:
        while True:
            p = json_member(p, end, &key, &key_length)     # a name with escapes matches none below
            if p == NULL or p >= end:
                return False
            if key_is(key, key_length, b"extFields", 9):
                if fields is not None or p[0] != b'{':
                    return False
                fields = {}
                p = json_ext_fields(p, end, fields)
            elif key_is(key, key_length, b"remark", 6):
                if p[0] == b'"':
                    remark = plain_string(&p, end)
                    if remark is None:
                        return False
                elif end - p >= 4 and memcmp(p, b"null", 4) == 0:
                    remark = None
                    p += 4
                else:
                    return False
            elif key_is(key, key_length, b"language", 8):
                if p[0] == b'"':
                    value_end = plain_string_end(p + 1, end)
                    if value_end == NULL or not is_ascii(p + 1, value_end):
                        return False
                    language = LANGUAGES.get(PyUnicode_DecodeUTF8(p + 1, value_end - p - 1, NULL), LANGUAGE_OTHER)
                    p = value_end + 1
                else:
                    p = json_int32(p, end, &number)
                    if p == NULL or not 0 <= number <= 255:
                        return False
                    language = number
            elif key_is(key, key_length, b"serializeTypeCurrentRPC", 23):
                if p[0] != b'"':
                    return False
                value_end = plain_string_end(p + 1, end)
                if value_end == NULL or not is_ascii(p + 1, value_end):
                    return False
                p = value_end + 1
            else:
                if key_is(key, key_length, b"code", 4):
                    p = json_int32(p, end, &code)
                elif key_is(key, key_length, b"opaque", 6):
                    p = json_int32(p, end, &opaque)
                elif key_is(key, key_length, b"flag", 4):
                    p = json_int32(p, end, &flag)
                elif key_is(key, key_length, b"version", 7):
                    p = json_int32(p, end, &version)
                else:
                    return False
            if p == NULL:
                return False
            p = skip_space(p, end)
            if p < end and p[0] == b',':
                p = skip_space(p + 1, end)
            elif p < end and p[0] == b'}':
                p += 1
                break
            else:
                return False
    if skip_space(p, end) != end:
        return False
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = {} if fields is None else fields
    return True


cdef RemotingCommand decode_json_header(RemotingCommand cmd, const char* p, Py_ssize_t n):
    cdef dict fields = {}
    if decode_json_header_fast(cmd, p, n):
        return cmd
    text = utf8(p, n, "the JSON header")
    try:
        header = LENIENT_JSON.decode(text)
    except ValueError as exc:
        raise CorruptDataError(f"remoting JSON header does not parse: {exc}") from None
    if not isinstance(header, dict):
        raise CorruptDataError(f"remoting JSON header is a {type(header).__name__}, not an object")
    cmd.code = int_field(header, "code", 0)
    cmd.language = language_code(header.get("language"))
    cmd.version = int_field(header, "version", 0)
    cmd.opaque = int_field(header, "opaque", 0)
    cmd.flag = int_field(header, "flag", 0)
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise CorruptDataError(f"remoting header field 'remark' is {type(remark).__name__}, expected a string")
    cmd.remark = remark
    ext = header.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise CorruptDataError(f"remoting header field 'extFields' is {type(ext).__name__}, not an object")
        for key, value in (<dict>ext).items():
            if value is not None:
                fields[key] = text_of(value, f"extFields[{key!r}]")
    cmd.ext_fields = fields
    return cmd


cdef RemotingCommand decode_view(const char* p, Py_ssize_t n, bint with_total):
    cdef ReadCursor cur
    cdef ReadCursor header
    cdef int32_t total
    cdef RemotingCommand cmd = RemotingCommand.__new__(RemotingCommand)
    cursor_init(&cur, p, n)
    if with_total:
        total = cursor_i32(&cur)
        if total < 4 or total != cursor_remaining(&cur):
            raise CorruptDataError(f"remoting frame total {total} does not match its {cursor_remaining(&cur)} "
                                   f"bytes")
    cmd.serialize_type = split_frame(&cur, &header)
    if cmd.serialize_type == SERIALIZE_ROCKETMQ_TYPE:
        decode_binary_header(cmd, &header)
        if cursor_remaining(&header):
            raise CorruptDataError(f"{cursor_remaining(&header)} bytes after the ROCKETMQ remoting header")
    elif cmd.serialize_type == SERIALIZE_JSON_TYPE:
        decode_json_header(cmd, header.pos, cursor_remaining(&header))
    else:
        raise ProtocolError(f"unknown remoting serialize type {cmd.serialize_type}")
    n = cursor_remaining(&cur)
    cmd.body = PyBytes_FromStringAndSize(cur.pos, n) if n > 0 else None
    return cmd


cdef int binary_ext_fields(const char* p, Py_ssize_t n, int* code, const char** names, ExtValue* values,
                           int count) except -1:
    # A frame (without `total`) read as far as a caller that wants only its code and a few extFields needs: no
    # object is made, values point into the frame (NULL: absent). 0, nothing read, for a JSON header (decode the
    # command); raises as decode_view does for a header it cannot read.
    cdef ReadCursor cur
    cdef ReadCursor header
    cdef BinaryHead head
    cdef int serialize_type
    cdef int32_t key_length
    cdef int32_t value_length
    cdef const char* key
    cdef const char* value
    cdef int i
    cursor_init(&cur, p, n)
    serialize_type = split_frame(&cur, &header)
    if serialize_type == SERIALIZE_JSON_TYPE:
        return 0
    if serialize_type != SERIALIZE_ROCKETMQ_TYPE:
        raise ProtocolError(f"unknown remoting serialize type {serialize_type}")
    read_binary_head(&header, &head)
    code[0] = head.code
    for i in range(count):
        values[i].value = NULL
    while cursor_remaining(&head.ext) > 0:
        key = ext_part(&head.ext, False, &key_length)
        value = ext_part(&head.ext, True, &value_length)
        for i in range(count):
            if strlen(names[i]) == <size_t>key_length and memcmp(names[i], key, key_length) == 0:
                values[i].value = value
                values[i].length = value_length
                break
    return 1


def decode_command(frame, bint with_total=False) -> RemotingCommand:
    """The command in `frame`: the bytes after `total` (as the splitter returns them), or with it."""
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        return decode_view(<const char*>view.buf, view.len, with_total)
    finally:
        PyBuffer_Release(&view)


# ---------------------------------------------------------------------------------------------------------
# Peeking at the opaque of a response (what the connection matches to its pending request)
# ---------------------------------------------------------------------------------------------------------

cdef const char* skip_value(const char* p, const char* end) noexcept nogil:
    # Any JSON value (strings, nested objects and arrays, literals); NULL when it does not end in time.
    cdef int depth = 0
    while p < end:
        if p[0] == b'"':
            p = skip_string(p, end)
            if p == NULL:
                return NULL
            if depth == 0:
                return p
            continue
        if p[0] == b'{' or p[0] == b'[':
            depth += 1
        elif p[0] == b'}' or p[0] == b']':
            if depth == 0:
                return p        # the end of the enclosing object: the literal before it is over
            depth -= 1
            if depth == 0:
                return p + 1
        elif depth == 0 and p[0] == b',':
            return p
        p += 1
    return NULL


cdef bint json_top_int(const char* p, const char* end, const char* key, Py_ssize_t key_length,
                       int64_t* out) noexcept nogil:
    # The integer value of a top-level key of a JSON object; False if absent or not an integer.
    cdef const char* name
    cdef Py_ssize_t name_length
    cdef bint negative
    cdef int64_t value
    p = skip_space(p, end)
    if p >= end or p[0] != b'{':
        return False
    p += 1
    while True:
        p = json_member(skip_space(p, end), end, &name, &name_length)
        if p == NULL:
            return False
        if name_length == key_length and memcmp(name, key, key_length) == 0:
            negative = p < end and p[0] == b'-'
            if negative:
                p += 1
            if p >= end or not is_digit(p[0]):
                return False
            value = 0
            while p < end and is_digit(p[0]):
                value = value * 10 + (p[0] - 48)
                if value > MAX_JSON_INT:
                    return False
                p += 1
            out[0] = -value if negative else value
            return True
        p = skip_value(p, end)
        if p == NULL:
            return False
        p = skip_space(p, end)
        if p >= end or p[0] != b',':
            return False
        p += 1


def response_opaque(frame) -> object:
    """The opaque of a response frame (without `total`), or None for a request from the peer.

    Reads only what it needs (fixed offsets of a binary header, the top level of a JSON one), so that the
    connection finds the waiting request without decoding the command twice. Raises ProtocolError for a frame
    whose header cannot say.
    """
    cdef Py_buffer view
    cdef ReadCursor cur
    cdef ReadCursor header
    cdef const char* p
    cdef const char* end
    cdef int serialize_type
    cdef int64_t opaque
    cdef int64_t flag
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        cursor_init(&cur, <const char*>view.buf, view.len)
        serialize_type = split_frame(&cur, &header)
        p, end = header.pos, header.end
        if serialize_type == SERIALIZE_ROCKETMQ_TYPE:
            opaque = load_i32be(p + 5)
            flag = load_i32be(p + 9)
        elif serialize_type == SERIALIZE_JSON_TYPE:
            if not json_top_int(p, end, "opaque", 6, &opaque):
                raise CorruptDataError("remoting JSON header has no integer 'opaque'")
            if not json_top_int(p, end, "flag", 4, &flag):
                flag = 0
        else:
            raise ProtocolError(f"unknown remoting serialize type {serialize_type}")
        if not flag & FLAG_RESPONSE_BIT:
            return None
        return <int32_t>opaque
    finally:
        PyBuffer_Release(&view)
