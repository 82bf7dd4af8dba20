"""kafka-python 3.x's KafkaAdminClient methods for replicas, features and hanging transactions, on fastmq's
Admin (admin_replicas), shaped as kafka-python returns them: alter_partition_reassignments {TopicPartition: error
class or None}, alter_replica_log_dirs {TopicPartitionReplica: error class, NoError on success}, update_features
{feature: "OK" or the error's text}, describe_topic_partitions {"topics": [...], "next_cursor": ...},
abort_transaction None, find_hanging_transactions [dict].
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import Admin
from fastmq.kafka.admin_replicas import AbortTransactionSpec
from fastmq.kafka.compat_admin_types import TransactionState
from fastmq.kafka.compat_types import by_topic_partition
from fastmq.kafka.structs import TopicPartition, TopicPartitionReplica

# States of a transaction that is not open (find_hanging_transactions passes them over).
_SETTLED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT,
            TransactionState.DEAD)
# The slack kafka-transactions.sh --find-hanging adds to the transaction timeout before calling one hanging.
_HANGING_SLACK_MS = 5 * 60 * 1000


def _partition_dict(p: Any) -> dict[str, Any]:
    return {"error_code": p.error_code, "partition_index": p.partition_index, "leader_id": p.leader_id,
            "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replica_nodes), "isr_nodes": list(p.isr_nodes),
            "eligible_leader_replicas": list(p.eligible_leader_replicas) if p.eligible_leader_replicas else None,
            "last_known_elr": list(p.last_known_elr) if p.last_known_elr else None,
            "offline_replicas": list(p.offline_replicas)}


class ReplicaMethods:
    """The replica, feature and transaction-abort methods of compat_admin.KafkaAdminClient (which supplies
    _admin, _deadline, list_transactions and describe_transactions)."""

    _admin: Admin
    config: dict[str, Any]
    _deadline: Callable[[float | None], float]
    list_transactions: Callable[..., dict[int, list[Any]]]
    describe_transactions: Callable[..., dict[str, Any]]

    def alter_partition_reassignments(self, reassignments: Mapping[Any, Any],
                                      timeout_ms: float | None = None) -> dict[TopicPartition, type | None]:
        """Give partitions new replica lists ({TopicPartition: [broker ids], or None to cancel}); {TopicPartition:
        error class, or None when accepted}. A request-level error raises."""
        response = self._admin._alter_reassignments(by_topic_partition(reassignments),
                                                    self._deadline(timeout_ms)).response
        return {TopicPartition(t.name, p.partition_index): kerrors.for_code(p.error_code) if p.error_code else None
                for t in response.responses for p in t.partitions}

    def alter_replica_log_dirs(self, replica_assignments: Mapping[Any, str]) -> dict[TopicPartitionReplica, type]:
        """Move replicas ({TopicPartitionReplica or (topic, partition, broker_id): absolute log directory}) between
        their brokers' log directories; {TopicPartitionReplica: error class, NoError on success}."""
        if not replica_assignments:
            return {}
        errors = self._admin.alter_replica_log_dirs(replica_assignments, timeout=self.config["request_timeout_ms"] / 1000.0)
        return {replica: kerrors.NoError if error is None else type(error) for replica, error in errors.items()}

    def update_features(self, feature_updates: Mapping[str, Any], validate_only: bool = False,
                        timeout_ms: float = 60000) -> dict[str, str]:
        """Finalize feature levels on the controller: {feature: max level or (UpdateFeatureType, max level)};
        {feature: "OK" or the error's text}. A request-level error raises."""
        if not isinstance(feature_updates, dict):
            raise TypeError("feature_updates must be a dict of {feature_name: max_version_level} or "
                            "{feature_name: (upgrade_type, max_version_level)}")
        errors = self._admin.update_features(feature_updates, validate_only=validate_only, timeout=timeout_ms / 1000.0)
        return {feature: "OK" if error is None else str(error) for feature, error in errors.items()}

    def describe_topic_partitions(self, topics: list[str], response_partition_limit: int = 2000,
                                  cursor: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A page of partition descriptions (DescribeTopicPartitions, Kafka 3.7+, with eligible leader
        replicas): {"topics": [topic dicts], "next_cursor": None or {"topic_name", "partition_index"}}."""
        start = None if cursor is None else (cursor["topic_name"], cursor["partition_index"])
        response = self._admin._describe_topic_partitions(list(topics), response_partition_limit, start,
                                                          self._deadline(None)).response
        topics_out = [{"error_code": t.error_code, "name": t.name, "topic_id": t.topic_id if t.topic_id.int else None,
                       "is_internal": t.is_internal, "partitions": [_partition_dict(p) for p in t.partitions],
                       "topic_authorized_operations": t.topic_authorized_operations}
                      for t in response.topics]
        following = response.next_cursor
        return {"topics": topics_out, "next_cursor": None if following is None else {
            "topic_name": following.topic_name, "partition_index": following.partition_index}}

    def abort_transaction(self, spec: Any) -> None:
        """Abort a producer's open transaction on one partition (an AbortTransactionSpec: topic_partition,
        producer_id, producer_epoch, coordinator_epoch=-1); the partition's error raises."""
        spec = AbortTransactionSpec(TopicPartition(*spec.topic_partition), spec.producer_id, spec.producer_epoch,
                                    spec.coordinator_epoch)
        self._admin.abort_transaction(spec, timeout=self.config["request_timeout_ms"] / 1000.0)

    def find_hanging_transactions(self, broker_ids: list[int] | None = None,
                                  max_transaction_timeout_ms: int = 900000) -> list[dict[str, Any]]:
        """Open transactions older than max_transaction_timeout_ms plus five minutes (as kafka-transactions.sh
        --find-hanging): [{transactional_id, producer_id, producer_epoch, state, age_ms, coordinator_id,
        topic_partitions}]."""
        threshold_ms = max_transaction_timeout_ms + _HANGING_SLACK_MS
        listed = self.list_transactions(broker_ids=broker_ids)
        ids = sorted({t.transactional_id for listings in listed.values() for t in listings})
        if not ids:
            return []
        now_ms = int(time.time() * 1000)
        hanging = []
        for txn_id, description in self.describe_transactions(ids).items():
            if description.state in _SETTLED or description.transaction_start_time_ms < 0:
                continue
            age_ms = now_ms - description.transaction_start_time_ms
            if age_ms >= threshold_ms:
                hanging.append({"transactional_id": txn_id, "producer_id": description.producer_id,
                                "producer_epoch": description.producer_epoch, "state": description.state.value,
                                "age_ms": age_ms, "coordinator_id": description.coordinator_id,
                                "topic_partitions": sorted(description.topic_partitions)})
        return hanging
