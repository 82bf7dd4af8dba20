"""kafka-python's kafka.record package, on fastmq's compiled record layer.

`from fastmq.kafka.record import MemoryRecords` (and the submodules default_records, legacy_records,
memory_records, util, abc) replace kafka-python's imports one for one.
"""
from fastmq.kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

__all__ = ["MemoryRecords", "MemoryRecordsBuilder"]
