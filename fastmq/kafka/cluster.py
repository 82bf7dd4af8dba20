"""What the client knows of the cluster: brokers, topics, partitions and their leaders (from Metadata)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastmq.client import MetadataVersion
from fastmq.kafka import errors as kerrors
from fastmq.kafka.protocol.schema import ZERO_UUID
from fastmq.kafka.structs import TopicPartition


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int                 # -1 when the partition has no leader now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]
    internal: bool = False
    error_code: int = 0
    topic_id: Any = None

    @property
    def leaders(self) -> list[int]:
        return [p.leader for p in self.partitions]


class ClusterMetadata(MetadataVersion):
    """A snapshot updated from Metadata responses; reads are safe from any thread (objects are immutable
    and replaced whole), waiters are woken on every update (version, updated_at, wait_for_version)."""

    def __init__(self) -> None:
        super().__init__()
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        # Topics the last response reported as errors (unknown, unauthorized, ...): name -> error code.
        self.topic_errors: dict[str, int] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1

    def update(self, response: Any, now: float, *, all_topics: bool) -> None:
        """Apply a MetadataResponse. With all_topics the response lists every topic, so topics missing
        from it are gone; otherwise only the topics it names are replaced."""
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        topics = {} if all_topics else dict(self.topics)
        errors: dict[str, int] = {}
        for topic in response.topics:
            name = topic.name
            if name is None:
                continue
            if topic.error_code and topic.error_code != kerrors.LeaderNotAvailableError.errno:
                errors[name] = topic.error_code
                topics.pop(name, None)
                continue
            partitions = sorted(
                (PartitionInfo(name, p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                               tuple(p.isr_nodes), tuple(p.offline_replicas), p.error_code)
                 for p in topic.partitions),
                key=lambda p: p.partition)
            if not partitions:
                errors[name] = topic.error_code or kerrors.LeaderNotAvailableError.errno
                topics.pop(name, None)
                continue
            topic_id = getattr(topic, "topic_id", None)
            topics[name] = TopicInfo(name, self._newest(name, topic_id, partitions), topic.is_internal,
                                     topic.error_code, topic_id)

        def apply() -> None:
            self.brokers = brokers
            self.topics = topics
            self.topic_errors = errors
            self.cluster_id = response.cluster_id
            self.controller_id = response.controller_id

        self.publish(now, apply)

    def _newest(self, name: str, topic_id: Any, partitions: list[PartitionInfo]) -> tuple[PartitionInfo, ...]:
        # A broker whose metadata lags answers with a leader older than the one known here (KIP-320): such a
        # partition keeps what is known until a response names its current leader epoch or a newer one. A topic
        # made again under the same name (another topic id) starts its epochs over, and is taken whole.
        known = self.topics.get(name)
        if known is None or (topic_id != known.topic_id and not _unset(topic_id) and not _unset(known.topic_id)):
            return tuple(partitions)
        newest = []
        for partition in partitions:
            if partition.partition < len(known.partitions):
                before = known.partitions[partition.partition]
                if 0 <= partition.leader_epoch < before.leader_epoch:
                    partition = before
            newest.append(partition)
        return tuple(newest)

    def partitions_for(self, topic: str) -> set[int] | None:
        info = self.topics.get(topic)
        return None if info is None else {p.partition for p in info.partitions}

    def leader_for(self, tp: TopicPartition) -> int:
        info = self.topics.get(tp.topic)
        if info is None or tp.partition >= len(info.partitions):
            return -1
        return info.partitions[tp.partition].leader

    def leader_epoch_for(self, tp: TopicPartition) -> int:
        """The leader epoch the metadata names for a partition (-1: unknown, which a broker does not check)."""
        info = self.topics.get(tp.topic)
        if info is None or tp.partition >= len(info.partitions):
            return -1
        return info.partitions[tp.partition].leader_epoch

    def partition_info(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        if info is None or tp.partition >= len(info.partitions):
            return None
        return info.partitions[tp.partition]


def _unset(topic_id: Any) -> bool:
    # Metadata before v10 names no topic id, and a broker without ids sends the zero UUID.
    return topic_id is None or topic_id == ZERO_UUID
