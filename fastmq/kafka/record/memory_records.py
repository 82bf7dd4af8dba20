"""kafka-python's kafka.record.memory_records on fastmq's compiled layer."""
from fastmq.kafka._native.memory_records import MemoryRecords, MemoryRecordsBuilder

__all__ = ["MemoryRecords", "MemoryRecordsBuilder"]
