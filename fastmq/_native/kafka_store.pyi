"""Kafka record batches <-> store CommitLog messages (see kafka_store.pyx for the mapping)."""
from array import array

from typing_extensions import Buffer

from fastmq._native.store_codec import MessageBatch

DEFAULT_MAX_DECOMPRESSED_SIZE: int

def fill_batch(batch: MessageBatch, records: Buffer, max_batch_bytes: int, index_keys: bool = ...,
               max_decompressed_size: int = ...) -> list[tuple[int, int, int, int, int, int]]: ...
def build_batch(records: Buffer, count: int, max_bytes: int, take_first: bool = ...) -> tuple[bytes, int, int]: ...
def record_timestamps(records: Buffer, count: int) -> tuple[array, array]: ...
def producer_markers(records: Buffer, count: int) -> list[tuple[int, int, int, int, int]]: ...
