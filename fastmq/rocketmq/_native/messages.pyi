"""Type stubs of fastmq.rocketmq._native.messages (see messages.pyx for the message layouts)."""
from collections.abc import Sequence

from typing_extensions import Buffer

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
def send_header(producer_group: str, topic: str, queue_id: int, sys_flag: int, born_timestamp: int, flag: int,
                properties: bytes | str, broker_name: str | None = ..., reconsume_times: int = ...,
                max_reconsume_times: int = ..., batch: bool = ..., default_topic: str = ...,
                default_topic_queue_nums: int = ...) -> dict[str, str]: ...
def encode_batch_body(items: list[tuple[Buffer, bytes, int]]) -> bytes: ...
def decode_batch_body(data: Buffer) -> list[tuple[bytes, dict[str, str], int]]: ...
