"""kafka-python's kafka.record.default_records (RecordBatch v2) on fastmq's compiled layer.

The wire format is documented in fastmq/kafka/_native/records.pyx.
"""
from __future__ import annotations

from fastmq.kafka._native.records import ControlRecord, DefaultRecordBase, RecordBatchBuilder
from fastmq.kafka._native.records import Record as DefaultRecord
from fastmq.kafka._native.records import RecordBatch as DefaultRecordBatch
from fastmq.kafka._native.records import RecordMetadata as DefaultRecordMetadata
from fastmq.kafka import codec as _codec
# The names kafka-python's module imports, which code reaches through it.
from fastmq.kafka.codec import (  # noqa: F401
    gzip_decode, gzip_encode, lz4_decode, lz4_encode, snappy_decode, snappy_encode, zstd_decode, zstd_encode,
)
from fastmq.kafka.errors import CorruptRecordError, UnsupportedCodecError  # noqa: F401
from fastmq.kafka.record.abc import ABCRecord, ABCRecordBatch, ABCRecordBatchBuilder  # noqa: F401
from fastmq.kafka.record.util import calc_crc32c, decode_varint, encode_varint, size_of_varint  # noqa: F401

__all__ = ["ControlRecord", "DefaultRecord", "DefaultRecordBase", "DefaultRecordBatch",
           "DefaultRecordBatchBuilder", "DefaultRecordMetadata"]


class DefaultRecordBatchBuilder(RecordBatchBuilder):
    """RecordBatchBuilder that, as kafka-python's, checks codec availability through kafka.codec at build."""

    def build(self) -> bytearray:
        _codec.assert_has_codec(self.compression_type)
        return super().build()
