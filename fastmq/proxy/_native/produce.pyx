# cython: language_level=3
"""The per-message work of a /produce: the body's plain messages encoded, and a Kafka answer's per-message
results written as JSON text straight from the producer's records.

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
from libc.string cimport memcpy

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
