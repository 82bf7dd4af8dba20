"""The strings TubeMQ's master encodes its metadata in.

    brokerInfo    "brokerId:host:port"              (a blank port: 8123)
    topicInfo     "topic#brokerId:partNum:storeNum,...#maxMsgSizeInB"
    subscribeInfo "consumerId@group#brokerId:host:port#topic:partitionId"
    requiredPartition "brokerId:topic:partitionId=offset,..."   (bound consumption: where each partition starts)
A store holds partNum partitions; partition ids are storeId * 10000 + index.
"""
from __future__ import annotations

from typing import NamedTuple

from fastmq.errors import ProtocolError

DEFAULT_BROKER_PORT = 8123
STORE_ID_BASE = 10_000
MAX_BROKER_PARTITIONS = 10_000   # of one topic on one broker: far above any deployment, it bounds what a
                                 # forged topicInfo makes the client allocate


class BrokerInfo(NamedTuple):
    broker_id: int
    host: str
    port: int

    def encode(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}"


class Partition(NamedTuple):
    broker: BrokerInfo
    topic: str
    partition_id: int

    @property
    def key(self) -> str:
        """brokerId:topic:partitionId, the name a partition goes by in bound consumption and confirmations."""
        return f"{self.broker.broker_id}:{self.topic}:{self.partition_id}"


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProtocolError(f"TubeMQ metadata: {what} {text!r} is not a number") from None


def parse_broker_info(text: str) -> BrokerInfo:
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise ProtocolError(f"TubeMQ brokerInfo {text!r} is not brokerId:host:port")
    port = DEFAULT_BROKER_PORT if not parts[2].strip() else _int(parts[2], "broker port")
    return BrokerInfo(_int(parts[0], "broker id"), parts[1], port)


def parse_topic_info(text: str, brokers: dict[int, BrokerInfo]) -> tuple[str, list[Partition], int | None]:
    """(topic, its partitions on the brokers known, maxMsgSizeInB or None)."""
    segments = text.strip().split("#")
    if len(segments) < 2:
        raise ProtocolError(f"TubeMQ topicInfo {text!r} has no broker list")
    topic = segments[0]
    partitions: list[Partition] = []
    for entry in segments[1].split(","):
        if not entry:
            continue
        fields = entry.split(":")
        if len(fields) != 3:
            raise ProtocolError(f"TubeMQ topicInfo entry {entry!r} is not brokerId:partNum:storeNum")
        broker = brokers.get(_int(fields[0], "broker id"))
        if broker is None:
            continue
        part_num, store_num = _int(fields[1], "partition count"), _int(fields[2], "store count")
        if not (0 <= part_num < STORE_ID_BASE and 0 <= store_num and part_num * store_num <= MAX_BROKER_PARTITIONS):
            raise ProtocolError(f"TubeMQ topicInfo entry {entry!r}: {part_num} partitions in each of {store_num} "
                                f"stores is out of range (at most {MAX_BROKER_PARTITIONS} on one broker)")
        partitions.extend(Partition(broker, topic, store * STORE_ID_BASE + index)
                          for store in range(store_num) for index in range(part_num))
    max_size = _int(segments[2], "max message size") if len(segments) > 2 and segments[2] else None
    return topic, partitions, max_size


def encode_topic_info(topic: str, entries: list[tuple[int, int, int]], max_message_size: int) -> str:
    """entries: (brokerId, partNum, storeNum)."""
    return f"{topic}#{','.join(f'{b}:{p}:{s}' for b, p, s in entries)}#{max_message_size}"


def encode_subscribe_info(consumer_id: str, group: str, partition: Partition) -> str:
    return f"{consumer_id}@{group}#{partition.broker.encode()}#{partition.topic}:{partition.partition_id}"


def parse_subscribe_info(text: str) -> tuple[str, str, Partition]:
    """(consumerId, group, partition)."""
    segments = text.strip().split("#")
    if len(segments) != 3:
        raise ProtocolError(f"TubeMQ subscribeInfo {text!r} is not consumer@group#broker#topic:partition")
    consumer, at, group = segments[0].rpartition("@")
    topic, colon, partition_id = segments[2].rpartition(":")
    if not at or not colon:
        raise ProtocolError(f"TubeMQ subscribeInfo {text!r} is not consumer@group#broker#topic:partition")
    return consumer, group, Partition(parse_broker_info(segments[1]), topic, _int(partition_id, "partition id"))


def encode_required_partitions(offsets: dict[str, int]) -> str:
    return ",".join(f"{key}={offset}" for key, offset in offsets.items())


def parse_required_partitions(text: str) -> dict[tuple[int, str, int], int]:
    """{(brokerId, topic, partitionId): offset} of a requiredPartition string."""
    required = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        key, sep, offset = entry.rpartition("=")
        broker_id, _, rest = key.partition(":")
        topic, _, partition_id = rest.rpartition(":")
        if not sep or not topic:
            raise ProtocolError(f"TubeMQ requiredPartition entry {entry!r} is not brokerId:topic:partitionId=offset")
        required[(_int(broker_id, "broker id"), topic, _int(partition_id, "partition id"))] = \
            _int(offset, "offset")
    return required
