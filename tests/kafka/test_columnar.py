"""fastmq.kafka.columnar, the public columnar reader: the same records as the per-record reader, as a table."""
from __future__ import annotations

import pytest

from fastmq.kafka.columnar import read_columns, read_table
from fastmq.kafka.errors import CorruptRecordError
from fastmq.kafka.record.default_records import DefaultRecordBatchBuilder
from fastmq.kafka.record.memory_records import MemoryRecords

pytest.importorskip("pyarrow")


def record_set(count: int, codec: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i in range(count):
        builder.append(i, 1700000000000 + i, None if i % 3 == 0 else b"k%d" % i, b"value-%d" % i,
                       [("h", b"%d" % i)] if i % 2 else [])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_read_table_holds_what_the_record_reader_reads(codec):
    data = record_set(50, codec) + record_set(7, codec)[:20]         # a truncated last batch is ignored
    table = read_table(data, view_types=False, topic="events", partition=3)
    expected = [(r.offset, r.key, r.value, [{"key": k, "value": v} for k, v in r.headers])
                for batch in MemoryRecords(data) for r in batch]
    rows = table.to_pylist()
    assert [(row["offset"], row["key"], row["value"], row["headers"]) for row in rows] == expected
    assert {(row["topic"], row["partition"]) for row in rows} == {("events", 3)}


def test_read_columns_counts_and_checks_crcs():
    data = bytearray(record_set(10))
    assert read_columns(data).count == 10
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        read_columns(data, check_crcs=True)
