"""Columnar decoding: the same records as the per-record reader, Arrow views without copies, bad input."""
from __future__ import annotations

import os
import tracemalloc

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.kafka._native.columnar import decode_columns
from fastmq.kafka._native.legacy_records import LegacyRecordBatchBuilder
from fastmq.kafka._native.memory_records import MemoryRecords
from fastmq.kafka._native.records import RecordBatchBuilder
from fastmq.errors import FastMQError
from fastmq.kafka.errors import CorruptRecordError, UnsupportedVersionError


def build(records, codec=0, base_offset=0, **options):
    builder = RecordBatchBuilder(2, codec, False, -1, -1, -1, 64 << 20, base_offset=base_offset, **options)
    for record in records:
        builder.append(*record)
    return bytes(builder.build())


def sample(count, seed=0):
    out = []
    for i in range(count):
        key = None if (i + seed) % 4 == 0 else b"key-%d" % i
        value = None if (i + seed) % 9 == 0 else (b"" if i % 13 == 0 else os.urandom(i % 40))
        headers = [("trace-%d" % i, b"abc" * (i % 3)), ("empty", None)] if i % 6 == 0 else []
        out.append((i, 1700000000000 + i, key, value, headers))
    return out


def per_record(data):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for batch in MemoryRecords(data) if not batch.is_control_batch for r in batch]


def table_rows(table):
    rows = zip(*(table.column(name).to_pylist() for name in ("offset", "timestamp", "key", "value", "headers")))
    return [(o, int(ts.timestamp() * 1000) if ts is not None else None, k, v,
             [(h["key"], h["value"]) for h in hs]) for o, ts, k, v, hs in rows]


def test_columns_equal_the_per_record_reader_across_codecs_and_batches():
    control = RecordBatchBuilder(2, 0, True, 9, 0, -1, 1 << 20, control=True, base_offset=500)
    control.append(0, 1700000000000, b"\x00\x00\x00\x01", b"", [])
    data = (build(sample(300), codec=0) + build(sample(200, 1), codec=3, base_offset=300)
            + bytes(control.build()) + build(sample(50, 2), codec=4, base_offset=501))
    truncated = data + build(sample(10), base_offset=551)[:70]
    columns = decode_columns(truncated)
    assert columns.count == 550
    table = columns.to_arrow(topic="t", partition=7)
    table.validate(full=True)
    assert table_rows(table) == per_record(data)
    assert set(table.column("topic").to_pylist()) == {"t"} and set(table.column("partition").to_pylist()) == {7}
    assert columns.offset_list() == [r[0] for r in per_record(data)]
    plain = columns.to_arrow(view_types=False)
    plain.validate(full=True)
    assert plain.schema.field("value").type == pa.binary()
    assert table_rows(plain) == per_record(data)


def test_uncompressed_values_are_not_copied():
    data = build([(0, 1, None, b"v" * 100, []), (1, 2, None, b"w" * 50, [])])
    columns = decode_columns(data)
    assert columns.data_buffers == [data]
    values = columns.to_arrow().column("value").chunk(0)
    assert values.buffers()[2].address == pa.py_buffer(data).address
    assert values.to_pylist() == [b"v" * 100, b"w" * 50]


def test_log_append_time_and_empty_input():
    data = build([(i, 1000 + i, None, b"x", []) for i in range(3)], timestamp_type=1)
    assert decode_columns(data).timestamp_list() == [1002] * 3
    empty = decode_columns(b"")
    assert empty.count == 0 and empty.to_arrow().num_rows == 0


def test_crc_checking_and_legacy_batches():
    data = bytearray(build(sample(20)))
    data[-2] ^= 0xFF
    decode_columns(bytes(data))       # CRCs are only checked on request
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_columns(bytes(data), check_crcs=True)
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    legacy.append(0, 1, None, b"old")
    with pytest.raises(UnsupportedVersionError):
        decode_columns(bytes(legacy.build()))


def test_forged_record_count_fails_before_allocating():
    data = bytearray(build(sample(5)))
    data[57:61] = (2**31 - 1).to_bytes(4, "big")
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="announces"):
            decode_columns(bytes(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


VALID = [build(sample(40, seed), codec) for seed, codec in ((0, 0), (1, 2), (2, 4))]


@given(st.sampled_from(VALID), st.integers(min_value=0, max_value=10**5),
       st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), max_size=5))
def test_corruption_gives_only_fastmq_errors(data, cut, flips):
    corrupted = bytearray(data[: cut % (len(data) + 1)])
    for position, mask in flips:
        if corrupted:
            corrupted[position % len(corrupted)] ^= mask
    try:
        columns = decode_columns(bytes(corrupted))
    except FastMQError:
        return
    columns.to_arrow().validate(full=True)


@given(st.binary(max_size=3000))
def test_random_bytes_give_only_fastmq_errors(data):
    try:
        decode_columns(data)
    except FastMQError:
        pass
