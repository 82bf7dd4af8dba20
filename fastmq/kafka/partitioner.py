"""kafka-python's kafka.partitioner: the Partitioner interface and the default partitioners.

The producer's own partitioning (murmur2 of the key, as the Java client; KIP-480 sticky partitions for
records without a key) runs compiled in the accumulator; DefaultPartitioner and StickyPartitioner select it.
A custom Partitioner is called with kafka-python's arguments.
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any

from fastmq._native.hashing import murmur2 as _murmur2


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data`, as kafka-python returns it (the signed 32-bit value)."""
    return _murmur2(data)


class Partitioner(ABC):
    """Choose a partition for a record sent without one."""

    @abstractmethod
    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any,
                  serialized_value: bytes | None, cluster: Any) -> int:
        """The partition id; `cluster` answers partitions_for_topic / available_partitions_for_topic."""


class DefaultPartitioner(Partitioner):
    """murmur2 of the key over all partitions; records without key: a random available partition.

    (A producer given this class uses its compiled equivalent, with KIP-480 sticky partitions for records
    without key, as the Java client and kafka-python's StickyPartitioner do.)"""

    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any,
                  serialized_value: bytes | None, cluster: Any) -> int:
        partitions: list[int] = sorted(cluster.partitions_for_topic(topic))
        if serialized_key is not None:
            return partitions[(murmur2(serialized_key) & 0x7FFFFFFF) % len(partitions)]
        available: list[int] = sorted(cluster.available_partitions_for_topic(topic)) or partitions
        return random.choice(available)


class StickyPartitioner(DefaultPartitioner):
    """KIP-480: records without key stay on one partition until its batch is full."""


class ClusterView:
    """The slice of kafka-python's ClusterMetadata that partitioners use, over fastmq's cluster metadata."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster

    def topics(self) -> set[str]:
        return set(self._cluster.topics)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        partitions: set[int] | None = self._cluster.partitions_for(topic)
        return partitions

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        info = self._cluster.topics.get(topic)
        return None if info is None else {p.partition for p in info.partitions if p.leader >= 0}

    def leader_for_partition(self, partition: Any) -> int | None:
        leader = self._cluster.leader_for(partition)
        return None if leader < 0 else leader
