"""kafka-python's kafka.record.legacy_records (message sets v0/v1) on fastmq's compiled layer.

The wire format is documented in fastmq/kafka/_native/legacy_records.pyx.
"""
from __future__ import annotations

from fastmq.kafka._native import legacy_records as _compiled
from fastmq.kafka._native.legacy_records import LegacyRecord, LegacyRecordBase, LegacyRecordBatch, LegacyRecordMetadata
from fastmq.kafka import codec as _codec
# The names kafka-python's module imports, which code reaches through it.
from fastmq.kafka.codec import (  # noqa: F401
    gzip_decode, gzip_encode, lz4_decode, lz4_decode_old_kafka, lz4_encode, lz4_encode_old_kafka, snappy_decode,
    snappy_encode,
)
from fastmq.kafka.errors import CorruptRecordError, UnsupportedCodecError  # noqa: F401
from fastmq.kafka.record.abc import ABCRecord, ABCRecordBatch, ABCRecordBatchBuilder  # noqa: F401
from fastmq.kafka.record.util import calc_crc32  # noqa: F401

__all__ = ["LegacyRecord", "LegacyRecordBase", "LegacyRecordBatch", "LegacyRecordBatchBuilder",
           "LegacyRecordMetadata"]


class LegacyRecordBatchBuilder(_compiled.LegacyRecordBatchBuilder):
    """The compiled builder that, as kafka-python's, checks codec availability through kafka.codec at build."""

    def build(self) -> bytearray:
        _codec.assert_has_codec(self.compression_type)
        return super().build()
