"""Type stubs of fastmq.kafka._native.aio_batch (see aio_batch.pyx: aiokafka's BatchBuilder)."""
from collections.abc import Callable, Sequence
from typing import Any

from fastmq.kafka.structs import RecordMetadata

Headers = Sequence[tuple[str, bytes | None]] | None

class BatchRecordMetadata:
    offset: int
    size: int
    timestamp: int | None
    crc: None

class BatchBuilder:
    headers: list[Headers] | None
    timestamps: list[int | None] | None
    def __init__(self, max_size: int, key_serializer: Callable[[Any], bytes] | None = None,
                 value_serializer: Callable[[Any], bytes] | None = None) -> None: ...
    def append(self, *, timestamp: int | None, key: Any, value: Any,
               headers: Headers = None) -> BatchRecordMetadata | None: ...
    def close(self) -> None: ...
    def size(self) -> int: ...
    def record_count(self) -> int: ...
    def rows(self) -> list[tuple[Any, Any, Headers, int | None]]: ...
    def take(self) -> tuple[list[bytes | None], list[bytes | None] | None]: ...
    def first_metadata(self, batches: list[Any], places: bytearray, timestamp_ms: int) -> RecordMetadata: ...
