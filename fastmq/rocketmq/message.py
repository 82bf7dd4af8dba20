"""Messages to send, send results, and the client's message ids."""
from __future__ import annotations

import enum
import os
import random
import socket
import time

from fastmq.rocketmq._native.messages import Message, MessageExt, SendResult, UniqueIdGenerator

__all__ = ["Message", "MessageExt", "SendResult", "SendStatus", "UniqueIdGenerator", "message_ids"]


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
