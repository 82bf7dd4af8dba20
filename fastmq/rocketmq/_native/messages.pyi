"""Type stubs of fastmq.rocketmq._native.messages (see messages.pyx for the message layouts)."""
from collections.abc import Sequence
from typing import Any

from typing_extensions import Buffer

from fastmq.rocketmq.message import SendStatus
from fastmq.rocketmq.route import MessageQueue

SYSFLAG_COMPRESSED_ZLIB: int
DEFAULT_COMPRESS_THRESHOLD: int
DEFAULT_MAX_BODY_SIZE: int
PROPERTY_KEYS: str
PROPERTY_TAGS: str
PROPERTY_WAIT_STORE_MSG_OK: str
PROPERTY_DELAY_TIME_LEVEL: str
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: str
PROPERTY_RETRY_TOPIC: str
PROPERTY_REAL_TOPIC: str
PROPERTY_MAX_RECONSUME_TIMES: str
PROPERTY_ORIGIN_MESSAGE_ID: str
PROPERTY_MIN_OFFSET: str
PROPERTY_MAX_OFFSET: str
PROPERTY_CONSUME_START_TIMESTAMP: str
PROPERTY_TRANSACTION_PREPARED: str

class Message:
    topic: str
    body: bytes | bytearray | memoryview
    tags: str | None
    keys: str | Sequence[str] | None
    properties: dict[str, str] | None
    flag: int
    delay_level: int
    wait_store: bool
    def __init__(self, topic: str, body: bytes | bytearray | memoryview | str, *, tags: str | None = None,
                 keys: str | Sequence[str] | None = None, properties: dict[str, str] | None = None, flag: int = 0,
                 delay_level: int = 0, wait_store: bool = True) -> None: ...

class SendResult:
    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None
    def __init__(self, status: SendStatus, msg_id: str, offset_msg_id: str, message_queue: MessageQueue,
                 queue_offset: int, transaction_id: str | None = None) -> None: ...

def decode_send_result(frame: bytes | bytearray | memoryview, msg_id: str, message_queue: MessageQueue,
                       queue_id: int, statuses: dict[int, SendStatus]) -> SendResult | None: ...

class MessageExt:
    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    flag: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    born_host_bytes: bytes
    store_host_bytes: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    store_size: int
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> str | None: ...
    @property
    def msg_id(self) -> str: ...
    @property
    def offset_msg_id(self) -> str: ...
    @property
    def born_host(self) -> str: ...
    @property
    def store_host(self) -> str: ...
    @property
    def real_topic(self) -> str: ...

def decode_messages(data: Buffer, check_crc: bool = ..., max_body_size: int = ...) -> list[MessageExt]: ...
def message_properties(tags: str | None = ..., keys: str | Sequence[str] | None = ...,
                       properties: dict[str, str] | None = ..., delay_level: int = ..., wait_store: bool = ...,
                       uniq_key: str | None = ...) -> bytes: ...
def compress_body(body: Buffer, threshold: int = ..., level: int = ...) -> tuple[Buffer, int]: ...
def decode_batch_body(data: Buffer) -> list[tuple[bytes, dict[str, str], int]]: ...

class UniqueIdGenerator:
    def __init__(self, prefix: str, month_start_ms: int, counter_start: int) -> None: ...
    def next_id(self, now_ms: int) -> str: ...

class SendEncoder:
    ids: UniqueIdGenerator
    def __init__(self, group: str, ids: UniqueIdGenerator, *, default_topic: str = ...,
                 default_topic_queue_nums: int = ..., compress_threshold: int = ...) -> None: ...
    def encode_request(self, opaque: int, messages: list[Any], batch: bool, queue: MessageQueue,
                       oneway: bool = ...) -> tuple[bytes, str]: ...
    def encode_message(self, opaque: int, message: Any, topic: str, queue_id: int, broker_name: str | None,
                       sys_flag: int, born_ms: int, oneway: bool = ...) -> tuple[bytes, str]: ...
    def encode_batch(self, opaque: int, messages: list[Any], topic: str, queue_id: int, broker_name: str | None,
                     born_ms: int, oneway: bool = ...) -> tuple[bytes, list[str]]: ...
