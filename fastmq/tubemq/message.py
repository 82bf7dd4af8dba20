"""TubeMQ messages: the payload a producer sends and a consumer receives, and its checksum.

    data      = body                                    flag bit 0x1 clear
              | [attrLen i32 BE][attribute utf8][body]  flag bit 0x1 set
    attribute = "k=v" pairs joined by ","; the reserved keys $msgType$ (server-side filters) and $msgTime$
                (yyyyMMddHHmm)
    checkSum  = zlib CRC32(data) & 0x7FFFFFFF (a producer may send -1: not checked)
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastmq.errors import CorruptDataError

if TYPE_CHECKING:
    from typing_extensions import Buffer

FLAG_HAS_ATTRIBUTE = 0x1
MSG_TYPE_KEY = "$msgType$"
MSG_TIME_KEY = "$msgTime$"
NO_CHECKSUM = -1
_ATTR_LEN = struct.Struct(">i")


def checksum(data: Buffer) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF


def java_string_hash(text: str) -> int:
    """Java's String.hashCode as a signed int32 (the broker's key for message-type filters)."""
    value = 0
    for unit in struct.unpack(f"<{len(text.encode('utf-16-le')) // 2}H", text.encode("utf-16-le")):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def format_attributes(attributes: dict[str, str]) -> str:
    for key, value in attributes.items():
        for text in (key, value):
            if "," in text or "=" in text:
                raise ValueError(f"message attribute {key}={value}: keys and values may not hold ',' or '='")
    return ",".join(f"{key}={value}" for key, value in attributes.items())


def parse_attributes(text: str) -> dict[str, str]:
    attributes = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if eq and key:
            attributes[key] = value
    return attributes


@dataclass
class Message:
    """One TubeMQ message. attributes hold the user's "k=v" pairs; msg_type and msg_time are the reserved
    $msgType$ and $msgTime$ (yyyyMMddHHmm)."""

    topic: str
    body: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    msg_type: str | None = None
    msg_time: str | None = None
    # Set on received messages:
    partition: int = -1
    message_id: int = -1

    def attribute_text(self) -> str:
        reserved = {}
        if self.msg_type:
            reserved[MSG_TYPE_KEY] = self.msg_type
        if self.msg_time:
            reserved[MSG_TIME_KEY] = self.msg_time
        return format_attributes({**reserved, **self.attributes})

    def encode(self) -> tuple[bytes, int]:
        """(data, flag) as SendMessageRequestP2B carries them."""
        if not (self.attributes or self.msg_type or self.msg_time):
            return bytes(self.body), 0
        attribute = self.attribute_text()
        encoded = attribute.encode("utf-8")
        return b"".join((_ATTR_LEN.pack(len(encoded)), encoded, self.body)), FLAG_HAS_ATTRIBUTE


def decode_payload(topic: str, data: bytes, flag: int) -> Message:
    """The Message of a received payload. CorruptDataError when its attribute length runs past the end."""
    if not flag & FLAG_HAS_ATTRIBUTE:
        return Message(topic, data)
    if len(data) < 4:
        raise CorruptDataError(f"TubeMQ message of {len(data)} bytes flagged with an attribute has no length")
    (length,) = _ATTR_LEN.unpack_from(data)
    if not 0 <= length <= len(data) - 4:
        raise CorruptDataError(f"TubeMQ message attribute of {length} bytes in a payload of {len(data)}")
    try:
        attributes = parse_attributes(data[4:4 + length].decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"TubeMQ message attribute is not UTF-8: {exc}") from None
    msg_type = attributes.pop(MSG_TYPE_KEY, None)
    msg_time = attributes.pop(MSG_TIME_KEY, None)
    return Message(topic, data[4 + length:], attributes, msg_type, msg_time)


def pack_ipv4(address: str) -> int:
    """sentAddr: the IPv4 octets as a big-endian signed int32 (10.0.0.1 -> 167772161); 0 when not IPv4."""
    parts = address.split(".")
    if len(parts) != 4 or not all(part.isdigit() and int(part) < 256 for part in parts):
        return 0
    value: int = struct.unpack(">i", bytes(int(part) for part in parts))[0]
    return value
