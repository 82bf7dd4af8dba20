"""kafka-python's small value types (kafka.structs and friends), with the same fields and defaults."""
from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic and one of its partitions."""

    topic: str
    partition: int


TopicPartitionReplica = namedtuple("TopicPartitionReplica", ["topic", "partition", "broker_id"])

OffsetAndMetadata = namedtuple("OffsetAndMetadata", ["offset", "metadata", "leader_epoch"],
                               defaults=[None, "", -1])
OffsetAndMetadata.__doc__ = "A committed offset, its metadata string and the leader epoch it was read under."

OffsetAndTimestamp = namedtuple("OffsetAndTimestamp", ["offset", "timestamp", "leader_epoch"])


class MemberState:
    UNJOINED = "<unjoined>"
    REBALANCING = "<rebalancing>"
    STABLE = "<stable>"


ConsumerGroupMetadata = namedtuple("ConsumerGroupMetadata",
                                   ["group_id", "generation_id", "member_id", "group_instance_id", "state"],
                                   defaults=[None, -1, "", None, MemberState.UNJOINED])

RecordMetadata = namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "checksum", "serialized_key_size",
    "serialized_value_size", "serialized_header_size"])
RecordMetadata.__doc__ = """Where an acknowledged record landed. offset is -1 when the broker assigned none
(acks=0); timestamp is the broker's for log-append-time topics."""

ConsumerRecord = namedtuple("ConsumerRecord", [
    "topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
    "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size"])
