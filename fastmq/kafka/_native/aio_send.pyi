"""Type stubs of fastmq.kafka._native.aio_send (see aio_send.pyx: AIOKafkaProducer.send()'s common case)."""
import asyncio
from typing import Any, Callable

from fastmq.kafka._native.aio_futures import RecordFutures
from fastmq.kafka.structs import RecordMetadata

class SendPath:
    def __init__(self, producer: Any, futures: RecordFutures, key_serializer: Callable[[Any], Any] | None,
                 value_serializer: Callable[[Any], Any] | None, max_batch_size: int,
                 transactional: bool) -> None: ...
    def __call__(self, topic: str, value: Any, key: Any, partition: int | None, timestamp_ms: int | None,
                 headers: Any) -> asyncio.Future[RecordMetadata] | tuple[Any, Any]: ...
