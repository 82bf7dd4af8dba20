"""Kafka record batches through the kafka-python-compatible API: fastmq vs aiokafka's Cython records vs
kafka-python's pure-Python records. Also the columnar reader, CRC-32C, CRC-32 and varints.

Run: pytest benches/bench_records.py --benchmark-only
"""
from __future__ import annotations

import os
import zlib

import aiokafka.record.default_records as aiokafka_records
import crc32c as crc32c_package
import kafka.record.default_records as kafka_python_records
import kafka.record.util as kafka_python_util
import pytest

import fastmq.kafka.record.default_records as fastmq_records
import fastmq.kafka.record.util as fastmq_util
from fastmq._native.checksum import crc32, crc32c
from fastmq.kafka._native.columnar import decode_columns

PROTOCOL = "kafka"
RECORDS = 1000
VALUE_SIZE = 100
VALUES = [os.urandom(VALUE_SIZE) for _ in range(RECORDS)]
TIMESTAMP = 1700000000000

IMPLEMENTATIONS = {
    "fastmq": (fastmq_records.DefaultRecordBatchBuilder, fastmq_records.DefaultRecordBatch),
    "aiokafka": (aiokafka_records.DefaultRecordBatchBuilder, aiokafka_records.DefaultRecordBatch),
    "kafka-python": (kafka_python_records.DefaultRecordBatchBuilder, kafka_python_records.DefaultRecordBatch),
}


def build_batch(builder_class):
    builder = builder_class(2, 0, False, -1, -1, -1, 1 << 20)
    append = builder.append
    for offset, value in enumerate(VALUES):
        append(offset, TIMESTAMP, None, value, [])
    return builder.build()


BATCH = bytes(build_batch(fastmq_records.DefaultRecordBatchBuilder))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_build_batch(compare, impl):
    builder_class = IMPLEMENTATIONS[impl][0]
    bench = compare("kafka batch build 1000 x 100 B", impl, items=RECORDS, nbytes=len(BATCH))
    assert len(bench(build_batch, builder_class)) == len(BATCH)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_read_batch_values(compare, impl):
    reader_class = IMPLEMENTATIONS[impl][1]

    def read():
        count = 0
        for record in reader_class(BATCH):
            record.value
            count += 1
        return count

    bench = compare("kafka batch read values 1000 x 100 B", impl, items=RECORDS, nbytes=len(BATCH))
    assert bench(read) == RECORDS


def test_read_batch_columnar(compare):
    bench = compare("kafka batch read values 1000 x 100 B", "fastmq columnar", items=RECORDS, nbytes=len(BATCH))
    assert bench(decode_columns, BATCH).count == RECORDS


def test_read_batch_columnar_to_arrow(compare):
    pytest.importorskip("pyarrow")
    bench = compare("kafka batch read values 1000 x 100 B", "fastmq columnar+to_arrow", items=RECORDS,
                    nbytes=len(BATCH))
    assert bench(lambda: decode_columns(BATCH).to_arrow()).num_rows == RECORDS


CRC_DATA = os.urandom(16 * 1024 * 1024)


CHECKSUMS = [
    ("crc32c", "fastmq", crc32c), ("crc32c", "crc32c package", crc32c_package.crc32c),
    ("crc32", "fastmq", crc32), ("crc32", "zlib", zlib.crc32),
]
REFERENCE = {"crc32c": crc32c_package.crc32c, "crc32": zlib.crc32}


@pytest.mark.parametrize(("checksum", "impl", "function"), CHECKSUMS)
def test_checksum_throughput(compare, checksum, impl, function):
    bench = compare(f"{checksum} 16 MiB", impl, nbytes=len(CRC_DATA))
    assert bench(function, CRC_DATA) == REFERENCE[checksum](CRC_DATA)


SMALL_CRC = os.urandom(1024)


@pytest.mark.parametrize(("checksum", "impl", "function"), CHECKSUMS)
def test_checksum_small(compare, checksum, impl, function):
    bench = compare(f"{checksum} 1 KiB", impl, items=1, nbytes=len(SMALL_CRC))
    bench(function, SMALL_CRC)


VARINT_VALUES = [(-1) ** i * (i * 7919) for i in range(10000)]
VARINT_BYTES = b"".join(
    (lambda out: (kafka_python_util.encode_varint(v, out.append), bytes(out))[1])(bytearray()) for v in VARINT_VALUES)


@pytest.mark.parametrize(("impl", "util"), [("fastmq", fastmq_util), ("kafka-python", kafka_python_util)])
def test_varint_encode(compare, impl, util):
    def encode():
        out = bytearray()
        write = out.append
        encode_varint = util.encode_varint
        for value in VARINT_VALUES:
            encode_varint(value, write)
        return out

    bench = compare("zigzag varint encode (util API)", impl, items=len(VARINT_VALUES))
    assert bytes(bench(encode)) == VARINT_BYTES


@pytest.mark.parametrize(("impl", "util"), [("fastmq", fastmq_util), ("kafka-python", kafka_python_util)])
def test_varint_decode(compare, impl, util):
    def decode():
        decode_varint, pos, end, total = util.decode_varint, 0, len(VARINT_BYTES), 0
        while pos < end:
            value, pos = decode_varint(VARINT_BYTES, pos)
            total += 1
        return total

    bench = compare("zigzag varint decode (util API)", impl, items=len(VARINT_VALUES))
    assert bench(decode) == len(VARINT_VALUES)
