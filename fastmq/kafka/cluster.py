"""What the client knows of the cluster: brokers, topics, partitions and their leaders (from Metadata)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fastmq.kafka import errors as kerrors
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


@dataclass
class ClusterMetadata:
    """A snapshot updated from Metadata responses; reads are safe from any thread (objects are immutable
    and replaced whole), waiters are woken on every update."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    # Topics the last response reported as errors (unknown, unauthorized, ...): name -> error code.
    topic_errors: dict[str, int] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    version: int = 0                         # incremented by every update
    updated_at: float = 0.0                  # monotonic time of the last update
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

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
            topics[name] = TopicInfo(name, tuple(partitions), topic.is_internal, topic.error_code,
                                     getattr(topic, "topic_id", None))
        with self._changed:
            self.brokers = brokers
            self.topics = topics
            self.topic_errors = errors
            self.cluster_id = response.cluster_id
            self.controller_id = response.controller_id
            self.version += 1
            self.updated_at = now
            self._changed.notify_all()

    def wait_for_version(self, version: int, timeout: float | None) -> bool:
        """Wait until an update newer than `version` arrived; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self.version > version, timeout)

    def wake(self) -> None:
        """Wake waiters without an update (e.g. the client is closing)."""
        with self._changed:
            self._changed.notify_all()

    def partitions_for(self, topic: str) -> set[int] | None:
        info = self.topics.get(topic)
        return None if info is None else {p.partition for p in info.partitions}

    def leader_for(self, tp: TopicPartition) -> int:
        info = self.topics.get(tp.topic)
        if info is None or tp.partition >= len(info.partitions):
            return -1
        return info.partitions[tp.partition].leader

    def partition_info(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        if info is None or tp.partition >= len(info.partitions):
            return None
        return info.partitions[tp.partition]
