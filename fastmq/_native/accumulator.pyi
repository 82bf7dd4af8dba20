"""Type stubs of fastmq._native.accumulator, the protocol-free batching core of producers."""
from typing import Any, Callable

from fastmq._native.producer_batch import FutureRecordMetadata as FutureRecordMetadata
from fastmq._native.producer_batch import ProducerBatch as ProducerBatch

class RecordAccumulator:
    batch_size: int
    linger: float
    buffer_memory: int
    used_memory: int
    idempotent: bool
    records_appended: int
    bytes_appended: int
    def __init__(self, batch_format: Any, *, batch_size: int = 16384, linger_ms: float = 0,
                 buffer_memory: int = 33554432, max_block_ms: float = 60000, delivery_timeout_ms: float = 120000,
                 retry_backoff_ms: float = 100, idempotent: bool = True, max_in_flight: int = 5,
                 wakeup: Callable[[], None] | None = None) -> None: ...
    def topic(self, name: str) -> Any: ...
    def update_topic(self, name: str, leaders: list[int], avoided_nodes: Any = ()) -> None: ...
    def send(self, topic: Any, partition: int | None, key: Any, value: Any, headers: Any,
             timestamp_ms: int | None) -> FutureRecordMetadata | None: ...
    def set_producer_id(self, producer_id: int, producer_epoch: int, transactional: bool = False) -> None: ...
    def send_bulk(self, topic: Any, partition: int | None, values: Any, keys: Any,
                  timestamp_ms: int | None) -> list[ProducerBatch] | None: ...
