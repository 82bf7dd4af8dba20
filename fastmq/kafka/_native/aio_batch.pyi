"""Type stubs of fastmq.kafka._native.aio_batch (see aio_batch.pyx: aiokafka's BatchBuilder)."""
from collections.abc import Callable, Sequence
from typing import Any

from fastmq._native.producer_batch import ProducerBatch
from fastmq.kafka.structs import RecordMetadata

Headers = Sequence[tuple[str, bytes | None]] | None

class BatchRecordMetadata:
    offset: int
    size: int
    timestamp: int
    crc: None

class BatchBuilder:
    def __init__(self, builder: Any, key_serializer: Callable[[Any], bytes] | None = None,
                 value_serializer: Callable[[Any], bytes] | None = None) -> None: ...
    def append(self, *, timestamp: int | None, key: Any, value: Any,
               headers: Headers = None) -> BatchRecordMetadata | None: ...
    def close(self) -> None: ...
    def size(self) -> int: ...
    def record_count(self) -> int: ...
    def take(self) -> tuple[Any, int, int, int]: ...
    def first_metadata(self, sent: ProducerBatch) -> RecordMetadata: ...
