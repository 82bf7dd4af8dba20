"""The numbers TubeMQ's client and servers agree on beyond method ids: balancing events, the consumer's register
and unregister at a broker, and where a registration starts reading."""
from __future__ import annotations

import enum


class EventType(enum.IntEnum):
    """EventProto.opType: what the master tells a consumer in a heartbeat response."""

    CONNECT = 1
    DISCONNECT = 2
    REPORT = 3               # list what you hold in the next heartbeat
    REFRESH = 4
    STOPREBALANCE = 5
    ONLY_CONNECT = 10
    ONLY_DISCONNECT = 20


CONNECT_EVENTS = (EventType.CONNECT, EventType.ONLY_CONNECT)
DISCONNECT_EVENTS = (EventType.DISCONNECT, EventType.ONLY_DISCONNECT)


class EventStatus(enum.IntEnum):
    """EventProto.status: TODO (made), PROCESSING (sent to the consumer), DONE or FAILED (reported back)."""

    TODO = 0
    PROCESSING = 1
    DONE = 2
    UNKNOWN = -1
    FAILED = -2


# RegisterRequestC2B.opType
OP_REGISTER = 31
OP_UNREGISTER = 32

# RegisterRequestC2B.readStatus: where a registration starts. NORMAL: the group's committed offset, else the
# first; FROM_MAX: the committed offset, else the latest; FROM_MAX_ALWAYS: the latest.
READ_NORMAL = 0
READ_FROM_MAX = 1
READ_FROM_MAX_ALWAYS = 2

# A TubeMQ offset counts bytes of a topic store's index file, one 28-byte entry per message (currOffset, maxOffset,
# appendOffset and bound consumption's offsets). A store's partitions share the index, so the offsets of one
# partition's messages are 28 apart only while the store's other partitions receive nothing.
INDEX_ENTRY_BYTES = 28
