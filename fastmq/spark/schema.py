"""The rows of format("fastmq"): Spark's Kafka connector's schema, built as Arrow record batches.

    key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int
    [, headers array<struct<key string, value binary>>]    (includeHeaders=true; null for a record without)

Spark takes a read()'s RecordBatches only when the first one's schema equals exactly the Arrow form of the
declared schema: binary (not binary_view), int32 partition, timestamp("us", "UTC"), every field nullable. The
columnar decoder gives binary views and millisecond timestamps; this module turns its columns into that form
with one copy of keys and values and no Python object per record.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

SPARK_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
             "timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def spark_ddl(include_headers: bool) -> str:
    return f"{SPARK_DDL}, {HEADERS_DDL}" if include_headers else SPARK_DDL


def column_names(include_headers: bool) -> list[str]:
    names: list[str] = arrow_schema(include_headers).names
    return names


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
              ("offset", pa.int64()), ("timestamp", TIMESTAMP_TYPE), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", HEADER_TYPE))
    return pa.schema(fields)


SCHEMAS = {False: arrow_schema(False), True: arrow_schema(True)}


class ConstantColumns:
    """Columns that repeat one value (topic, partition, timestampType), built once at the largest size asked
    for and sliced (no copy) for each batch."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Any, ...], pa.Array] = {}

    def get(self, value: Any, type_: pa.DataType, count: int) -> pa.Array:
        key = (value, str(type_))
        array = self._cache.get(key)
        if array is None or len(array) < count:
            size = max(count, 1024)
            if pa.types.is_string(type_):
                data = value.encode()
                offsets = np.arange(0, (size + 1) * len(data), len(data) or 1, dtype=np.int32)[:size + 1] \
                    if data else np.zeros(size + 1, dtype=np.int32)
                array = pa.Array.from_buffers(type_, size, [None, pa.py_buffer(offsets), pa.py_buffer(data * size)])
            else:
                array = numpy_to_arrow(np.full(size, value, dtype=type_.to_pandas_dtype()), type_)
            self._cache[key] = array
        return array.slice(0, count)


def numpy_to_arrow(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A 1-d numpy array of a fixed-width type (bool packed to bits) as an Arrow array over the same memory.
    Not pa.array(values): on a numpy array that imports pandas, a second or more of CPU in every fresh Python
    worker (profiled), where nothing else of the read needs pandas."""
    if values.dtype == np.bool_:
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])


def spark_batch(table: pa.Table, *, topic: str, partition: int, timestamp_types: pa.Array,
                include_headers: bool, constants: ConstantColumns) -> pa.RecordBatch:
    """A columnar decoder's table (offset, timestamp ms, key, value, headers: view_types=False) as one
    RecordBatch of the Spark schema. timestamp_types: the int32 timestampType column."""
    count = table.num_rows
    timestamps = _array(table, "timestamp")
    micros = np.frombuffer(timestamps.buffers()[1], dtype=np.int64, count=count,
                           offset=timestamps.offset * 8) * 1000
    columns = [_array(table, "key"), _array(table, "value"),
               constants.get(topic, pa.string(), count), constants.get(partition, pa.int32(), count),
               _array(table, "offset"),
               pa.Array.from_buffers(TIMESTAMP_TYPE, count, [None, pa.py_buffer(micros)]), timestamp_types]
    if include_headers:
        columns.append(_null_when_empty(_array(table, "headers")))
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMAS[include_headers])


def _array(table: pa.Table, name: str) -> pa.Array:
    """A column as one array: the decoder's columns have one chunk, taken as is (combine_chunks would copy it)."""
    column = table.column(name)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _null_when_empty(headers: pa.ListArray) -> pa.ListArray:
    """Spark's connector gives null, not an empty array, for a record without headers."""
    offsets = headers.offsets
    lengths = np.diff(offsets.to_numpy())
    if lengths.all():
        return headers.cast(HEADER_TYPE)
    if headers.offset or offsets[0].as_py():        # a slice: rebase the offsets so that values start at 0
        headers = pa.ListArray.from_arrays(numpy_to_arrow(offsets.to_numpy() - offsets[0].as_py(), pa.int32()),
                                           headers.flatten())
        offsets = headers.offsets
    return pa.ListArray.from_arrays(offsets, headers.values, type=HEADER_TYPE,
                                    mask=numpy_to_arrow(lengths == 0, pa.bool_()))
