# cython: language_level=3
"""SEND_BATCH_MESSAGE bodies -> store MessageBatch: the batch data path of the embedded broker's RocketMQ front end.

A batch body is the producer's messages back to back in MessageDecoder.encodeMessages' layout (the client side
writes it in fastmq/rocketmq/_native/messages.pyx, SendEncoder.encode_batch; read_batch_item, shared with the codec's
decode_batch_body, reads one item):
    [TOTALSIZE i32][MAGICCODE i32][BODYCRC i32][FLAG i32][BODYLENGTH i32][BODY][PROPERTIESLENGTH i16][PROPERTIES]
TOTALSIZE counts the whole item; PROPERTIES is UTF-8 "name \\x01 value \\x02 ..." text.

fill_batch copies each message's properties, as sent, into the batch's arena (MessageBatch.append), and points
at its body in the request, which the batch holds until it is in the CommitLog (MessageBatch.hold): no
bytes, dict or re-encoded properties are made per message, as decode_batch_body + MessageBatch.add did (a quarter
of the broker's time per batch). Per message only what the store needs as Python objects is made: the TAGS
value's Java hash (the ConsumeQueue's tags code) and the KEYS / UNIQ_KEY values for the index. Properties must be
UTF-8 (the store's recovery reads them as text): an item that is not is refused with the whole batch.

fill_message does the same for one SEND_MESSAGE(_V2): the header's properties text goes into the batch as sent,
encoded once, instead of being decoded into a dict and encoded again (that and the Python around it were a
tenth of the broker's time per sync send).
"""
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp

from fastmq._native.store_codec cimport MessageBatch, Property, java_string_hash, next_property
from fastmq.rocketmq._native.messages cimport BatchItem, read_batch_item


cdef inline bint is_ascii(const char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if <uint8_t>p[i] >= 0x80:
            return False
    return True


cdef inline bint named(const Property* prop, const char* name, Py_ssize_t length) noexcept nogil:
    return prop.name_length == length and memcmp(prop.name, name, length) == 0


cdef int append_message(MessageBatch batch, const char* body, Py_ssize_t body_length, const char* properties,
                        Py_ssize_t properties_length, int64_t born_timestamp, int32_t flag, const char* host,
                        Py_ssize_t host_length, bint body_held) except -1:
    # One message into batch, with what the store needs of its properties: the TAGS value's Java hash (the
    # ConsumeQueue's tags code) and the KEYS / UNIQ_KEY values for the index.
    cdef int64_t tags_code = 0
    cdef object keys = None
    cdef object uniq_key = None
    cdef Property prop
    cdef const char* cursor = properties
    while next_property(&cursor, properties + properties_length, &prop):
        if named(&prop, "TAGS", 4):
            if prop.value_length:
                tags_code = java_string_hash(PyUnicode_DecodeUTF8(prop.value, prop.value_length, NULL))
        elif named(&prop, "KEYS", 4):
            keys = PyUnicode_DecodeUTF8(prop.value, prop.value_length, NULL)
        elif named(&prop, "UNIQ_KEY", 8):
            uniq_key = PyUnicode_DecodeUTF8(prop.value, prop.value_length, NULL)
    batch.append(body, body_length, properties, properties_length, tags_code, born_timestamp, flag, host,
                 host_length, body_held)
    if keys or uniq_key:
        batch.index_items.append((batch.count - 1, keys, uniq_key))
    return 0


cdef const char* host_of(bytes born_host, Py_ssize_t* length):
    if born_host is None:
        length[0] = 0
        return NULL
    length[0] = len(born_host)
    return born_host


def fill_batch(MessageBatch batch, data, int64_t born_timestamp, bytes born_host=None) -> int:
    """Append every message of a SEND_BATCH_MESSAGE body to batch; the number appended. TruncatedError or
    CorruptDataError for a body that does not parse, ValueError for a message the batch refuses (too large)."""
    cdef const char* start
    cdef Py_ssize_t length
    cdef BatchItem item
    cdef Py_ssize_t host_length
    cdef const char* host = host_of(born_host, &host_length)
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t added = 0
    start = batch.hold(data, &length)
    while pos < length:
        read_batch_item(start, pos, length, &item)
        if not is_ascii(item.properties, item.properties_length):
            PyUnicode_DecodeUTF8(item.properties, item.properties_length, NULL)    # raises for bad UTF-8
        append_message(batch, item.body, item.body_length, item.properties, item.properties_length,
                       born_timestamp, item.flag, host, host_length, True)
        added += 1
        pos += item.total
    return added


def fill_message(MessageBatch batch, body, str properties, int64_t born_timestamp, int32_t flag,
                 bytes born_host=None) -> None:
    """Append one SEND_MESSAGE message (its body and its header's properties text, stored as sent) to batch.
    ValueError for a message the batch refuses (too large)."""
    cdef Py_ssize_t properties_length
    cdef const char* text = PyUnicode_AsUTF8AndSize(properties, &properties_length)
    cdef Py_ssize_t length
    cdef Py_ssize_t host_length
    cdef const char* host = host_of(born_host, &host_length)
    cdef const char* start = batch.hold(body, &length)
    append_message(batch, start, length, text, properties_length, born_timestamp, flag, host, host_length, True)
