"""kafka-python's record ABCs, with fastmq's compiled classes registered as their implementations."""
from __future__ import annotations

from abc import ABC, abstractmethod, abstractproperty  # noqa: F401  (kafka-python's module has it)

from fastmq.kafka._native import legacy_records, memory_records, records


class ABCRecord(ABC):
    __slots__ = ()

    @property
    @abstractmethod
    def size_in_bytes(self): ...

    @property
    @abstractmethod
    def offset(self): ...

    @property
    @abstractmethod
    def timestamp(self): ...

    @property
    @abstractmethod
    def timestamp_type(self): ...

    @property
    @abstractmethod
    def key(self): ...

    @property
    @abstractmethod
    def value(self): ...

    @property
    @abstractmethod
    def checksum(self): ...

    @abstractmethod
    def validate_crc(self): ...

    @property
    @abstractmethod
    def headers(self): ...


class ABCRecordBatchBuilder(ABC):
    __slots__ = ()

    @abstractmethod
    def append(self, offset, timestamp, key, value, headers=None): ...

    @abstractmethod
    def size_in_bytes(self, offset, timestamp, key, value, headers): ...

    @abstractmethod
    def build(self): ...


class ABCRecordBatch(ABC):
    __slots__ = ()

    @abstractmethod
    def __iter__(self): ...

    @property
    @abstractmethod
    def base_offset(self): ...

    @property
    @abstractmethod
    def size_in_bytes(self): ...

    @property
    @abstractmethod
    def magic(self): ...


class ABCRecords(ABC):
    __slots__ = ()

    @abstractmethod
    def __init__(self, buffer): ...

    @abstractmethod
    def size_in_bytes(self): ...

    @abstractmethod
    def next_batch(self): ...

    @abstractmethod
    def has_next(self): ...


for _record in (records.Record, legacy_records.LegacyRecord):
    ABCRecord.register(_record)
for _builder in (records.RecordBatchBuilder, legacy_records.LegacyRecordBatchBuilder):
    ABCRecordBatchBuilder.register(_builder)
for _batch in (records.RecordBatch, legacy_records.LegacyRecordBatch):
    ABCRecordBatch.register(_batch)
ABCRecords.register(memory_records.MemoryRecords)
