"""Messages to send, send results, and the client's message ids."""
from __future__ import annotations

import enum
import os
import random
import socket
import time
from collections.abc import Sequence

from fastmq.rocketmq._native.messages import MessageExt, SendResult, UniqueIdGenerator

__all__ = ["Message", "MessageExt", "SendResult", "SendStatus", "UniqueIdGenerator", "message_ids"]


class Message:
    """A message to send: topic and body, with optional tags, keys (one or several), user properties, the
    producer's int flag and a delay level (1..18: 1s 5s 10s 30s 1m 2m ... 2h on a default broker)."""

    __slots__ = ("topic", "body", "tags", "keys", "properties", "flag", "delay_level", "wait_store")

    def __init__(self, topic: str, body: bytes | bytearray | memoryview | str, *, tags: str | None = None,
                 keys: str | Sequence[str] | None = None, properties: dict[str, str] | None = None, flag: int = 0,
                 delay_level: int = 0, wait_store: bool = True) -> None:
        if not topic:
            raise ValueError("a message needs a topic")
        self.topic = topic
        self.body = body.encode() if isinstance(body, str) else body
        self.tags = tags
        self.keys = keys
        self.properties = properties
        self.flag = flag
        self.delay_level = delay_level
        self.wait_store = wait_store

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, body={len(self.body)} bytes)"


class SendStatus(enum.Enum):
    """How a broker stored a sent message (response codes 0, 10, 12, 11)."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    FLUSH_SLAVE_TIMEOUT = 12
    SLAVE_NOT_AVAILABLE = 11


def message_ids() -> UniqueIdGenerator:
    """A generator of this process's UNIQ_KEY values: the prefix is the host's address, the pid and a random
    part, the clock part counts from the start of the month (fastmq/rocketmq/_native/messages.pyx lays them out)."""
    try:
        address = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        address = b"\x7f\x00\x00\x01"
    prefix = (address + (os.getpid() & 0xFFFF).to_bytes(2, "big") + random.getrandbits(32).to_bytes(4, "big")).hex()
    start = time.localtime()
    month_start_ms = int(time.mktime((start.tm_year, start.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)
    return UniqueIdGenerator(prefix.upper(), month_start_ms, random.getrandbits(16))
