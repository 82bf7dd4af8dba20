"""Kafka's ConsumerProtocol: what consumer-group members put in JoinGroup and SyncGroup.

JoinGroup carries, per assignor, the member's subscription as opaque bytes; SyncGroup carries each member's
assignment back. Both are version-prefixed messages in the classic (non-flexible) encoding: int16 lengths for
strings, int32 for arrays and bytes, -1 for null.

    Subscription => version int16 (0-3)
      topics            []string
      user_data         bytes, nullable               (assignor-specific, e.g. sticky's previous assignment)
      owned_partitions  [](topic string, partitions []int32)    version 1+  (cooperative rebalancing)
      generation_id     int32 = -1                    version 2+
      rack_id           string, nullable              version 3+
    Assignment => version int16 (0-3)
      assigned_partitions  [](topic string, partitions []int32)
      user_data            bytes, nullable

StickyAssignorUserData (the sticky assignor's user_data, no version prefix; version 0 lacks the generation):
      previous_assignment  [](topic string, partitions []int32)
      generation           int32                      version 1
CooperativeStickyAssignor's user_data is the generation alone, an int32.

The messages are defined in the notation of fastmq.kafka.protocol and run through the same compiled codecs as
every request. Messages of a newer version than fastmq knows are read as its highest one when their extra
fields are absent or empty; otherwise CorruptDataError says so.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterable

from fastmq.kafka._native import kafka_protocol as _native
from fastmq.errors import CorruptDataError, ProtocolError
from fastmq.kafka.protocol.compiler import compile_struct
from fastmq.kafka.protocol.schema import parse_struct
from fastmq.kafka.protocol.structs import make_struct_class
from fastmq.kafka.structs import TopicPartition

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
_VERSION = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _message(name: str, text: str, max_version: int) -> tuple[Any, list[_native.StructCodec]]:
    # The class is made here from the schema text, so its fields and nested classes are unknown to a type
    # checker (the Kafka messages have a generated stub instead; these three small ones are used only here).
    schema = parse_struct(name, text)
    nested = list(schema.walk())
    for struct_schema in reversed(nested):
        qualname = name if struct_schema is schema else f"{name}.{struct_schema.name}"
        make_struct_class(struct_schema, qualname, __name__)
    for struct_schema in nested[1:]:
        setattr(schema.cls, struct_schema.name, struct_schema.cls)
    codecs = [compile_struct(schema, version, flexible=False) for version in range(max_version + 1)]
    return schema.generated_class(), codecs


_Subscription, _SUBSCRIPTION_CODECS = _message("ConsumerProtocolSubscription", """
topics: []string 0+
user_data: bytes 0+ nullable=0+ =null
owned_partitions: []TopicPartition 1+
  topic: string 1+
  partitions: []int32 1+
generation_id: int32 2+ =-1
rack_id: string 3+ nullable=3+ =null
""", SUBSCRIPTION_VERSION)

_Assignment, _ASSIGNMENT_CODECS = _message("ConsumerProtocolAssignment", """
assigned_partitions: []TopicPartition 0+
  topic: string 0+
  partitions: []int32 0+
user_data: bytes 0+ nullable=0+ =null
""", ASSIGNMENT_VERSION)

_StickyUserData, _STICKY_CODECS = _message("StickyAssignorUserData", """
previous_assignment: []TopicPartition 0+
  topic: string 0+
  partitions: []int32 0+
generation: int32 1+ =-1
""", 1)


def _grouped(partitions: Iterable[TopicPartition], item_class: type) -> list[Any]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [item_class(topic=topic, partitions=sorted(parts)) for topic, parts in sorted(by_topic.items())]


def _flattened(items: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(item.topic, partition) for item in items for partition in item.partitions]


@dataclass
class Subscription:
    """One member's subscription, as the group leader's assignor sees it."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None        # from JoinGroup, not from the encoded bytes

    def encode(self, version: int = SUBSCRIPTION_VERSION) -> bytes:
        message = _Subscription(
            topics=sorted(self.topics), user_data=self.user_data,
            owned_partitions=_grouped(self.owned_partitions, _Subscription.TopicPartition),
            generation_id=self.generation_id, rack_id=self.rack_id)
        return _VERSION.pack(version) + bytes(_native.encode_message(_SUBSCRIPTION_CODECS[version], message))

    @classmethod
    def decode(cls, data: bytes, group_instance_id: str | None = None) -> "Subscription":
        version, message = _decode_prefixed(data, _SUBSCRIPTION_CODECS, "subscription")
        return cls(list(message.topics), _as_bytes(message.user_data), _flattened(message.owned_partitions),
                   message.generation_id, message.rack_id, group_instance_id)


@dataclass
class Assignment:
    """The partitions the leader gave one member (plus assignor-specific user data)."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None

    def encode(self, version: int = ASSIGNMENT_VERSION) -> bytes:
        message = _Assignment(assigned_partitions=_grouped(self.partitions, _Assignment.TopicPartition),
                              user_data=self.user_data)
        return _VERSION.pack(version) + bytes(_native.encode_message(_ASSIGNMENT_CODECS[version], message))

    @classmethod
    def decode(cls, data: bytes) -> "Assignment":
        if not data:
            # A member the leader left out (e.g. its subscription matched nothing) gets empty bytes.
            return cls([])
        _, message = _decode_prefixed(data, _ASSIGNMENT_CODECS, "assignment")
        return cls(_flattened(message.assigned_partitions), _as_bytes(message.user_data))


def decode_subscription_message(data: Any) -> tuple[int, Any]:
    """An encoded subscription as its protocol struct, with the version whose fields it holds (what admin
    tools show of a group member; Subscription.decode is the assignor's view)."""
    version, message = _decode_prefixed(data, _SUBSCRIPTION_CODECS, "subscription")
    return min(version, SUBSCRIPTION_VERSION), message


def decode_assignment_message(data: Any) -> tuple[int, Any]:
    """An encoded assignment as its protocol struct, with the version whose fields it holds."""
    version, message = _decode_prefixed(data, _ASSIGNMENT_CODECS, "assignment")
    return min(version, ASSIGNMENT_VERSION), message


def encode_sticky_user_data(previous: Iterable[TopicPartition], generation: int) -> bytes:
    message = _StickyUserData(previous_assignment=_grouped(previous, _StickyUserData.TopicPartition),
                              generation=generation)
    return bytes(_native.encode_message(_STICKY_CODECS[1], message))


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """(previous assignment, generation); the generation is -1 for version 0 data."""
    try:
        message = _native.decode_message(_STICKY_CODECS[1], data)
    except ProtocolError:
        message = _native.decode_message(_STICKY_CODECS[0], data)
    return _flattened(message.previous_assignment), message.generation


def encode_generation(generation: int) -> bytes:
    return _INT32.pack(generation)


def decode_generation(data: bytes | None) -> int:
    if data is None or len(data) < _INT32.size:
        return -1
    generation: int = _INT32.unpack_from(data)[0]
    return generation


def _as_bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _decode_prefixed(data: Any, codecs: list[Any], what: str) -> tuple[int, Any]:
    view = memoryview(data)
    if len(view) < _VERSION.size:
        raise CorruptDataError(f"consumer protocol {what} of {len(view)} bytes has no version")
    (version,) = _VERSION.unpack_from(view)
    if version < 0:
        raise CorruptDataError(f"consumer protocol {what} has a negative version {version}")
    try:
        return version, _native.decode_message(codecs[min(version, len(codecs) - 1)], view[_VERSION.size:])
    except CorruptDataError as exc:
        if version < len(codecs):
            raise
        raise CorruptDataError(f"consumer protocol {what} version {version} is newer than fastmq knows "
                               f"({len(codecs) - 1}) and carries fields it cannot read: {exc}") from exc
