# cython: language_level=3
"""The consumer's record decoder: one partition's record set from a FetchResponse -> ConsumerRecords, in one call.

Input: the `records` field of one FetchResponse partition, a record set (batches back to back):
  [BaseOffset int64][Length int32][... Length bytes]   repeated; every magic shares this prefix, and the
  magic byte sits at byte 16 in all of them (see records.pyx for v2 batches, legacy_records.pyx for v0/v1).
The broker cuts the set at its size limits, so the last batch may be incomplete: it is left for the next
fetch. Since Kafka 0.10.1 the first batch always comes whole, however large, so a non-empty set without one
whole batch is an error (or a broker from before that).

Output, per record, kafka-python's ConsumerRecord (topic, partition, leader_epoch, offset, timestamp,
timestamp_type, key, value, headers, checksum, serialized_key_size, serialized_value_size,
serialized_header_size), built directly as instances of the namedtuple class with no Python-level call per
record. What the decoder decides on the way:
- records before the fetch offset are dropped (a fetch may start inside a batch, e.g. a compressed one);
- control batches (transaction markers) are skipped;
- read_committed: transactional batches of aborted transactions are skipped. The response lists the aborted
  transactions (producer id, first offset); a producer's batches are aborted from its first offset until
  its ABORT marker, as in Kafka's own consumer;
- check_crcs verifies every batch's CRC-32C (v2) or every message's CRC-32 (v0/v1) before using it;
- deserializers run only when set;
- headers are kafka-python's list of (str, bytes | None) pairs (records without headers share the read-only
  empty list NO_HEADERS), or with tuple_headers an immutable tuple of them (`()` when there are none). A
  record holds nothing that can take part in a reference cycle, so it and its header list are untracked by
  the garbage collector at birth, as the collector would do for a plain tuple later (tracked, one list per
  record made every collection walk all records waiting in the fetch buffers: 4x the CPU per record).
The next fetch offset follows the last whole batch (for v2 its last offset delta, which survives compaction),
so a fetch never asks twice for the same batch.

Errors never escape as exceptions: decode() returns the records before the first bad batch, the offset of
that batch, and the error, so that the consumer hands out the good records first and raises at the bad one.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromLongLong
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport int8_t, int32_t, int64_t

from fastmq._native.buffer cimport WriteBuffer, load_i16be, load_i32be
from fastmq._native.compression cimport CODEC_MASK, CODEC_NONE, decompress_into
from fastmq.kafka._native.records cimport (
    BATCH_HEADER_SIZE, BatchHeader, CONTROL_BIT, CREATE_TIME, HeaderCursor, LENGTH_AT, LOG_APPEND_TIME, LOG_OVERHEAD,
    MAGIC_AT, RecordView, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, batch_crc, decode_headers, parse_record,
    headers_begin, next_header, raise_record_error, read_batch_header,
)

from fastmq.kafka._native.legacy_records import LegacyRecordBatch
from fastmq.errors import CompressionError
from fastmq.kafka.errors import CorruptRecordError

cdef extern from "Python.h":
    # Declared as returning `object`: Cython then owns the new reference.
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    int PyObject_GC_IsTracked(object obj)
    void PyObject_GC_UnTrack(object obj)
    int PyGC_Disable()
    int PyGC_Enable()
    tuple PyList_AsTuple(object obj)

cdef enum:
    CONSUMER_RECORD_FIELDS = 13     # length of kafka-python's ConsumerRecord
    CONTROL_KEY_SIZE = 4            # control record key: version int16, type int16
    CONTROL_TYPE_ABORT = 0

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024
cdef object MINUS_ONE = -1


class ReadOnlyEmptyList(list):
    """The headers of every record that has none, in kafka-python's list shape: one shared empty list, so
    that a record costs no list of its own. Changing it raises TypeError (copy it first: list(headers));
    copies and pickles of it are plain lists."""

    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError("a record without headers shares this empty list: copy it with list(record.headers)")

    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def __reduce__(self):
        return list, ()


NO_HEADERS = ReadOnlyEmptyList()
PyObject_GC_UnTrack(NO_HEADERS)     # holds nothing, ever: see _records
cdef object no_headers = NO_HEADERS  # a C global: no module dict lookup per record


cdef class ControlState:
    """read_committed bookkeeping of one decode() call: aborted transactions not reached yet (by first offset)
    and the producers whose batches are aborted from here on."""
    cdef list pending               # (first_offset, producer_id), ascending
    cdef Py_ssize_t next_index      # first entry of pending not yet reached
    cdef set aborted_producers      # producer ids inside an aborted transaction

    def __cinit__(self, aborted_transactions):
        self.pending = sorted((txn.first_offset, txn.producer_id) for txn in aborted_transactions)
        self.next_index = 0
        self.aborted_producers = set()

    cdef int reach(self, int64_t last_offset) except -1:
        # Every aborted transaction that began at or before this batch's last offset is now open.
        cdef tuple entry
        while self.next_index < len(self.pending):
            entry = <tuple>self.pending[self.next_index]
            if <int64_t>entry[0] > last_offset:
                break
            self.aborted_producers.add(entry[1])
            self.next_index += 1
        return 0


@cython.final
cdef class RecordDecoder:
    """Consumer-wide decoding settings; decode() is called once per partition of every FetchResponse."""

    cdef PyTypeObject* record_type          # the ConsumerRecord namedtuple class (a tuple subclass)
    cdef object record_class                # keeps record_type alive
    cdef bint check_crcs                    # verify batch / message CRCs
    cdef bint read_committed                # skip aborted transactions
    cdef object key_deserializer            # None, or called on every key
    cdef object value_deserializer          # None, or called on every value
    cdef bint with_context                  # deserializers take (topic, headers, data) instead of (data)
    cdef bint deserialize_null              # also call deserializers for null keys / values
    cdef bint tuple_headers                 # headers as a tuple of pairs (`()` when none) instead of a list
    cdef Py_ssize_t max_decompressed_size   # bound for one batch's decompressed records

    def __cinit__(self, record_class, *, bint check_crcs=True, bint read_committed=False,
                  key_deserializer=None, value_deserializer=None, bint with_context=False,
                  bint deserialize_null=False, bint tuple_headers=False,
                  Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        if not (isinstance(record_class, type) and issubclass(record_class, tuple)
                and len(getattr(record_class, "_fields", ())) == CONSUMER_RECORD_FIELDS):
            raise TypeError("record_class must be a namedtuple class with ConsumerRecord's 13 fields")
        self.record_class = record_class
        self.record_type = <PyTypeObject*>record_class
        self.check_crcs = check_crcs
        self.read_committed = read_committed
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self.with_context = with_context
        self.deserialize_null = deserialize_null
        self.tuple_headers = tuple_headers
        self.max_decompressed_size = max_decompressed_size

    def decode(self, records, str topic not None, int32_t partition, int64_t fetch_offset,
               aborted_transactions=None):
        """(records: list[ConsumerRecord], next_fetch_offset, error or None) for one partition's record set."""
        cdef int gc_was_enabled = PyGC_Disable()
        try:
            return self._decode(records, topic, partition, fetch_offset, aborted_transactions)
        finally:
            if gc_was_enabled:
                PyGC_Enable()

    def decode_many(self, list parts not None, Py_ssize_t start, Py_ssize_t max_records):
        """Decodes parts[start], parts[start + 1], ... (each a tuple (records, topic, partition, fetch_offset,
        aborted_transactions): decode()'s arguments) until max_records records came out or none is left;
        returns (a list of decode()'s results, one per part decoded, the index of the next part).

        Every record allocated counts towards the garbage collector's next run, although it is untracked at
        once: a response of 100k records set off 140 young collections, and with them the older generations'
        walks over everything the process holds (as much CPU as the decoding itself over 4096 partitions).
        The collector waits for the call instead (it could not free a record anyway), so one response costs
        one young collection per max_records; the GIL is held throughout, so no other thread sees it off.
        Large record sets are held off too. Decoded with the collector running, one partition's 1 MiB sets set
        off a young collection every 700 records and a middle one every 7,000, whose survivors soon called for
        a full one: a walk over everything the process holds, with every other thread waiting for the GIL (an
        asyncio consumer's loop stalled 25-31 ms a walk in a process of 43k objects). Held off (1M records of
        100 B, one partition, embedded broker): 1,252 young, 114 middle and 0-1 full collections -> 96, 8-9 and
        0-1, at the same CPU a record within the noise (276-358 ns -> 274-341); 300k read through
        fastmq.kafka.aio: 412 collections -> 32, and a full one in 2 of 6 reads -> in the first only. The price:
        the collection after a call finds its record lists full and walks them out of the cache (callgrind: 10%
        more first-level misses over 1M records)."""
        cdef list results = []
        cdef Py_ssize_t index = start, decoded = 0
        cdef tuple part, result
        cdef int gc_was_enabled = PyGC_Disable()
        try:
            while index < len(parts) and decoded < max_records:
                part = <tuple>parts[index]
                if len(part) != 5 or part[1] is None:
                    raise TypeError("a part is (records, topic: str, partition, fetch_offset, aborted_transactions)")
                result = self._decode(part[0], part[1], part[2], part[3], part[4])
                results.append(result)
                decoded += len(<list>result[0])
                index += 1
        finally:
            if gc_was_enabled:
                PyGC_Enable()
        return results, index

    cdef tuple _decode(self, records, str topic, int32_t partition, int64_t fetch_offset, aborted_transactions):
        # Called with the collector held off by decode() / decode_many()
        cdef list out = []
        cdef int64_t next_offset = fetch_offset
        cdef Py_buffer view
        cdef const char* data
        cdef Py_ssize_t size, pos = 0, batch_size, kept
        cdef int32_t length
        cdef int magic
        cdef bint whole_batch = False
        cdef ControlState control = None
        cdef object partition_obj = partition
        cdef object error = None
        if records is None:
            return out, next_offset, None
        if self.read_committed and aborted_transactions:
            control = ControlState(aborted_transactions)
        PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
        try:
            data = <const char*>view.buf
            size = view.len
            while size - pos >= LOG_OVERHEAD:
                length = load_i32be(data + pos + LENGTH_AT)
                if length < 0:
                    error = CorruptRecordError(
                        f"{topic}-{partition}: record batch at byte {pos} announces a negative length {length}")
                    break
                if length > size - pos - LOG_OVERHEAD:
                    break                       # cut short by the broker's size limit: next fetch
                batch_size = LOG_OVERHEAD + length
                whole_batch = True
                kept = len(out)
                try:
                    if batch_size <= MAGIC_AT:
                        raise CorruptRecordError(f"record batch of {batch_size} bytes has no magic byte")
                    magic = <int8_t>data[pos + MAGIC_AT]
                    if magic == 2:
                        next_offset = self._batch_v2(data + pos, batch_size, topic, partition_obj,
                                                     fetch_offset, next_offset, control, out)
                    elif magic == 0 or magic == 1:
                        next_offset = self._batch_legacy(records, pos, batch_size, magic, topic, partition_obj,
                                                         fetch_offset, next_offset, out)
                    else:
                        raise CorruptRecordError(f"record batch magic {magic} is not 0, 1 or 2")
                except Exception as exc:
                    # Hand out what came before this batch; the consumer raises at the batch itself.
                    del out[kept:]
                    if isinstance(exc, CorruptRecordError):
                        reason = exc.args[0] if exc.args else exc
                        error = CorruptRecordError(f"{topic}-{partition} at offset {next_offset}: {reason}")
                        error.__cause__ = exc
                    else:
                        error = exc
                    break
                pos += batch_size
            if error is None and not whole_batch and size > 0:
                error = CorruptRecordError(
                    f"{topic}-{partition}: the fetch at offset {fetch_offset} returned {size} bytes without one "
                    f"whole record batch (a broker older than 0.10.1 cuts batches at max_partition_fetch_bytes: "
                    f"raise it above the largest batch)")
        finally:
            PyBuffer_Release(&view)
        return out, next_offset, error

    cdef int64_t _batch_v2(self, const char* batch, Py_ssize_t batch_size, str topic, object partition,
                           int64_t fetch_offset, int64_t next_offset, ControlState control, list out) except? -1:
        cdef BatchHeader h
        cdef int64_t last_offset, producer_id
        cdef int codec
        cdef const char* records
        cdef Py_ssize_t records_size
        cdef WriteBuffer decompressed = None
        read_batch_header(batch, batch_size, &h)
        if self.check_crcs and batch_crc(batch, batch_size) != h.crc:
            raise CorruptRecordError(f"record batch at offset {h.base_offset} failed its CRC-32C check")
        last_offset = h.base_offset + h.last_offset_delta
        if last_offset + 1 > next_offset:
            next_offset = last_offset + 1
        if last_offset < fetch_offset:
            return next_offset          # wholly before the position (the broker returns from a batch start)
        codec = h.attributes & CODEC_MASK
        records = batch + BATCH_HEADER_SIZE
        records_size = batch_size - BATCH_HEADER_SIZE
        if codec != CODEC_NONE and h.record_count > 0:
            decompressed = WriteBuffer(records_size * 4 + 64)
            try:
                decompress_into(codec, records, records_size, decompressed, self.max_decompressed_size)
            except CompressionError as exc:
                raise CorruptRecordError(f"record batch at offset {h.base_offset}: {exc}") from exc
            records = decompressed.pointer_at(0)
            records_size = decompressed.size()
        if control is not None and h.producer_id >= 0:
            producer_id = h.producer_id
            control.reach(last_offset)
            if h.attributes & CONTROL_BIT:
                if is_abort_marker(records, records_size, &h):
                    control.aborted_producers.discard(producer_id)
                return next_offset
            if h.attributes & TRANSACTIONAL_BIT and producer_id in control.aborted_producers:
                return next_offset
        if h.attributes & CONTROL_BIT:
            return next_offset
        self._records(records, records_size, &h, topic, partition, fetch_offset, out)
        return next_offset

    cdef int _records(self, const char* records, Py_ssize_t size, const BatchHeader* h, str topic,
                      object partition, int64_t fetch_offset, list out) except -1:
        cdef const char* pos = records
        cdef const char* end = records + size
        cdef RecordView rv
        cdef int status
        cdef int32_t i
        cdef int64_t offset, timestamp, last_timestamp = 0
        cdef bint log_append = h.attributes & TIMESTAMP_TYPE_BIT
        cdef object timestamp_obj = None
        cdef object timestamp_type = LOG_APPEND_TIME if log_append else CREATE_TIME
        cdef object leader_epoch = h.leader_epoch
        cdef object key, value, headers, key_size, value_size, header_size, pair
        cdef object last_value_size = None
        cdef Py_ssize_t last_value_len = -2
        cdef object record
        if log_append:
            timestamp_obj = h.max_timestamp
        for i in range(h.record_count):
            status = parse_record(&pos, end, &rv)
            if status:
                raise_record_error(status, h.base_offset + i)
            offset = h.base_offset + rv.offset_delta
            if offset < fetch_offset:
                continue
            if not log_append:
                timestamp = h.first_timestamp + rv.timestamp_delta
                # Records of one batch mostly share their timestamp: reuse the int object.
                if timestamp_obj is None or timestamp != last_timestamp:
                    timestamp_obj = PyLong_FromLongLong(timestamp)
                    last_timestamp = timestamp
            if rv.header_count:
                headers = decode_headers(&rv)
                header_size = headers_size(&rv)
                for pair in <list>headers:
                    PyObject_GC_UnTrack(pair)     # (str, bytes | None): what the collector would do
                if self.tuple_headers:
                    headers = PyList_AsTuple(headers)
                # A header list or tuple holds only untracked pairs; a list joins no cycle unless its reader
                # builds one in it.
                PyObject_GC_UnTrack(headers)
            elif self.tuple_headers:
                headers = ()
                header_size = MINUS_ONE
            else:
                headers = no_headers
                header_size = MINUS_ONE
            if rv.key == NULL:
                key = None
                key_size = MINUS_ONE
            else:
                key = PyBytes_FromStringAndSize(rv.key, rv.key_len)
                key_size = rv.key_len
            if rv.value == NULL:
                value = None
                value_size = MINUS_ONE
            else:
                value = PyBytes_FromStringAndSize(rv.value, rv.value_len)
                if rv.value_len != last_value_len:
                    last_value_size = rv.value_len
                    last_value_len = rv.value_len
                value_size = last_value_size
            if self.key_deserializer is not None and (key is not None or self.deserialize_null):
                key = self._deserialize(self.key_deserializer, topic, headers, key)
            if self.value_deserializer is not None and (value is not None or self.deserialize_null):
                value = self._deserialize(self.value_deserializer, topic, headers, value)
            # A tuple subclass instance with empty slots, filled in place: what namedtuple's __new__ does,
            # without the call.
            record = PyType_GenericAlloc(self.record_type, CONSUMER_RECORD_FIELDS)
            set_item(record, 0, topic)
            set_item(record, 1, partition)
            set_item(record, 2, leader_epoch)
            set_item(record, 3, PyLong_FromLongLong(offset))
            set_item(record, 4, timestamp_obj)
            set_item(record, 5, timestamp_type)
            set_item(record, 6, key)
            set_item(record, 7, value)
            set_item(record, 8, headers)
            set_item(record, 9, None)
            set_item(record, 10, key_size)
            set_item(record, 11, value_size)
            set_item(record, 12, header_size)
            # The collector untracks a tuple once nothing in it can hold a reference cycle; doing it at once
            # spares every collection a walk over the records waiting in the fetch buffers. The headers are
            # untracked above and the other fields are str, int, bytes or None, unless a deserializer made the
            # key or the value: only then is there something to look at.
            if not ((self.key_deserializer is not None and PyObject_GC_IsTracked(key))
                    or (self.value_deserializer is not None and PyObject_GC_IsTracked(value))):
                PyObject_GC_UnTrack(record)
            out.append(record)
        if pos != end:
            raise CorruptRecordError(
                f"record batch at offset {h.base_offset} has {end - pos} bytes after its {h.record_count} records")
        return 0

    cdef object _deserialize(self, object deserializer, str topic, object headers, object data):
        if self.with_context:
            return deserializer(topic, headers, data)
        return deserializer(data)

    cdef int64_t _batch_legacy(self, object records, Py_ssize_t pos, Py_ssize_t batch_size, int magic, str topic,
                               object partition, int64_t fetch_offset, int64_t next_offset,
                               list out) except? -1:
        # v0/v1 message sets come only from old producers: read through the record layer's reader.
        batch = LegacyRecordBatch(memoryview(records)[pos:pos + batch_size], magic)
        if self.check_crcs and not batch.validate_crc():
            raise CorruptRecordError(f"message at offset {batch.base_offset} failed its CRC-32 check")
        for record in batch:
            if self.check_crcs and not record.validate_crc():
                raise CorruptRecordError(f"message at offset {record.offset} failed its CRC-32 check")
            if record.offset + 1 > next_offset:
                next_offset = record.offset + 1
            if record.offset < fetch_offset:
                continue
            key, value = record.key, record.value
            key_size = -1 if key is None else len(key)
            value_size = -1 if value is None else len(value)
            headers = () if self.tuple_headers else []
            if self.key_deserializer is not None and (key is not None or self.deserialize_null):
                key = self._deserialize(self.key_deserializer, topic, headers, key)
            if self.value_deserializer is not None and (value is not None or self.deserialize_null):
                value = self._deserialize(self.value_deserializer, topic, headers, value)
            out.append(self.record_class(topic, partition, -1, record.offset, record.timestamp,
                                         record.timestamp_type, key, value, headers, record.checksum,
                                         key_size, value_size, -1))
        return next_offset


cdef inline void set_item(object record, Py_ssize_t index, object value) noexcept:
    # noexcept: it cannot fail, and without it Cython asks PyErr_Occurred() after each of a record's 13 calls.
    Py_INCREF(value)
    PyTuple_SET_ITEM(record, index, value)


cdef object headers_size(const RecordView* rv):
    # kafka-python's serialized_header_size: UTF-8 key bytes plus value bytes over all headers.
    cdef HeaderCursor header
    cdef Py_ssize_t total = 0
    cdef int32_t i
    headers_begin(&header, rv)
    for i in range(rv.header_count):
        next_header(&header)
        total += header.name_len
        if header.value_len > 0:
            total += header.value_len
    return total


cdef bint is_abort_marker(const char* records, Py_ssize_t size, const BatchHeader* h) except -1:
    # The single record of a control batch has the key [version int16][type int16].
    cdef const char* pos = records
    cdef RecordView rv
    cdef int status
    rv.key = NULL
    rv.key_len = -1
    if h.record_count < 1:
        return False
    status = parse_record(&pos, records + size, &rv)
    if status:
        raise_record_error(status, h.base_offset)
    if rv.key == NULL or rv.key_len < CONTROL_KEY_SIZE:
        raise CorruptRecordError(f"control record at offset {h.base_offset} has a key of {rv.key_len} bytes")
    return load_i16be(rv.key + 2) == CONTROL_TYPE_ABORT
