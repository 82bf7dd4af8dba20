"""Kafka's murmur2 against the Java client's published values and kafka-python; xxHash against xxhash."""
from __future__ import annotations

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from fastmq._native.hashing import kafka_partition, murmur2, xxhash32, xxhash64

# From Apache Kafka's UtilsTest.testMurmur2 (the Java client's expectations).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2.items())
def test_murmur2_equals_the_java_client(key, expected):
    assert murmur2(key) == expected


def _as_signed(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


@given(st.binary(max_size=300))
def test_murmur2_equals_kafka_python(key):
    assert murmur2(key) == _as_signed(kafka_python_murmur2(key) & 0xFFFFFFFF)


@given(st.binary(min_size=1, max_size=100), st.integers(min_value=1, max_value=1000))
def test_partition_equals_kafka_python_default_partitioner(key, partitions):
    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    assert kafka_partition(key, partitions) == expected


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError):
        kafka_partition(b"k", 0)


@given(st.binary(max_size=200), st.integers(min_value=0, max_value=2**32 - 1))
def test_xxhash_equals_the_reference(data, seed):
    assert xxhash32(data, seed) == xxhash.xxh32_intdigest(data, seed)
    assert xxhash64(data, seed) == xxhash.xxh64_intdigest(data, seed)
