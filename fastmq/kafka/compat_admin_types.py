"""kafka-python's admin value types that fastmq's compat KafkaAdminClient takes and returns (kafka.admin's names,
fields and values): offset timestamps, members to remove, a broker's API versions, transactions and producers."""
from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.structs import TopicPartition

__all__ = ["BrokerVersionData", "MemberToRemove", "OffsetTimestamp", "PartitionProducerState", "ProducerState",
           "TransactionDescription", "TransactionListing", "TransactionState"]


class OffsetTimestamp(int):
    """A timestamp in ms where reset_group_offsets takes a spec or an offset: the first offset at or after it
    (kafka.admin.OffsetTimestamp)."""

    def __repr__(self) -> str:
        return f"OffsetTimestamp({int(self)})"


class MemberToRemove:
    """A member for remove_group_members (kafka.admin.MemberToRemove): its member_id, or the
    group_instance_id of a static member; reason reaches brokers of LeaveGroup v5+."""

    __slots__ = ("member_id", "group_instance_id", "reason")

    def __init__(self, member_id: str | None = None, group_instance_id: str | None = None,
                 reason: str | None = None) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.reason = reason

    def __repr__(self) -> str:
        return (f"MemberToRemove(member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r}, "
                f"reason={self.reason!r})")


class BrokerVersionData:
    """A broker's API version ranges (what kafka-python's get_broker_version_data returns): api_versions
    {api key: (min, max)}; api_version(operation) the highest version fastmq and the broker share. Unlike
    kafka-python's, it does not guess a broker release from the ranges."""

    def __init__(self, api_versions: dict[int, tuple[int, int]]) -> None:
        self.api_versions = api_versions

    def api_version(self, operation: Any, min_version: int = 0, max_version: float = float("inf")) -> int:
        """For a request class or instance (fastmq's or kafka-python's) or an API key; IncompatibleBrokerVersion
        when the broker lacks the API or no version lies within [min_version, max_version]."""
        if min_version > max_version:
            raise ValueError("min_version must not be greater than max_version")
        api_key = int(getattr(operation, "API_KEY", operation))
        if api_key not in self.api_versions:
            raise kerrors.IncompatibleBrokerVersion(f"the broker does not support API key {api_key}")
        low, high = self.api_versions[api_key]
        version = kp.highest_common_version(api_key, max(low, min_version), int(min(high, max_version)))
        return version

    def __repr__(self) -> str:
        return f"BrokerVersionData({len(self.api_versions)} APIs)"


class TransactionState(str, Enum):
    """A transaction's state as brokers name it (kafka.admin.TransactionState)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"

    @classmethod
    def named(cls, value: str) -> TransactionState:
        """The member for a broker's state name (UNKNOWN for a name of a newer broker)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class TransactionListing(NamedTuple):
    """One transaction of list_transactions."""

    transactional_id: str
    producer_id: int
    state: TransactionState


class TransactionDescription(NamedTuple):
    """One transactional id of describe_transactions, with the coordinator that answered."""

    coordinator_id: int
    state: TransactionState
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    topic_partitions: set[TopicPartition]


class ProducerState(NamedTuple):
    """One active producer of a partition (describe_producers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int


class PartitionProducerState(NamedTuple):
    active_producers: list[ProducerState]
