"""Messages going into the store (Message) and coming out of it (StoredMessage, RocketMQ's MessageExt), the
offset message id, and decoding of records pulled from a RocketMQ broker."""
from __future__ import annotations

import ipaddress
import struct
from typing import TYPE_CHECKING, Iterator, Mapping, NamedTuple, Sequence

from fastmq._native import store_codec

if TYPE_CHECKING:
    from typing_extensions import Buffer

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
KEY_SEPARATOR = " "

_PORT = struct.Struct(">i")


def pack_host(host: tuple[str, int]) -> bytes:
    """(ip, port) as a record's BORNHOST / STOREHOST: the address bytes (4 or 16) then the port as i32."""
    ip, port = host
    return ipaddress.ip_address(ip).packed + _PORT.pack(port)


def unpack_host(packed: bytes) -> tuple[str, int]:
    return str(ipaddress.ip_address(packed[:-4])), _PORT.unpack(packed[-4:])[0]


def create_message_id(store_host: bytes, commitlog_offset: int) -> str:
    """RocketMQ's offset message id: hex of the store address, port and CommitLog offset (32 characters for IPv4)."""
    return (store_host + commitlog_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """((store ip, port), commitlog offset) of an offset message id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"message id {msg_id!r} is not hexadecimal") from None
    if len(raw) not in (16, 28):
        raise ValueError(f"message id {msg_id!r} is neither an IPv4 (32 hex) nor an IPv6 (56 hex) offset id")
    return unpack_host(raw[:-8]), int.from_bytes(raw[-8:], "big", signed=True)


def join_keys(keys: str | Sequence[str] | None) -> str | None:
    if keys is None or isinstance(keys, str):
        return keys or None
    return KEY_SEPARATOR.join(keys) or None


def build_properties(tags: str | None, keys: str | None, properties: Mapping[str, str] | None) -> bytes:
    """The PROPERTIES of a record: the user's properties plus TAGS and KEYS."""
    if not properties and tags is None and keys is None:
        return b""
    merged = dict(properties) if properties else {}
    if keys:
        merged[PROPERTY_KEYS] = keys
    if tags:
        merged[PROPERTY_TAGS] = tags
    return store_codec.encode_properties(merged)


class Message(NamedTuple):
    """One message of a put_messages batch (topic and queue are the batch's)."""

    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    properties: Mapping[str, str] | None = None
    born_timestamp: int | None = None
    flag: int = 0


class StoredMessage:
    """A message read back from the CommitLog (RocketMQ's MessageExt)."""

    __slots__ = ("topic", "queue_id", "queue_offset", "commitlog_offset", "body", "properties", "born_timestamp",
                 "store_timestamp", "born_host_bytes", "store_host_bytes", "flag", "sys_flag", "reconsume_times",
                 "prepared_transaction_offset", "body_crc", "store_size", "magic")

    def __init__(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int, body: bytes,
                 properties: dict[str, str], born_timestamp: int, store_timestamp: int, born_host_bytes: bytes,
                 store_host_bytes: bytes, flag: int, sys_flag: int, reconsume_times: int,
                 prepared_transaction_offset: int, body_crc: int, store_size: int, magic: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commitlog_offset = commitlog_offset
        self.body = body
        self.properties = properties
        self.born_timestamp = born_timestamp
        self.store_timestamp = store_timestamp
        self.born_host_bytes = born_host_bytes
        self.store_host_bytes = store_host_bytes
        self.flag = flag
        self.sys_flag = sys_flag
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.body_crc = body_crc
        self.store_size = store_size
        self.magic = magic

    @classmethod
    def decode(cls, data: Buffer, position: int = 0, size: int = -1, check_crc: bool = True) -> StoredMessage:
        """Decode one record (raises CorruptDataError / TruncatedError for anything else)."""
        return cls(*store_codec.decode_message(data, position, size, check_crc))

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        value = self.properties.get(PROPERTY_KEYS)
        return [key for key in value.split(KEY_SEPARATOR) if key] if value else []

    @property
    def unique_key(self) -> str | None:
        """The client-generated message id (UNIQ_KEY), which RocketMQ clients show as the message id."""
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        """The offset message id: store host + CommitLog offset."""
        return create_message_id(self.store_host_bytes, self.commitlog_offset)

    @property
    def born_host(self) -> tuple[str, int]:
        return unpack_host(self.born_host_bytes)

    @property
    def store_host(self) -> tuple[str, int]:
        return unpack_host(self.store_host_bytes)

    def __repr__(self) -> str:
        return (f"StoredMessage(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"commitlog_offset={self.commitlog_offset}, body={self.body[:32]!r}, tags={self.tags!r})")


def iter_messages(data: Buffer, check_crc: bool = True) -> Iterator[StoredMessage]:
    """Decode records laid back to back (a RocketMQ pull response body, or gathered CommitLog records).
    Every byte must belong to a whole message: trailing bytes raise CorruptDataError / TruncatedError."""
    view = memoryview(data)
    position = 0
    while position < len(view):
        message = StoredMessage.decode(view, position, -1, check_crc)
        position += message.store_size
        yield message


def decode_messages(data: Buffer, check_crc: bool = True) -> list[StoredMessage]:
    return list(iter_messages(data, check_crc))
