"""Type stubs of fastmq.kafka._native.produce (see produce.pyx: the producer's compiled Produce path)."""
from collections.abc import Callable
from typing import Any

from fastmq._native.buffer import WriteBuffer

class ProduceBatches:
    batches: list[Any]
    records: int
    payload_bytes: int
    def __init__(self, batches: list[Any]) -> None: ...
    def encode(self, out: WriteBuffer, version: int, correlation_id: int, client_id: str | None,
               transactional_id: str | None, acks: int, timeout_ms: int, topics: dict[str, Any]) -> WriteBuffer: ...
    def read_response(self, frame: Any, version: int, topic_names: dict[bytes, str]) -> bool: ...
    def complete(self, complete_batch: Callable[[Any, int, int], Any]) -> list[Any]: ...
