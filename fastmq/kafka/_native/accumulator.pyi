"""Type stubs of fastmq.kafka._native.accumulator: the accumulator core with Kafka's batches."""
from typing import Any

from fastmq._native import accumulator as _core
from fastmq._native.producer_batch import FutureRecordMetadata as FutureRecordMetadata
from fastmq._native.producer_batch import ProducerBatch as ProducerBatch

class KafkaBatchFormat:
    codec: int
    compression_level: int
    state_error: type[BaseException]
    timeout_error: type[BaseException]
    def __init__(self, codec: int = 0, compression_level: int = -1) -> None: ...

class RecordAccumulator(_core.RecordAccumulator):
    def __init__(self, *, compression_type: int = 0, compression_level: int = -1, **options: Any) -> None: ...
