"""The admin client's replica and cluster-level changes: partition reassignments (AlterPartitionReassignments),
moving replicas between a broker's log directories (AlterReplicaLogDirs), finalized feature levels
(UpdateFeatures), paged partition descriptions (DescribeTopicPartitions, Kafka 3.7+) and aborting a hanging
transaction on a partition (WriteTxnMarkers).

Reassignments and feature updates go to the controller, log-directory moves to the broker that holds each
replica, abort markers to the partition's leader, descriptions to any broker.
"""
from __future__ import annotations

from collections import defaultdict
from enum import IntEnum
from typing import Any, Iterable, Mapping, NamedTuple

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.admin_security import SecurityAdmin
from fastmq.kafka.admin_wire import _check_int, _error, _Reply, _topic_partitions
from fastmq.kafka.structs import TopicPartition, TopicPartitionReplica


class UpdateFeatureType(IntEnum):
    """How UpdateFeatures may move a feature's level (kafka.admin.UpdateFeatureType)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class AbortTransactionSpec(NamedTuple):
    """A transaction to abort on one partition: its producer id and epoch, and the coordinator epoch (-1: an
    administrative abort, which the leader accepts from any coordinator epoch)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int = -1


def _update_type(value: Any) -> UpdateFeatureType:
    try:
        return UpdateFeatureType[value.upper()] if isinstance(value, str) else UpdateFeatureType(value)
    except (KeyError, ValueError):
        raise ValueError(f"unknown feature update type {value!r}") from None


class ReplicaAdmin(SecurityAdmin):
    """The replica, feature and transaction-marker operations of Admin (see the module docstring)."""

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Iterable[int] | None], *,
                                      timeout: float | None = None) -> dict[TopicPartition, kerrors.KafkaError | None]:
        """Move partitions to new replica lists (None cancels a reassignment under way); each partition's error
        or None. A request-level error raises."""
        response = self._alter_reassignments(reassignments, self._deadline(timeout)).response
        return {TopicPartition(t.name, p.partition_index): _error(p.error_code, p.error_message,
                                                                  f"{t.name}-{p.partition_index}")
                for t in response.responses for p in t.partitions}

    def _alter_reassignments(self, reassignments: Mapping[Any, Any], deadline: float) -> _Reply:
        if not isinstance(reassignments, Mapping):
            raise TypeError("reassignments must map TopicPartition to a list of broker ids or None")
        T = kp.AlterPartitionReassignmentsRequest.ReassignableTopic
        P = kp.AlterPartitionReassignmentsRequest.ReassignablePartition
        by_topic: dict[str, list[Any]] = defaultdict(list)
        _topic_partitions(reassignments)
        for (topic, partition), replicas in reassignments.items():
            if replicas is not None:
                replicas = list(replicas)
                if not replicas:
                    raise ValueError(f"{topic}-{partition}: the replica list is empty; None cancels a reassignment")
                if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
                    raise ValueError(f"{topic}-{partition}: replicas must be int broker ids, not {replicas!r}")
            by_topic[topic].append(P(partition_index=partition, replicas=replicas))
        request = kp.AlterPartitionReassignmentsRequest(
            timeout_ms=self._timeout_ms(deadline), topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        reply = self._send(self._controller(deadline), request, deadline)
        error = _error(reply.response.error_code, reply.response.error_message, "AlterPartitionReassignments")
        if error is not None:
            raise error
        return reply

    def alter_replica_log_dirs(self, assignments: Mapping[Any, str], *, timeout: float | None = None
                               ) -> dict[TopicPartitionReplica, kerrors.KafkaError | None]:
        """Move replicas ({TopicPartitionReplica or (topic, partition, broker id): absolute log directory}) to
        a log directory of their broker; each replica's error or None."""
        deadline = self._deadline(timeout)
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for key, path in assignments.items():
            replica = TopicPartitionReplica(*key)
            _check_int(replica.partition, f"the partition of {replica!r}")
            if not isinstance(path, str):
                raise TypeError(f"{replica!r}: the log directory must be a str path, not {path!r}")
            by_broker[_check_int(replica.broker_id, f"the broker of {replica!r}")][path][replica.topic].append(
                replica.partition)
        if not by_broker:
            return {}
        self._check_brokers(by_broker, deadline)
        D = kp.AlterReplicaLogDirsRequest.AlterReplicaLogDir
        requests = [(broker, kp.AlterReplicaLogDirsRequest(dirs=[
            D(path=path, topics=[kp.AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
            for path, topics in dirs.items()])) for broker, dirs in by_broker.items()]
        results = {}
        for (broker, _), outcome in zip(requests, self._send_many(requests, deadline)):
            if isinstance(outcome, BaseException):
                raise outcome
            for t in outcome.response.results:
                for p in t.partitions:
                    replica = TopicPartitionReplica(t.topic_name, p.partition_index, broker)
                    results[replica] = _error(p.error_code, None, f"{replica!r}")
        return results

    def update_features(self, updates: Mapping[str, Any], *, validate_only: bool = False,
                        timeout: float | None = None) -> dict[str, kerrors.KafkaError | None]:
        """Set finalized feature levels: {feature: max level (an UPGRADE) or (UpdateFeatureType, max level)}; a
        level below 1 removes the feature. Each feature's error or None; a request-level error raises
        (answers of v2+ carry no per-feature results: every feature then succeeded)."""
        reply = self._update_features(updates, validate_only, self._deadline(timeout))
        results = {r.feature: _error(r.error_code, r.error_message, f"feature {r.feature!r}")
                   for r in reply.response.results or ()}
        return {feature: results.get(feature) for feature in updates}

    def _update_features(self, updates: Mapping[str, Any], validate_only: bool, deadline: float) -> _Reply:
        if not isinstance(updates, Mapping):
            raise TypeError("feature updates must map feature names to a level or (UpdateFeatureType, level)")
        K = kp.UpdateFeaturesRequest.FeatureUpdateKey
        keys = []
        for feature, spec in updates.items():
            kind, level = spec if isinstance(spec, tuple) else (UpdateFeatureType.UPGRADE, spec)
            kind = _update_type(kind)
            keys.append(K(feature=feature, max_version_level=_check_int(level, f"the level of {feature!r}"),
                          allow_downgrade=kind in (UpdateFeatureType.SAFE_DOWNGRADE, UpdateFeatureType.UNSAFE_DOWNGRADE),
                          upgrade_type=int(kind)))
        request = kp.UpdateFeaturesRequest(timeout_ms=self._timeout_ms(deadline), feature_updates=keys,
                                           validate_only=validate_only)
        reply = self._send(self._controller(deadline), request, deadline)
        if validate_only and reply.version < 1:
            raise kerrors.IncompatibleBrokerVersion("validate_only needs UpdateFeatures v1+ (Kafka 3.3+)")
        error = _error(reply.response.error_code, reply.response.error_message, "UpdateFeatures")
        if error is not None:
            raise error
        return reply

    def _describe_topic_partitions(self, topics: Iterable[str], partition_limit: int,
                                   cursor: tuple[str, int] | None, deadline: float) -> _Reply:
        """One page of DescribeTopicPartitions from (topic, partition) `cursor` on; the response's next_cursor
        (None at the end) starts the next page."""
        if isinstance(topics, str):
            raise TypeError("topics must be a list of names, not one str")
        R = kp.DescribeTopicPartitionsRequest
        request = R(topics=[R.TopicRequest(name=name) for name in topics],
                    response_partition_limit=_check_int(partition_limit, "response_partition_limit"),
                    cursor=None if cursor is None else R.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
        return self._send(None, request, deadline)

    def abort_transaction(self, spec: AbortTransactionSpec, *, timeout: float | None = None) -> None:
        """Write an abort marker for a producer's open transaction on one partition (WriteTxnMarkers to its
        leader): what kafka-transactions.sh --abort does for a hanging transaction. The partition's error
        (e.g. InvalidProducerEpochError, UnknownTopicOrPartitionError) raises."""
        deadline = self._deadline(timeout)
        tp = TopicPartition(*spec.topic_partition)
        leader = self._leaders([tp], deadline)[tp]
        if leader < 0:
            raise kerrors.LeaderNotAvailableError(f"{tp.topic}-{tp.partition} has no leader")
        M = kp.WriteTxnMarkersRequest.WritableTxnMarker
        request = kp.WriteTxnMarkersRequest(markers=[M(
            producer_id=_check_int(spec.producer_id, "producer_id"),
            producer_epoch=_check_int(spec.producer_epoch, "producer_epoch"), transaction_result=False,
            topics=[kp.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
            coordinator_epoch=_check_int(spec.coordinator_epoch, "coordinator_epoch"))])
        response = self._send(leader, request, deadline).response
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    error = _error(p.error_code, "WriteTxnMarkers (abort) failed", f"{topic.name}-{p.partition_index}")
                    if error is not None:
                        raise error
