"""Kafka record sets read as columns: the public face of the compiled columnar decoder.

    from fastmq.kafka.columnar import read_columns, read_table
    table = read_table(fetched_records, topic="events", partition=3)     # a pyarrow.Table, no copy of the data

A record set is what a Fetch response carries for one partition (or a log segment's bytes): v2 record batches
back to back. They are decoded with no Python object per record, into Arrow-layout buffers whose key and value
columns are binary views pointing at the input itself (uncompressed batches) or at one decompressed buffer per
compressed batch. Control batches are skipped; a truncated last batch, normal at the end of a fetch response, is
ignored. Legacy batches (magic 0 and 1) raise UnsupportedVersionError: read those with
fastmq.kafka.record.MemoryRecords. Corrupt input raises CorruptRecordError (a bad CRC only with check_crcs), and a
compressed batch that would inflate beyond max_decompressed_size raises a CompressionError.

This is the reader a Spark source or any Arrow consumer uses: the columns of RecordColumns are documented in
fastmq/kafka/_native/columnar.pyx, and read_table() turns them into a pyarrow.Table with the columns offset
(int64), timestamp (timestamp[ms]), key and value (binary_view, or binary with view_types=False) and headers
(list of struct<key: string, value: binary>), plus any constant columns given by name.
"""
from __future__ import annotations

from typing import Any, Union

from fastmq.kafka._native.columnar import DEFAULT_MAX_DECOMPRESSED_SIZE, RecordColumns, decode_columns

__all__ = ["DEFAULT_MAX_DECOMPRESSED_SIZE", "RecordColumns", "RecordSet", "read_columns", "read_table"]

RecordSet = Union[bytes, bytearray, memoryview]     # any object with the buffer protocol is taken


def read_columns(records: RecordSet, *, check_crcs: bool = False, skip_control: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> RecordColumns:
    """Decode every record of `records` (v2 batches back to back) into columns.

    check_crcs verifies each batch's CRC-32C first (the broker has checked it already when it stored the
    batch). skip_control=False keeps the records of transaction markers. The result keeps `records` alive: its
    views point into it.
    """
    return decode_columns(records, check_crcs=check_crcs, skip_control=skip_control,
                          max_decompressed_size=max_decompressed_size)


def read_table(records: RecordSet, *, view_types: bool = True, check_crcs: bool = False,
               max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, **constant_columns: Any) -> Any:
    """The records of `records` as a pyarrow.Table (pyarrow must be installed), with no copy of keys and values.

    view_types=False casts key and value to plain binary (one copy) for consumers without view types;
    constant_columns (e.g. topic="events", partition=3) become columns repeating one value.
    """
    columns = read_columns(records, check_crcs=check_crcs, max_decompressed_size=max_decompressed_size)
    return columns.to_arrow(view_types=view_types, **constant_columns)
