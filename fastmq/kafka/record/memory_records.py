"""kafka-python's kafka.record.memory_records on fastmq's compiled layer."""
from fastmq.kafka._native.memory_records import MemoryRecords, MemoryRecordsBuilder
# The names kafka-python's module imports, which code reaches through it.
from fastmq.kafka.errors import CorruptRecordError, IllegalStateError, UnsupportedVersionError  # noqa: F401
from fastmq.kafka.record.abc import ABCRecords  # noqa: F401
from fastmq.kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: F401
from fastmq.kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder  # noqa: F401

__all__ = ["MemoryRecords", "MemoryRecordsBuilder"]
