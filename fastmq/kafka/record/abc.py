"""kafka-python's record ABCs, with fastmq's compiled classes registered as their implementations."""
from __future__ import annotations

from abc import ABC, abstractmethod, abstractproperty  # noqa: F401  (kafka-python's module has it)

from typing import TYPE_CHECKING, Iterator

from fastmq.kafka._native import legacy_records, memory_records, records

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from fastmq.kafka._native.records import Headers


class ABCRecord(ABC):
    __slots__ = ()

    @property
    @abstractmethod
    def size_in_bytes(self) -> int: ...

    @property
    @abstractmethod
    def offset(self) -> int: ...

    @property
    @abstractmethod
    def timestamp(self) -> int: ...

    @property
    @abstractmethod
    def timestamp_type(self) -> int: ...

    @property
    @abstractmethod
    def key(self) -> bytes | None: ...

    @property
    @abstractmethod
    def value(self) -> bytes | None: ...

    @property
    @abstractmethod
    def checksum(self) -> int | None: ...

    @abstractmethod
    def validate_crc(self) -> bool: ...

    @property
    @abstractmethod
    def headers(self) -> Headers: ...


class ABCRecordBatchBuilder(ABC):
    __slots__ = ()

    @abstractmethod
    def append(self, offset: int, timestamp: int | None, key: Buffer | None, value: Buffer | None,
               headers: Headers | None = None) -> object: ...

    @abstractmethod
    def size_in_bytes(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                      headers: Headers) -> int: ...

    @abstractmethod
    def build(self) -> bytearray: ...


class ABCRecordBatch(ABC):
    __slots__ = ()

    @abstractmethod
    def __iter__(self) -> Iterator[ABCRecord]: ...

    @property
    @abstractmethod
    def base_offset(self) -> int: ...

    @property
    @abstractmethod
    def size_in_bytes(self) -> int: ...

    @property
    @abstractmethod
    def magic(self) -> int: ...


class ABCRecords(ABC):
    __slots__ = ()

    @abstractmethod
    def __init__(self, buffer: Buffer) -> None: ...

    @abstractmethod
    def size_in_bytes(self) -> int: ...

    @abstractmethod
    def next_batch(self) -> ABCRecordBatch | None: ...

    @abstractmethod
    def has_next(self) -> bool: ...


for _record in (records.Record, legacy_records.LegacyRecord):
    ABCRecord.register(_record)
for _builder in (records.RecordBatchBuilder, legacy_records.LegacyRecordBatchBuilder):
    ABCRecordBatchBuilder.register(_builder)
for _batch in (records.RecordBatch, legacy_records.LegacyRecordBatch):
    ABCRecordBatch.register(_batch)
ABCRecords.register(memory_records.MemoryRecords)
