"""The Spark-schema batches built from record sets, checked without Spark: what they hold, and that building
them never goes through pa.array on numpy data (which imports pandas: a second or more of CPU in each fresh
Spark Python worker)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.kafka.record.default_records import DefaultRecordBatchBuilder
from fastmq.spark.partition_reader import records_to_spark, walk_batches
from fastmq.spark.schema import ConstantColumns, numpy_to_arrow


def record_batch(base_offset: int, count: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(count):
        builder.append(i, 1700000000000 + i, None, b"value-%d" % (base_offset + i),
                       [("h", b"%d" % i)] if i % 2 else [])
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")          # baseOffset is outside the CRC
    return bytes(data)


@pytest.fixture
def no_pa_array(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pa.array called on the read path")

    monkeypatch.setattr(pa, "array", refuse)


@pytest.mark.parametrize("include_headers", [False, True])
def test_a_range_inside_a_batch_is_sliced_without_pa_array(no_pa_array, include_headers):
    records = record_batch(0, 10) + record_batch(10, 10)
    next_offset, batches = walk_batches(records, None)
    batch = records_to_spark(records, batches, 3, 15, "t", 2, include_headers, ConstantColumns())
    assert next_offset == 20 and batch is not None
    assert batch.column("offset").to_pylist() == list(range(3, 15))
    assert batch.column("value").to_pylist() == [b"value-%d" % i for i in range(3, 15)]
    assert batch.column("partition").to_pylist() == [2] * 12 and batch.column("topic").to_pylist() == ["t"] * 12
    assert batch.column("timestampType").to_pylist() == [0] * 12
    if include_headers:
        assert batch.column("headers").to_pylist() == [
            [{"key": "h", "value": b"%d" % (i % 10)}] if i % 2 else None for i in range(3, 15)]


def test_dropped_batches_and_mixed_timestamp_types_are_filtered_without_pa_array(no_pa_array):
    records = record_batch(0, 10) + record_batch(10, 10) + record_batch(20, 10)
    batches = [(0, 9, 1), (10, 19, -1), (20, 29, 0)]          # LogAppendTime, aborted, CreateTime
    batch = records_to_spark(records, batches, 5, 25, "t", 0, False, ConstantColumns())
    assert batch is not None
    assert batch.column("offset").to_pylist() == list(range(5, 10)) + list(range(20, 25))
    assert batch.column("timestampType").to_pylist() == [1] * 5 + [0] * 5


@given(st.lists(st.booleans(), max_size=70))
def test_numpy_bools_as_arrow_equal_pa_array(values):
    array = np.array(values, dtype=np.bool_)
    assert numpy_to_arrow(array, pa.bool_()).equals(pa.array(array))


@given(st.lists(st.integers(-2**31, 2**31 - 1), max_size=40), st.sampled_from(["int32", "int64"]))
def test_numpy_integers_as_arrow_equal_pa_array(values, dtype):
    array = np.array(values, dtype=dtype)
    type_ = pa.from_numpy_dtype(array.dtype)
    assert numpy_to_arrow(array, type_).equals(pa.array(array, type_))
    assert numpy_to_arrow(array[::2], type_).equals(pa.array(array[::2], type_))
