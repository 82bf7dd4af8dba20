"""kafka-python's kafka.record.legacy_records (message sets v0/v1) on fastmq's compiled layer.

The wire format is documented in fastmq/kafka/_native/legacy_records.pyx.
"""
from __future__ import annotations

from fastmq.kafka._native import legacy_records as _compiled
from fastmq.kafka._native.legacy_records import LegacyRecord, LegacyRecordBase, LegacyRecordBatch, LegacyRecordMetadata
from fastmq.kafka import codec as _codec

__all__ = ["LegacyRecord", "LegacyRecordBase", "LegacyRecordBatch", "LegacyRecordBatchBuilder",
           "LegacyRecordMetadata"]


class LegacyRecordBatchBuilder(_compiled.LegacyRecordBatchBuilder):
    """The compiled builder that, as kafka-python's, checks codec availability through kafka.codec at build."""

    def build(self):
        _codec.assert_has_codec(self.compression_type)
        return super().build()
