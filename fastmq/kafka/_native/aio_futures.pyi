"""Type stubs of fastmq.kafka._native.aio_futures (see aio_futures.pyx: the asyncio futures of sent records)."""
import asyncio
from typing import Any

from fastmq.kafka.structs import RecordMetadata

class RecordFutures:
    SWEEP_EVERY: int
    handoff: Any                    # the loop's LoopHandoff (fastmq.kafka.aio.handoff)
    progress: asyncio.Event
    sends_swept: int
    def __init__(self, handoff: Any) -> None: ...
    def track(self, record: Any) -> asyncio.Future[RecordMetadata]: ...
