# cython: language_level=3
"""The per-message work of a /produce: the body's plain messages read or encoded, and a Kafka answer's
per-message results written as JSON text straight from the producer's batches.

plain_batch: the common body, {"producer": P, "topic": T, "messages": [{"value": V}, ...]} (producer and topic
optional, members in any order, JSON white space anywhere between tokens), every text printable ASCII with no
escape, is read in one pass: the values are slices of the body, with no dict or str made per message (orjson
makes both, and they were the largest part of reading a batch). Any other body, valid or not (another member,
a key, a repeated member, an escape, a non-ASCII text, an empty list), is left to orjson and the Python parser.

plain_values: a message that is only {"value": <text>} (the common case) is its text as UTF-8, taken in one pass
over the body's list; the others are left to the Python parser (fastmq/proxy/parsing.py), which says what is wrong
with them.

kafka_results:

A record's result is its batch's base offset plus its index in the batch, and its timestamp (the broker's
LogAppendTime when the topic has one, else the record's create time): reading them from the batches' C fields
and writing their digits saves making a future, a RecordMetadata, three ints and a dict per message, which
were most of the proxy's own work per message of a batched /produce.

Wire format: a JSON array with one object per record, in the records' order, each exactly
    {"queue":"<broker>:<partition>","offset":<offset>,"timestamp":<timestamp>}
(integers in decimal, -1 for an offset the broker did not answer). Queue names are "<broker>:<partition>" with
a broker name of A-Z a-z 0-9 . _ - (the backend's own), so nothing in it needs escaping.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.string cimport memchr, memcmp, memcpy

from fastmq._native.buffer cimport WriteBuffer
from fastmq._native.producer_batch cimport BATCH_DONE, BATCH_SPLIT, FutureRecordMetadata, ProducerBatch

cdef enum:
    INT_DIGITS = 20             # an int64 in decimal, with its sign


cdef inline char* put_literal(char* p, const char* text, Py_ssize_t n) noexcept nogil:
    memcpy(p, text, n)
    return p + n


cdef inline char* put_decimal(char* p, int64_t value) noexcept nogil:
    cdef char digits[INT_DIGITS]
    cdef int count = 0
    cdef uint64_t rest
    if value < 0:
        p[0] = c'-'
        p += 1
        rest = <uint64_t>0 - <uint64_t>value
    else:
        rest = <uint64_t>value
    while True:
        digits[count] = <char>(c'0' + rest % 10)
        count += 1
        rest //= 10
        if rest == 0:
            break
    while count:
        count -= 1
        p[0] = digits[count]
        p += 1
    return p


def kafka_results(list batches, const unsigned char[::1] places, int64_t create_time, bytes broker):
    """(the JSON array of the records' results, {partition: the offset after the batches that hold them}) once
    every batch is done, from AIOKafkaProducer.send_placed()'s batches and places (per record: its batch's position in
    `batches` and its index in that batch, as native int32) and the records' create time; raises the first
    failed batch's error."""
    cdef Py_ssize_t count = places.shape[0] // (2 * sizeof(int32_t)), index
    cdef const int32_t* place = <const int32_t*>&places[0] if count else NULL
    cdef WriteBuffer out = WriteBuffer(64 + count * 64)
    cdef FutureRecordMetadata follower = FutureRecordMetadata.__new__(FutureRecordMetadata)
    cdef ProducerBatch batch, previous = None
    cdef dict ends = {}
    cdef const char* prefix = broker
    cdef Py_ssize_t prefix_length = len(broker)
    cdef int64_t partition = -1, offset, timestamp
    cdef int32_t at
    cdef char* p
    cdef char* start
    # The widest object: {"queue":" prefix : partition ","offset": int ,"timestamp": int }, and a comma.
    cdef Py_ssize_t widest = 48 + prefix_length + 3 * INT_DIGITS
    out.claim(1)[0] = c'['
    for index in range(count):
        batch = <ProducerBatch?>batches[place[2 * index]]
        at = place[2 * index + 1]
        if batch.state == BATCH_SPLIT:
            # Its children hold its records now: a record's future knows which (and where in it).
            follower.batch = batch
            follower.index = at
            batch = follower._settled_batch()
            at = follower.index
        if batch.state != BATCH_DONE:
            raise ValueError(f"record {index} of the produce is not acknowledged yet")
        if batch.error is not None:
            raise batch.error
        if batch is not previous:
            previous = batch
            partition = batch.topic_partition[1]
            if batch.base_offset >= 0 and ends.get(partition, 0) < batch.base_offset + batch.record_count:
                ends[partition] = batch.base_offset + batch.record_count
        offset = batch.base_offset + at if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else create_time
        start = p = out.claim(widest)
        if index:
            p[0] = c','
            p += 1
        p = put_literal(p, b'{"queue":"', 10)
        p = put_literal(p, prefix, prefix_length)
        p[0] = c':'
        p = put_decimal(p + 1, partition)
        p = put_literal(p, b'","offset":', 11)
        p = put_decimal(p, offset)
        p = put_literal(p, b',"timestamp":', 13)
        p = put_decimal(p, timestamp)
        p[0] = c'}'
        out.truncate_to(out.size() - widest + (p + 1 - start))
    out.claim(1)[0] = c']'
    return bytes(out.detach()), ends


cdef enum:
    QUOTE = 34
    BACKSLASH = 92
    FIRST_PRINTABLE = 0x20
    FIRST_NON_ASCII = 0x80
    GIVEN_PRODUCER = 1
    GIVEN_TOPIC = 2
    GIVEN_MESSAGES = 4


cdef inline int peek(const unsigned char* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # The byte at i, or -1 past the end.
    return s[i] if i < n else -1


cdef inline Py_ssize_t skip_space(const unsigned char* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and (s[i] == c' ' or s[i] == c'\t' or s[i] == c'\n' or s[i] == c'\r'):
        i += 1
    return i


cdef inline Py_ssize_t plain_text_end(const unsigned char* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # s[i] follows a text's opening quote: the index of its closing quote when every byte before it is printable
    # ASCII and no escape, else -1 (the general parser reads it). memchr finds the quote, and the check of the
    # bytes before it has no branch a byte (the compiler makes it a vector loop).
    cdef const unsigned char* quote = <const unsigned char*>memchr(s + i, QUOTE, n - i) if i < n else NULL
    cdef Py_ssize_t end, j
    cdef unsigned char bad = 0
    if quote == NULL:
        return -1
    end = quote - s
    for j in range(i, end):
        bad |= (s[j] < FIRST_PRINTABLE) | (s[j] >= FIRST_NON_ASCII) | (s[j] == BACKSLASH)
    return -1 if bad else end


cdef inline bint is_key(const unsigned char* s, Py_ssize_t start, Py_ssize_t end, const char* key,
                        Py_ssize_t length) noexcept nogil:
    return end - start == length and memcmp(s + start, key, length) == 0


def plain_batch(const unsigned char[::1] body):
    """({"producer": P, "topic": T} of those given, values) of a body of the common shape (see the module
    docstring), the values as bytes in order; None for any other body."""
    cdef Py_ssize_t n = body.shape[0], i, end, key_start
    cdef const unsigned char* s
    cdef int given = 0
    cdef dict named = {}
    cdef list values = []
    if n == 0:
        return None
    s = &body[0]
    i = skip_space(s, 0, n)
    if peek(s, i, n) != c'{':
        return None
    while True:
        i = skip_space(s, i + 1, n)
        if peek(s, i, n) != QUOTE:
            return None
        key_start = i + 1
        end = plain_text_end(s, key_start, n)
        if end < 0:
            return None
        i = skip_space(s, end + 1, n)
        if peek(s, i, n) != c':':
            return None
        i = skip_space(s, i + 1, n)
        if is_key(s, key_start, end, b"messages", 8) and not given & GIVEN_MESSAGES:
            given |= GIVEN_MESSAGES
            i = read_plain_messages(s, i, n, values)
            if i < 0:
                return None
        elif is_key(s, key_start, end, b"producer", 8) and not given & GIVEN_PRODUCER:
            given |= GIVEN_PRODUCER
            i = read_plain_name(s, i, n, named, "producer")
        elif is_key(s, key_start, end, b"topic", 5) and not given & GIVEN_TOPIC:
            given |= GIVEN_TOPIC
            i = read_plain_name(s, i, n, named, "topic")
        else:
            return None
        if i < 0:
            return None
        i = skip_space(s, i, n)
        if peek(s, i, n) == c'}':
            break
        if peek(s, i, n) != c',':
            return None
    if skip_space(s, i + 1, n) != n or not given & GIVEN_MESSAGES:
        return None
    return named, values


cdef Py_ssize_t read_plain_name(const unsigned char* s, Py_ssize_t i, Py_ssize_t n, dict named,
                                str name) except -2:
    # A plain text at i into named[name]; the index after it, or -1.
    cdef Py_ssize_t end
    if peek(s, i, n) != QUOTE:
        return -1
    end = plain_text_end(s, i + 1, n)
    if end < 0:
        return -1
    named[name] = PyUnicode_DecodeASCII(<const char*>s + i + 1, end - i - 1, NULL)
    return end + 1


cdef Py_ssize_t read_plain_messages(const unsigned char* s, Py_ssize_t i, Py_ssize_t n, list values) except -2:
    # A non-empty array of {"value": <plain text>} at i, the texts appended to values; the index after it, or -1.
    cdef Py_ssize_t end
    if peek(s, i, n) != c'[':
        return -1
    while True:
        i = skip_space(s, i + 1, n)
        if peek(s, i, n) != c'{':
            return -1
        i = skip_space(s, i + 1, n)
        if i + 7 > n or memcmp(s + i, b'"value"', 7) != 0:
            return -1
        i = skip_space(s, i + 7, n)
        if peek(s, i, n) != c':':
            return -1
        i = skip_space(s, i + 1, n)
        if peek(s, i, n) != QUOTE:
            return -1
        end = plain_text_end(s, i + 1, n)
        if end < 0:
            return -1
        values.append(PyBytes_FromStringAndSize(<const char*>s + i + 1, end - i - 1))
        i = skip_space(s, end + 1, n)
        if peek(s, i, n) != c'}':
            return -1
        i = skip_space(s, i + 1, n)
        if peek(s, i, n) == c']':
            return i + 1
        if peek(s, i, n) != c',':
            return -1


def plain_values(list listed):
    """(values, others): values[i] is message i's text as UTF-8 when the message is only {"value": <text>}, else
    None, and others lists the indexes of those other messages (UnicodeEncodeError for a lone surrogate)."""
    cdef Py_ssize_t count = len(listed), index
    cdef list values = [None] * count
    cdef list others = []
    cdef object fields, text
    for index in range(count):
        fields = listed[index]
        if type(fields) is dict and len(<dict>fields) == 1:
            text = (<dict>fields).get("value")
            if type(text) is str:
                values[index] = (<str>text).encode("utf-8")
                continue
        others.append(index)
    return values, others
