"""Type stubs of fastmq._native.store_codec (see store_codec.pyx for the CommitLog record format)."""
from array import array
from typing import Any

from typing_extensions import Buffer

MESSAGE_MAGIC: int
MESSAGE_MAGIC_V2: int
BLANK_MAGIC: int
END_FILE_MIN_BLANK: int
STATUS_OK: int
STATUS_BLANK: int
STATUS_END: int
STATUS_INCOMPLETE: int
STATUS_CORRUPT: int
SYSFLAG_TRANSACTION_TYPE_MASK: int
SYSFLAG_PREPARED: int
SYSFLAG_ROLLBACK: int

def java_hash(s: str) -> int: ...
def tags_hash_code(tags: str) -> int: ...

class DispatchRequest:
    status: int
    topic: str
    queue_id: int
    commitlog_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    error: str | None
    def __init__(self, topic: str, queue_id: int, commitlog_offset: int, msg_size: int, tags_code: int,
                 store_timestamp: int, consume_queue_offset: int, keys: str | None = ..., uniq_key: str | None = ...,
                 sys_flag: int = ..., prepared_transaction_offset: int = ...) -> None: ...
    @property
    def ok(self) -> bool: ...

def check_message(buf: Buffer, pos: int, readable_end: int = ..., expected_offset: int = ...,
                  check_crc: bool = ...) -> DispatchRequest: ...
def decode_properties(data: Buffer) -> dict[str, str]: ...
def encode_properties(properties: dict[str, str]) -> bytes: ...
def decode_message(buf: Buffer, pos: int = ..., size: int = ..., check_crc: bool = ...) -> tuple[Any, ...]: ...
def message_length(body_length: int, topic_length: int, properties_length: int, born_host_length: int = ...,
                   store_host_length: int = ...) -> int: ...
def encode_message(buf: Buffer, pos: int, topic: str, queue_id: int, flag: int, queue_offset: int,
                   physical_offset: int, sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
                   store_host: bytes, reconsume_times: int, prepared_transaction_offset: int, body: Buffer,
                   properties: bytes, end_of_file_blank: bool = ...) -> int: ...
def pick_store_timestamp(buf: Buffer, pos: int) -> int: ...

class MessageBatch:
    topic: str
    queue_id: int
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int
    index_items: list[tuple[int, str | None, str | None]]
    count: int
    written: int
    total_bytes: int
    first_queue_offset: int
    store_timestamp: int
    def __init__(self, topic: str, queue_id: int, store_host: bytes, max_body_size: int, max_record_size: int,
                 sys_flag: int = ..., reconsume_times: int = ..., prepared_transaction_offset: int = ...) -> None: ...
    def add(self, body: Buffer, properties: bytes = ..., tags_code: int = ..., born_timestamp: int = ...,
            flag: int = ..., keys: str | None = ..., uniq_key: str | None = ...,
            born_host: bytes | None = ...) -> None: ...
    def __len__(self) -> int: ...
    @property
    def done(self) -> bool: ...
    def begin(self, first_queue_offset: int, store_timestamp: int) -> None: ...
    def encode(self, buf: Buffer, pos: int, file_offset: int) -> int: ...
    def put_units(self, buf: Buffer, pos: int, start: int) -> int: ...
    @property
    def commitlog_offsets(self) -> array[int]: ...
    @property
    def sizes(self) -> array[int]: ...
    def commitlog_offset(self, i: int) -> int: ...
    def size(self, i: int) -> int: ...
