"""Type stubs of fastmq.kafka._native.fetch (see fetch.pyx for what the decoder does)."""
from collections.abc import Callable, Iterable
from typing import Any

from typing_extensions import Buffer

class RecordDecoder:
    def __init__(self, record_class: type, *, check_crcs: bool = True, read_committed: bool = False,
                 key_deserializer: Callable[..., Any] | None = None,
                 value_deserializer: Callable[..., Any] | None = None, with_context: bool = False,
                 deserialize_null: bool = False, tuple_headers: bool = False,
                 max_decompressed_size: int = ...) -> None: ...
    def decode(self, records: Buffer | None, topic: str, partition: int, fetch_offset: int,
               aborted_transactions: Iterable[Any] | None = None) -> tuple[list[Any], int, BaseException | None]: ...
    def decode_many(self, parts: list[tuple[Buffer | None, str, int, int, Iterable[Any] | None]], start: int,
                    max_records: int) -> tuple[list[tuple[list[Any], int, BaseException | None]], int]: ...

class ReadOnlyEmptyList(list[Any]): ...

NO_HEADERS: ReadOnlyEmptyList
