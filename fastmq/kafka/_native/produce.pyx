# cython: language_level=3
"""The producer's Produce requests and responses, compiled: what one request carries, written and answered
without a Python object per partition.

Wire format (Apache Kafka's Produce, versions 0-13; flexible from v9, KIP-482; integers big-endian):

  request   int32 size | int16 api_key (0) | int16 api_version | int32 correlation_id | client_id string16
            | (v9+: tagged fields of header v2)
            | transactional_id nullable string (v3+) | int16 acks | int32 timeout_ms
            | topics: array of
                name string (v0-12) | topic_id uuid (v13+)
                | partitions: array of  int32 index | records nullable bytes | (v9+: tagged fields)
                | (v9+: tagged fields)
            | (v9+: tagged fields)
  response  int32 correlation_id | (v9+: tagged fields of header v1)
            | topics: array of
                name string (v0-12) | topic_id uuid (v13+)
                | partitions: array of
                    int32 index | int16 error_code | int64 base_offset | int64 log_append_time_ms (v2+)
                    | int64 log_start_offset (v5+)
                    | record_errors (v8+): array of int32 batch_index | nullable string message | (v9+: tagged)
                    | error_message nullable string (v8+) | (v9+: tagged fields: current_leader)
                | (v9+: tagged fields)
            | int32 throttle_time_ms (v1+) | (v9+: tagged fields: node_endpoints)
  Arrays, strings and bytes take the classic (int32 / int16 lengths, -1 = null) or, from v9, the compact
  (uvarint length + 1, 0 = null) forms; see kafka_protocol.pyx, whose encoders this module shares.

A request to a broker leading thousands of partitions carries a batch for each: building a ProduceRequest of
PartitionProduceData objects and running the schema interpreter over them, then decoding the answer into a
PartitionProduceResponse (and its default LeaderIdAndEpoch) per partition, cost the producer's I/O thread more
per batch than the rest of sending it, and fed the cyclic GC. ProduceBatches groups a request's batches by topic
once, writes the request from them (byte for byte what the generic codec writes for the same ProduceRequest,
batches referenced or copied as its WriteBuffer decides), then reads the answer into per-batch C arrays. The
sender completes the batches that succeeded through the accumulator; any other answer (an error, a partition the
response did not mention) goes to the sender's Python paths, with the generic decode of the whole response.

A response is read whole before any batch is completed: truncated or malformed input raises a ProtocolError
subclass (TruncatedError, CorruptDataError) naming the version, with no batch touched (every read is bounds-checked
by the cursor; array counts are checked against the bytes left; strings are checked as UTF-8).
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport bsearch, qsort

from fastmq._native.buffer cimport (
    ReadCursor, WriteBuffer, cursor_i16, cursor_i32, cursor_i64, cursor_init, cursor_remaining, cursor_take,
    store_i32be,
)
from fastmq.kafka._native.kafka_protocol cimport (
    K_STRING, K_UUID, encode_bytes_like, encode_value, read_length, skip_tagged_fields,
)

import uuid as _uuid

from fastmq.errors import CorruptDataError, ProtocolError, TruncatedError
from fastmq.kafka.errors import DuplicateSequenceNumberError, EncodeError

cdef enum:
    PRODUCE = 0                 # the API key
    FIRST_FLEXIBLE = 9          # compact encodings and tagged fields from this version on
    FIRST_TOPIC_ID = 13         # topics named by id instead of by name
    FRAMING_BOUND = 64          # bytes a partition's framing takes at most (a topic's, beyond its name; the header's)

cdef object ZERO_UUID = _uuid.UUID(int=0)
cdef bytes ZERO_ID = bytes(16)
cdef int16_t DUPLICATE_SEQUENCE = DuplicateSequenceNumberError.errno


ctypedef struct PartitionAnswer:
    bint mentioned              # the response named the batch's partition
    int16_t error_code
    int64_t base_offset
    int64_t log_append_time


ctypedef struct BatchKey:
    int64_t key                 # topic group << 32 | partition
    Py_ssize_t index            # the batch's position in the request's list


cdef int compare_keys(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const BatchKey*>a).key, y = (<const BatchKey*>b).key
    return (x > y) - (x < y)


cdef inline int64_t batch_key(Py_ssize_t group, int32_t partition) noexcept:
    return (<int64_t>group << 32) | <uint64_t><uint32_t>partition


@cython.final
cdef class ProduceBatches:
    """The batches of one Produce request: grouped by topic (topics in the order their first batch comes,
    batches in theirs, as the sender's ProduceRequest grouped them), written by encode(), answered through
    read_response() and complete()."""
    cdef readonly list batches          # as drained, each with topic_partition, payload, record_count
    cdef readonly int64_t records       # records in them all
    cdef readonly int64_t payload_bytes # bytes of their payloads
    cdef list names                     # topic name of each group, in wire order
    cdef dict group_of_name             # topic name -> its group
    cdef Py_ssize_t n                   # len(batches)
    cdef Py_ssize_t* group_of           # per batch: its topic's group
    cdef int32_t* partition_of          # per batch: its partition
    cdef Py_ssize_t* payload_size       # per batch: bytes of its payload
    cdef Py_ssize_t* wire_order         # batch positions in the order the request carries them
    cdef Py_ssize_t* group_start        # per group: where its batches start in wire_order (one more entry: n)
    cdef BatchKey* sorted_keys          # made on the first answer out of the request's order; NULL before
    cdef PartitionAnswer* answers       # per batch: what the response said of its partition

    def __cinit__(self, list batches not None):
        cdef Py_ssize_t i, group, groups
        cdef object partition_key, found
        cdef Py_ssize_t* position
        self.batches = list(batches)      # its own: read by index without bounds checks
        self.n = len(self.batches)
        self.names = []
        self.group_of_name = {}
        self.group_of = <Py_ssize_t*>allocate(self.n, sizeof(Py_ssize_t))
        self.partition_of = <int32_t*>allocate(self.n, sizeof(int32_t))
        self.payload_size = <Py_ssize_t*>allocate(self.n, sizeof(Py_ssize_t))
        self.wire_order = <Py_ssize_t*>allocate(self.n, sizeof(Py_ssize_t))
        self.answers = <PartitionAnswer*>allocate(self.n, sizeof(PartitionAnswer))
        for i in range(self.n):
            batch = self.batches[i]
            self.answers[i].mentioned = False
            partition_key = batch.topic_partition
            if not PyTuple_Check(partition_key) or PyTuple_GET_SIZE(partition_key) < 2:
                raise TypeError(f"a batch's topic_partition must be a (topic, partition) tuple, not {partition_key!r}")
            name = <object>PyTuple_GET_ITEM(partition_key, 0)
            found = self.group_of_name.get(name)
            if found is None:
                group = len(self.names)
                self.group_of_name[name] = group
                self.names.append(name)
            else:
                group = found
            self.group_of[i] = group
            self.partition_of[i] = <object>PyTuple_GET_ITEM(partition_key, 1)
            self.records += batch.record_count
            payload = batch.payload
            self.payload_size[i] = len(payload) if payload is not None else 0
            self.payload_bytes += self.payload_size[i]
        # A stable counting sort of the batches by group.
        groups = len(self.names)
        self.group_start = <Py_ssize_t*>allocate(groups + 1, sizeof(Py_ssize_t))
        for group in range(groups + 1):
            self.group_start[group] = 0
        for i in range(self.n):
            self.group_start[self.group_of[i] + 1] += 1
        for group in range(groups):
            self.group_start[group + 1] += self.group_start[group]
        position = <Py_ssize_t*>allocate(groups, sizeof(Py_ssize_t))
        for group in range(groups):
            position[group] = self.group_start[group]
        for i in range(self.n):
            self.wire_order[position[self.group_of[i]]] = i
            position[self.group_of[i]] += 1
        PyMem_Free(position)

    def __dealloc__(self):
        PyMem_Free(self.group_of)
        PyMem_Free(self.partition_of)
        PyMem_Free(self.payload_size)
        PyMem_Free(self.wire_order)
        PyMem_Free(self.group_start)
        PyMem_Free(self.sorted_keys)
        PyMem_Free(self.answers)

    # ---- the request --------------------------------------------------------------------------------------

    def encode(self, WriteBuffer out not None, int16_t version, int32_t correlation_id, object client_id,
               object transactional_id, int16_t acks, int32_t timeout_ms, dict topics not None) -> WriteBuffer:
        """Appends the whole request frame to out. topics: name -> the cluster's topic info (its topic_id goes
        out from v13 on). Large payloads are referenced as out's splice_min says, not copied: send the frame
        with out.parts() before the batches complete."""
        cdef bint compact = version >= FIRST_FLEXIBLE
        cdef Py_ssize_t start = out.size(), total_start = out.total_size(), splices = out.splice_count()
        cdef Py_ssize_t group, k, i, room = FRAMING_BOUND * (self.n + len(self.names) + 2)
        # Room for all that is copied at once: grown step by step, the buffer copied itself over again at each.
        for i in range(self.n):
            if out._splice_min <= 0 or self.payload_size[i] < out._splice_min:
                room += self.payload_size[i]
        out.ensure(room)
        out.put_i32(0)
        out.put_i16(PRODUCE)
        out.put_i16(version)
        out.put_i32(correlation_id)
        try:
            put_value(K_STRING, True, client_id, out, False, "client_id")
            if compact:
                out.put_uvarint(0)
            if version >= 3:
                put_value(K_STRING, True, transactional_id, out, compact, "transactional_id")
            out.put_i16(acks)
            out.put_i32(timeout_ms)
            put_count(out, len(self.names), compact)
            for group in range(len(self.names)):
                name = self.names[group]
                if version >= FIRST_TOPIC_ID:
                    info = topics.get(name)
                    put_value(K_UUID, False, info.topic_id if info is not None else ZERO_UUID, out, compact,
                              "topic_id")
                else:
                    put_value(K_STRING, False, name, out, compact, "name")
                put_count(out, self.group_start[group + 1] - self.group_start[group], compact)
                for k in range(self.group_start[group], self.group_start[group + 1]):
                    i = self.wire_order[k]
                    out.put_i32(self.partition_of[i])
                    try:
                        encode_bytes_like((<object>self.batches[i]).payload, True, out, compact)
                    except EncodeError as exc:
                        exc.path_segments.append("records")
                        raise
                    if compact:
                        out.put_uvarint(0)
                if compact:
                    out.put_uvarint(0)
            if compact:
                out.put_uvarint(0)
        except BaseException:
            out.rewind(start, splices)
            raise
        store_i32be(out.pointer_at(start), <int32_t>(out.total_size() - total_start - 4))
        return out

    # ---- the response -------------------------------------------------------------------------------------

    def read_response(self, object frame, int16_t version, dict topic_names not None) -> bool:
        """Reads a response frame (without its size prefix) into what each batch's partition got. topic_names:
        16-byte topic id -> topic name, for the ids of v13 answers. True when some batch's partition answered
        an error (the caller then has the generic decode read the rest). Raises a ProtocolError subclass for
        a malformed frame, before recording anything."""
        cdef Py_buffer view
        cdef ReadCursor cur
        cdef Py_ssize_t i
        for i in range(self.n):
            self.answers[i].mentioned = False
        PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
        try:
            cursor_init(&cur, <const char*>view.buf, view.len)
            return self._walk(&cur, version, topic_names)
        except ProtocolError as exc:
            # Nothing was completed: the caller fails the whole request, as for a response it could not read.
            raise type(exc)(f"ProduceResponse v{version}: {exc}") from None
        finally:
            PyBuffer_Release(&view)

    cdef bint _walk(self, ReadCursor* cur, int16_t version, dict topic_names) except -1:
        # Records each answer for the batch of its topic and partition (in C arrays: the caller acts on them
        # only once the whole frame was read), and says whether any of those was an error.
        cdef bint compact = version >= FIRST_FLEXIBLE
        cdef Py_ssize_t topic_count, partition_count, t, p, group, expected = 0, index
        cdef int32_t partition
        cdef int16_t error_code
        cdef int64_t base_offset, log_append_time
        cdef bint errors = False
        cdef object name, found
        cdef const char* topic_id
        cursor_i32(cur)                 # correlation id: the connection matched it already
        if compact:
            skip_tagged_fields(cur)
        topic_count = read_count(cur, compact, "responses")
        for t in range(topic_count):
            group = -1
            if version >= FIRST_TOPIC_ID:
                topic_id = cursor_take(cur, 16)
                group = self._group(topic_names.get(PyBytes_FromStringAndSize(topic_id, 16), ""))
            else:
                name = read_name(cur, compact)
                if not name:        # as the generic decode: a nameless topic is looked up by its (zero) id
                    name = topic_names.get(ZERO_ID, name)
                group = self._group(name)
            partition_count = read_count(cur, compact, "partition_responses")
            expected = self.group_start[group] if group >= 0 else 0
            for p in range(partition_count):
                partition = cursor_i32(cur)
                error_code = cursor_i16(cur)
                base_offset = cursor_i64(cur)
                log_append_time = cursor_i64(cur) if version >= 2 else -1
                if version >= 5:
                    cursor_i64(cur)     # log_start_offset
                if version >= 8:
                    skip_record_errors(cur, compact)
                    skip_string(cur, compact)   # error_message
                if compact:
                    skip_tagged_fields(cur)     # current_leader: the error path's generic decode reads it
                if group < 0:
                    continue
                # Brokers mostly answer in the request's order: try the next batch of the group first.
                if expected < self.group_start[group + 1] \
                        and self.partition_of[self.wire_order[expected]] == partition:
                    index = self.wire_order[expected]
                    expected += 1
                else:
                    index = self._find(group, partition)
                    if index < 0:
                        continue    # a partition the request did not carry
                self.answers[index].mentioned = True
                self.answers[index].error_code = error_code
                self.answers[index].base_offset = base_offset
                self.answers[index].log_append_time = log_append_time
            if compact:
                skip_tagged_fields(cur)
        if version >= 1:
            cursor_i32(cur)             # throttle_time_ms
        if compact:
            skip_tagged_fields(cur)
        if cursor_remaining(cur):
            raise CorruptDataError(f"{cursor_remaining(cur)} bytes left after the end of the body")
        for index in range(self.n):
            if self.answers[index].mentioned and self.answers[index].error_code != 0 \
                    and self.answers[index].error_code != DUPLICATE_SEQUENCE:
                errors = True
        return errors

    cdef Py_ssize_t _group(self, object name) except -2:
        found = self.group_of_name.get(name)
        return -1 if found is None else <Py_ssize_t>found

    cdef Py_ssize_t _find(self, Py_ssize_t group, int32_t partition) except -2:
        # The batch of (group, partition) through the request's keys, sorted on first use; -1 when none.
        cdef BatchKey wanted
        cdef BatchKey* hit
        cdef Py_ssize_t i
        if self.sorted_keys == NULL:
            self.sorted_keys = <BatchKey*>allocate(self.n, sizeof(BatchKey))
            for i in range(self.n):
                self.sorted_keys[i].key = batch_key(self.group_of[i], self.partition_of[i])
                self.sorted_keys[i].index = i
            qsort(self.sorted_keys, self.n, sizeof(BatchKey), compare_keys)
        wanted.key = batch_key(group, partition)
        hit = <BatchKey*>bsearch(&wanted, self.sorted_keys, self.n, sizeof(BatchKey), compare_keys)
        return -1 if hit == NULL else hit.index

    def complete(self, object complete_batch) -> list:
        """Calls complete_batch(batch, base_offset, log_append_time) for each batch whose partition answered
        success (or a duplicate sequence: the broker has that batch already), in the request's list order;
        returns the other batches, in that order (answered an error, or not mentioned)."""
        cdef list others = []
        cdef Py_ssize_t i
        cdef PartitionAnswer* answer
        for i in range(self.n):
            answer = &self.answers[i]
            if answer.mentioned and (answer.error_code == 0 or answer.error_code == DUPLICATE_SEQUENCE):
                complete_batch(self.batches[i], answer.base_offset, answer.log_append_time)
            else:
                others.append(self.batches[i])
        return others


cdef void* allocate(Py_ssize_t count, size_t size) except NULL:
    cdef void* memory = PyMem_Malloc(max(count, 1) * size)
    if memory == NULL:
        raise MemoryError()
    return memory


cdef int put_value(int kind, bint nullable, object value, WriteBuffer out, bint compact, str field) except -1:
    try:
        return encode_value(kind, nullable, NULL, value, out, compact)
    except EncodeError as exc:
        exc.path_segments.append(field)
        raise


cdef inline int put_count(WriteBuffer out, Py_ssize_t count, bint compact) except -1:
    if compact:
        out.put_uvarint(<uint64_t>count + 1)
    else:
        out.put_i32(<int32_t>count)
    return 0


cdef Py_ssize_t read_count(ReadCursor* cur, bint compact, str field) except -1:
    # Every element takes at least a byte, which bounds a forged count before anything is read.
    cdef Py_ssize_t count = read_length(cur, compact, True)
    if count == -1:
        raise CorruptDataError(f"null array {field} that is not nullable")
    if count > cursor_remaining(cur):
        raise TruncatedError(f"array {field} of {count} elements needs at least {count} bytes, "
                             f"{cursor_remaining(cur)} left")
    return count


cdef object read_name(ReadCursor* cur, bint compact):
    cdef Py_ssize_t length = read_length(cur, compact, False)
    if length == -1:
        raise CorruptDataError("null topic name")
    return decode_text(cursor_take(cur, length), length)


cdef int skip_string(ReadCursor* cur, bint compact) except -1:
    # A nullable string nobody reads on success; checked as UTF-8 all the same, as the generic decode does.
    cdef Py_ssize_t length = read_length(cur, compact, False)
    if length > 0:
        decode_text(cursor_take(cur, length), length)
    return 0


cdef object decode_text(const char* data, Py_ssize_t length):
    try:
        return PyUnicode_DecodeUTF8(data, length, NULL)
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"string is not valid UTF-8: {exc.reason} at byte {exc.start}") from None


cdef int skip_record_errors(ReadCursor* cur, bint compact) except -1:
    cdef Py_ssize_t count = read_count(cur, compact, "record_errors"), i
    for i in range(count):
        cursor_i32(cur)                 # batch_index
        skip_string(cur, compact)       # batch_index_error_message
        if compact:
            skip_tagged_fields(cur)
    return 0
