# cython: language_level=3
"""Columnar decoding of Kafka record sets into Arrow-layout buffers, with no Python object per record.

Output (n records, h headers in all), every buffer little-endian as Arrow wants it:
  offsets        int64[n]
  timestamps     int64[n]    epoch ms (create time, or the batch's max timestamp for log-append time)
  keys, values   Arrow "binary view" columns: 16-byte views [length i32][4-byte prefix][buffer i32][offset i32]
                 (values of 12 bytes or less are stored inside the view), a validity bitmap (None when no
                 value is null), pointing into data buffers without copying them
  header_offsets int32[n + 1]  Arrow list offsets into the header columns
  header_keys    binary views (UTF-8), header_values binary views with a validity bitmap
  data_buffers   list of the memory the views point into: the input record set itself for uncompressed
                 batches, plus one decompressed buffer per compressed batch

A binary view points at bytes where they already are, so uncompressed input is never copied. to_arrow()
wraps the buffers with pyarrow (an optional dependency) without copying them either.

Control batches are skipped; a truncated last batch (normal at the end of a fetch response) is ignored.
Legacy batches (magic 0/1) are refused with UnsupportedVersionError: use MemoryRecords for them.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy, memset

from fastmq._native.buffer cimport ReadCursor, WriteBuffer, cursor_init, load_i32be
from fastmq._native.compression cimport CODEC_MASK, CODEC_NONE, decompress_into
from fastmq.kafka._native.records cimport (
    BATCH_HEADER_SIZE, BatchHeader, CONTROL_BIT, HeaderCursor, LENGTH_AT, LOG_OVERHEAD, MAGIC_AT, RECORD_OK,
    RecordView, TIMESTAMP_TYPE_BIT, batch_crc, headers_begin, next_header, parse_record, raise_record_error,
    read_batch_header,
)

from fastmq.errors import CompressionError
from fastmq.kafka.errors import CorruptRecordError, UnsupportedVersionError

cdef enum:
    VIEW_SIZE = 16              # bytes of one Arrow binary view
    VIEW_INLINE_MAX = 12        # longest value stored inside its view
    MIN_RECORD_SIZE = 7         # length, attributes, timestamp, offset, key, value, header count: 1 byte each

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


cdef inline bytearray new_bytes(Py_ssize_t n):
    return PyByteArray_FromStringAndSize(NULL, n)


cdef inline void write_view(char* view, const char* data, Py_ssize_t length, int32_t buffer_index,
                            const char* buffer_start) noexcept nogil:
    # Every byte of the view is written (the arrays are not zero-filled first: that memset cost as much as
    # a tenth of the decode); short values are zero-padded inside it.
    cdef int32_t n = <int32_t>length
    memcpy(view, &n, 4)
    if length <= VIEW_INLINE_MAX:
        memset(view + 4, 0, VIEW_INLINE_MAX)
        memcpy(view + 4, data, length)
    else:
        memcpy(view + 4, data, 4)
        memcpy(view + 8, &buffer_index, 4)
        n = <int32_t>(data - buffer_start)
        memcpy(view + 12, &n, 4)


cdef inline void write_null_view(char* view) noexcept nogil:
    memset(view, 0, VIEW_SIZE)


ctypedef struct Source:
    # One region of records to decode: a batch's records, in the input or in a decompressed buffer.
    const char* records         # first record
    Py_ssize_t size             # bytes of records
    int32_t buffer_index        # which data buffer `records` lies in
    const char* buffer_start    # start of that data buffer (views hold offsets from it)
    BatchHeader header          # the batch's header


@cython.final
cdef class RecordColumns:
    """The decoded columns (see the module docstring); to_arrow() gives a pyarrow.Table."""
    cdef readonly Py_ssize_t count           # records
    cdef readonly Py_ssize_t header_count    # headers over all records
    cdef readonly bytearray offsets          # int64[count]
    cdef readonly bytearray timestamps       # int64[count]
    cdef readonly bytearray key_views        # 16 * count bytes
    cdef readonly object key_validity        # bitmap, or None when no key is null
    cdef readonly bytearray value_views      # 16 * count bytes
    cdef readonly object value_validity      # bitmap, or None when no value is null
    cdef readonly bytearray header_offsets   # int32[count + 1]
    cdef readonly bytearray header_key_views     # 16 * header_count bytes
    cdef readonly bytearray header_value_views   # 16 * header_count bytes
    cdef readonly object header_value_validity   # bitmap, or None
    cdef readonly list data_buffers          # objects the views point into, by buffer index

    def offset_list(self) -> list:
        """The offsets as Python ints (for tests and small inputs)."""
        return list(memoryview(self.offsets).cast("q"))

    def timestamp_list(self) -> list:
        return list(memoryview(self.timestamps).cast("q"))

    def to_arrow(self, *, view_types: bool = True, **constant_columns):
        """A pyarrow.Table (offset, timestamp, key, value, headers [, constant columns]) over our buffers.

        view_types=False casts key/value to plain binary (one copy) for consumers without view support.
        constant_columns (e.g. topic="t", partition=0) are added as columns repeating one value.
        """
        import pyarrow as pa

        data = [pa.py_buffer(b) for b in self.data_buffers]
        def binary_view(views, validity, count, type_=pa.binary_view()):
            return pa.Array.from_buffers(type_, count, [None if validity is None else pa.py_buffer(validity),
                                                        pa.py_buffer(views), *data])
        keys = binary_view(self.key_views, self.key_validity, self.count)
        values = binary_view(self.value_views, self.value_validity, self.count)
        header_struct = pa.StructArray.from_arrays(
            [binary_view(self.header_key_views, None, self.header_count, pa.string_view()),
             binary_view(self.header_value_views, self.header_value_validity, self.header_count)],
            names=["key", "value"])
        headers = pa.ListArray.from_buffers(
            pa.list_(header_struct.type), self.count, [None, pa.py_buffer(self.header_offsets)],
            children=[header_struct])
        if not view_types:
            keys, values = keys.cast(pa.binary()), values.cast(pa.binary())
            headers = headers.cast(pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
        columns = {
            "offset": pa.Array.from_buffers(pa.int64(), self.count, [None, pa.py_buffer(self.offsets)]),
            "timestamp": pa.Array.from_buffers(pa.timestamp("ms"), self.count,
                                               [None, pa.py_buffer(self.timestamps)]),
            "key": keys,
            "value": values,
            "headers": headers,
        }
        for name, value in constant_columns.items():
            columns[name] = pa.repeat(value, self.count)
        return pa.table(columns)


cdef bytearray all_valid(Py_ssize_t n):
    cdef bytearray bitmap = new_bytes((n + 7) // 8)
    memset(PyByteArray_AS_STRING(bitmap), 0xFF, (n + 7) // 8)
    return bitmap


def decode_columns(buffer, *, bint check_crcs=False, bint skip_control=True,
                   Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE) -> RecordColumns:
    """Decode every record of a record set (v2 batches back to back) into columns."""
    cdef Py_buffer input_view
    cdef const char* data
    cdef Py_ssize_t size, pos = 0, batch_size, n_records = 0, n_headers = 0
    cdef list sources_data = []
    cdef list buffers = [buffer]
    cdef Source* sources = NULL
    cdef Py_ssize_t n_sources = 0, i
    cdef BatchHeader header
    cdef WriteBuffer out
    cdef RecordColumns columns
    cdef int32_t length
    cdef Py_ssize_t start
    cdef bytearray decompressed
    PyObject_GetBuffer(buffer, &input_view, PyBUF_SIMPLE)
    try:
        data = <const char*>input_view.buf
        size = input_view.len
        # Pass 1: batch headers only, to size every column exactly (counts are checked against the bytes
        # that must hold them, so a forged count cannot trigger a huge allocation).
        while size - pos >= LOG_OVERHEAD:
            length = load_i32be(data + pos + LENGTH_AT)
            if length < 0 or length > size - pos - LOG_OVERHEAD:
                break
            batch_size = LOG_OVERHEAD + length
            if batch_size > MAGIC_AT and data[pos + MAGIC_AT] != 2:
                raise UnsupportedVersionError(
                    f"columnar decoding reads magic 2 batches, found magic {data[pos + MAGIC_AT]}")
            read_batch_header(data + pos, batch_size, &header)
            if check_crcs and batch_crc(data + pos, batch_size) != header.crc:
                raise CorruptRecordError(f"record batch at offset {header.base_offset} fails its CRC check")
            if not (skip_control and header.attributes & CONTROL_BIT):
                sources_data.append((pos, batch_size))
            pos += batch_size
        sources = <Source*>PyMem_Malloc(max(len(sources_data), 1) * sizeof(Source))
        if sources == NULL:
            raise MemoryError()
        for start, batch_size in sources_data:
            read_batch_header(data + start, batch_size, &sources[n_sources].header)
            if sources[n_sources].header.attributes & CODEC_MASK == CODEC_NONE:
                sources[n_sources].records = data + start + BATCH_HEADER_SIZE
                sources[n_sources].size = batch_size - BATCH_HEADER_SIZE
                sources[n_sources].buffer_index = 0
                sources[n_sources].buffer_start = data
            else:
                out = WriteBuffer((batch_size - BATCH_HEADER_SIZE) * 4 + 64)
                try:
                    decompress_into(sources[n_sources].header.attributes & CODEC_MASK,
                                    data + start + BATCH_HEADER_SIZE, batch_size - BATCH_HEADER_SIZE,
                                    out, max_decompressed_size)
                except CompressionError as exc:
                    raise CorruptRecordError(
                        f"record batch at offset {sources[n_sources].header.base_offset}: {exc}") from exc
                decompressed = out.take()
                buffers.append(decompressed)
                sources[n_sources].records = PyByteArray_AS_STRING(decompressed)
                sources[n_sources].size = len(decompressed)
                sources[n_sources].buffer_index = len(buffers) - 1
                sources[n_sources].buffer_start = sources[n_sources].records
            if sources[n_sources].header.record_count > sources[n_sources].size // MIN_RECORD_SIZE:
                raise CorruptRecordError(
                    f"record batch at offset {sources[n_sources].header.base_offset} announces "
                    f"{sources[n_sources].header.record_count} records in {sources[n_sources].size} bytes")
            n_records += sources[n_sources].header.record_count
            n_sources += 1
        columns = _decode(sources, n_sources, n_records)
        columns.data_buffers = buffers
        return columns
    finally:
        PyMem_Free(sources)
        PyBuffer_Release(&input_view)


cdef inline void clear_bit(char* bits, Py_ssize_t i) noexcept nogil:
    bits[i >> 3] = bits[i >> 3] & ~(1 << (i & 7))


cdef RecordColumns _decode(Source* sources, Py_ssize_t n_sources, Py_ssize_t n_records):
    cdef RecordColumns columns = RecordColumns.__new__(RecordColumns)
    cdef Py_ssize_t s = 0, r, row = 0, n_headers = 0
    cdef ReadCursor cur
    cdef RecordView record
    cdef int status = RECORD_OK
    cdef int64_t* offsets
    cdef int64_t* timestamps
    cdef int32_t* header_offsets
    cdef char* key_views
    cdef char* value_views
    cdef char* key_bits
    cdef char* value_bits
    cdef bint null_key = False, null_value = False, log_append_time
    cdef int64_t base_offset, timestamp_base, delta_mask
    cdef int32_t buffer_index
    cdef const char* buffer_start
    cdef const char* key
    cdef const char* value
    cdef Py_ssize_t key_len, value_len
    cdef bytearray key_validity = all_valid(n_records)
    cdef bytearray value_validity = all_valid(n_records)
    columns.count = n_records
    columns.offsets = new_bytes(n_records * 8)
    columns.timestamps = new_bytes(n_records * 8)
    columns.key_views = new_bytes(n_records * VIEW_SIZE)
    columns.value_views = new_bytes(n_records * VIEW_SIZE)
    columns.header_offsets = new_bytes((n_records + 1) * 4)
    offsets = <int64_t*>PyByteArray_AS_STRING(columns.offsets)
    timestamps = <int64_t*>PyByteArray_AS_STRING(columns.timestamps)
    key_views = PyByteArray_AS_STRING(columns.key_views)
    value_views = PyByteArray_AS_STRING(columns.value_views)
    key_bits = PyByteArray_AS_STRING(key_validity)
    value_bits = PyByteArray_AS_STRING(value_validity)
    header_offsets = <int32_t*>PyByteArray_AS_STRING(columns.header_offsets)
    header_offsets[0] = 0
    record.headers = NULL
    record.headers_len = 0
    # Everything the loop reads is first copied into locals: the view writes go through char pointers,
    # which may alias anything, and would otherwise force reloads of the record and batch fields.
    with nogil:
        for s in range(n_sources):
            cursor_init(&cur, sources[s].records, sources[s].size)
            base_offset = sources[s].header.base_offset
            log_append_time = (sources[s].header.attributes & TIMESTAMP_TYPE_BIT) != 0
            timestamp_base = sources[s].header.max_timestamp if log_append_time else sources[s].header.first_timestamp
            delta_mask = 0 if log_append_time else -1     # log-append time ignores the records' deltas
            buffer_index = sources[s].buffer_index
            buffer_start = sources[s].buffer_start
            for r in range(sources[s].header.record_count):
                status = parse_record(&cur.pos, cur.end, &record)
                if status != RECORD_OK:
                    break
                key, key_len = record.key, record.key_len
                value, value_len = record.value, record.value_len
                offsets[row] = base_offset + record.offset_delta
                timestamps[row] = timestamp_base + (record.timestamp_delta & delta_mask)
                n_headers += record.header_count
                header_offsets[row + 1] = <int32_t>n_headers
                if key == NULL:
                    clear_bit(key_bits, row)
                    write_null_view(key_views + row * VIEW_SIZE)
                    null_key = True
                else:
                    write_view(key_views + row * VIEW_SIZE, key, key_len, buffer_index, buffer_start)
                if value == NULL:
                    clear_bit(value_bits, row)
                    write_null_view(value_views + row * VIEW_SIZE)
                    null_value = True
                else:
                    write_view(value_views + row * VIEW_SIZE, value, value_len, buffer_index, buffer_start)
                row += 1
            if status != RECORD_OK:
                break
    if status != RECORD_OK:
        raise_record_error(status, sources[s].header.base_offset)
    columns.header_count = n_headers
    columns.key_validity = key_validity if null_key else None
    columns.value_validity = value_validity if null_value else None
    _decode_headers(columns, sources, n_sources)
    return columns


cdef int _decode_headers(RecordColumns columns, Source* sources, Py_ssize_t n_sources) except -1:
    # Headers are rare, so they get their own pass over the (already validated) records instead of
    # growing buffers in the main loop.
    cdef Py_ssize_t s, r, h, row = 0, n = columns.header_count
    cdef ReadCursor cur
    cdef RecordView record
    cdef HeaderCursor header
    cdef char* key_views
    cdef char* value_views
    cdef char* value_bits
    cdef bint null_value = False
    cdef bytearray value_validity = all_valid(n)
    memset(&record, 0, sizeof(record))
    columns.header_key_views = new_bytes(n * VIEW_SIZE)
    columns.header_value_views = new_bytes(n * VIEW_SIZE)
    columns.header_value_validity = None
    if n == 0:
        return 0
    key_views = PyByteArray_AS_STRING(columns.header_key_views)
    value_views = PyByteArray_AS_STRING(columns.header_value_views)
    value_bits = PyByteArray_AS_STRING(value_validity)
    for s in range(n_sources):
        cursor_init(&cur, sources[s].records, sources[s].size)
        for r in range(sources[s].header.record_count):
            parse_record(&cur.pos, cur.end, &record)
            headers_begin(&header, &record)
            for h in range(record.header_count):
                next_header(&header)
                # Keys become an Arrow string column: hold them to UTF-8 as the per-record reader does.
                try:
                    PyUnicode_DecodeUTF8(header.name, header.name_len, NULL)
                except UnicodeDecodeError as exc:
                    raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from None
                write_view(key_views + row * VIEW_SIZE, header.name, header.name_len, sources[s].buffer_index,
                           sources[s].buffer_start)
                if header.value == NULL:
                    clear_bit(value_bits, row)
                    write_null_view(value_views + row * VIEW_SIZE)
                    null_value = True
                else:
                    write_view(value_views + row * VIEW_SIZE, header.value, header.value_len,
                               sources[s].buffer_index, sources[s].buffer_start)
                row += 1
    columns.header_value_validity = value_validity if null_value else None
    return 0
