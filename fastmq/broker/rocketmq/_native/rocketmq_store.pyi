"""SEND_BATCH_MESSAGE bodies -> store MessageBatch (see rocketmq_store.pyx)."""
from typing_extensions import Buffer

from fastmq._native.store_codec import MessageBatch

def fill_batch(batch: MessageBatch, data: Buffer, born_timestamp: int, born_host: bytes | None = ...) -> int: ...
def fill_message(batch: MessageBatch, body: Buffer, properties: str, born_timestamp: int, flag: int,
                 born_host: bytes | None = ...) -> None: ...
