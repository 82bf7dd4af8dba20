"""Admin: the topics, partitions, configurations, consumer groups and records of a Kafka cluster.

    from fastmq.kafka.admin import Admin, NewTopic

    with Admin("127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=6, replication_factor=3,
                                      topic_configs={"retention.ms": "86400000"})])
        print(admin.describe_topics(["events"])["events"].partitions)

Where requests go (as Kafka's own admin client routes them):
- CreateTopics, DeleteTopics and CreatePartitions go to the controller that a Metadata response names. Items
  answered NOT_CONTROLLER are sent again, alone, to the controller of a fresh Metadata response.
- DescribeGroups, DeleteGroups, OffsetFetch and OffsetDelete go to each group's coordinator (FindCoordinator,
  batched from v4). COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR make the admin
  look the coordinator up again and retry that group.
- DeleteRecords goes to each partition's leader; partitions answered NOT_LEADER or LEADER_NOT_AVAILABLE are
  retried after a metadata refresh.
- ListGroups goes to every broker, a broker's (or its loggers') configuration to that broker, the rest to the
  least loaded broker.
Retries follow the client's RetryPolicy (fastmq.client: retry_backoff_ms, growing to retry_backoff_max_ms, with
jitter) and stay within the operation's timeout (seconds; request_timeout_ms when None),
which also bounds connecting and is passed on to the broker where a request has a timeout of its own.

Errors:
- Input that no broker accepts (duplicate items, illegal topic names, partition counts or replication factors
  below 1) raises before anything is sent, with the class a broker answers with (InvalidRequestError,
  InvalidTopicError, InvalidPartitionsError, InvalidReplicationFactorError); wrong types raise TypeError.
- Broker errors are per item: each result carries `error`, a kafka-python-shaped exception or None. With
  raise_errors=True (the default) a failed item raises its error's class, with a message that lists every
  failed item and a `results` attribute that holds every item's result.
- An API the broker does not implement raises IncompatibleBrokerVersion (an UnsupportedVersionError) naming
  the API, before anything is sent.

The class is built in layers: admin_wire.AdminConnection (sending within a deadline, the controller,
per-item answers), admin_groups.GroupAdmin (consumer groups and their offsets), admin_security.SecurityAdmin
(ACLs, SCRAM credentials), admin_replicas.ReplicaAdmin (reassignments, log directories, features, transaction
aborts) and Admin here (topics, partitions, records, configurations). kafka-python's KafkaAdminClient (fastmq.kafka.compat_admin) is built on
this class: it reads the wire-level answers through the underscore methods and shapes them as kafka-python does.
"""
from __future__ import annotations

import logging
import re
import time
import uuid
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.admin_groups import group_offsets  # noqa: F401  (public here since the split)
from fastmq.kafka.admin_replicas import AbortTransactionSpec, ReplicaAdmin, UpdateFeatureType  # noqa: F401
from fastmq.kafka.admin_security import ScramCredentials  # noqa: F401
from fastmq.kafka.admin_security_types import (  # noqa: F401  (the ACL and SCRAM types are imported from here too)
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourcePatternFilter,
    ResourceType, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion,
)
from fastmq.kafka.admin_types import (  # noqa: F401  (the admin's public types are imported from here too)
    ConfigResourceType, AlterConfigOp, ConfigSourceType, ConfigType, enum_member, _enum_or_int, NewTopic,
    NewPartitions, ConfigResource, ClusterDescription, ConfigSynonym, ConfigEntry, CreateTopicResult,
    ResourceConfigs, GroupListing, MemberDescription, GroupDescription, DeleteRecordsResult,
)
from fastmq.kafka.admin_wire import (  # noqa: F401  (AUTHORIZED_OPERATIONS_OMITTED, raise_failures: public here)
    _TIMEOUTS, AUTHORIZED_OPERATIONS_OMITTED, _check_int, _check_unique, _error, _ItemAnswer, _missing,
    _topic_partitions, authorized_operations, raise_failures,
)
from fastmq.kafka.cluster import BrokerInfo, ClusterMetadata, TopicInfo
from fastmq.kafka.structs import TopicPartition

__all__ = [
    "ACL", "ACLFilter", "ACLOperation", "ACLPermissionType", "ACLResourcePatternType", "AUTHORIZED_OPERATIONS_OMITTED",
    "AbortTransactionSpec", "Admin", "AlterConfigOp", "ClusterDescription", "ConfigEntry", "ConfigResource",
    "ConfigResourceType", "ConfigSourceType", "ConfigSynonym", "ConfigType", "CreateTopicResult", "DeleteRecordsResult",
    "GroupDescription", "GroupListing", "MemberDescription", "NewPartitions", "NewTopic", "ReplicaAdmin",
    "ResourceConfigs", "ResourcePattern", "ResourcePatternFilter", "ResourceType", "ScramCredentials",
    "ScramMechanism", "UpdateFeatureType", "UserScramCredentialDeletion", "UserScramCredentialUpsertion",
    "authorized_operations", "config_entry", "enum_member", "group_offsets", "raise_failures",
]

_log = logging.getLogger(__name__)

# Kafka's topic name rules (org.apache.kafka.common.internals.Topic).
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_NAME_LENGTH = 249
_MAX_REPLICATION_FACTOR = 32767  # int16 on the wire
_LEADER_RETRY_CODES = frozenset({kerrors.LeaderNotAvailableError.errno, kerrors.NotLeaderForPartitionError.errno})

def _check_topic_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"a topic name must be a str, not {type(name).__name__}")
    if (not name or len(name) > _MAX_TOPIC_NAME_LENGTH or name in (".", "..")
            or not _LEGAL_TOPIC_NAME.fullmatch(name)):
        raise kerrors.InvalidTopicError(
            f"topic name {name!r} is illegal: use 1 to {_MAX_TOPIC_NAME_LENGTH} of the characters "
            "a-z A-Z 0-9 . _ - (and not '.' or '..')")


def _check_configs(configs: Mapping[str, Any], what: str) -> None:
    if not isinstance(configs, Mapping):
        raise TypeError(f"{what} must be a mapping of names to values, not {type(configs).__name__}")
    for name, value in configs.items():
        if not isinstance(name, str) or not (value is None or isinstance(value, str)):
            raise TypeError(f"{what}: {name!r} -> {value!r}: names and values must be str (values may be None)")


def config_entry(struct: Any, version: int, resource_type: ConfigResourceType | int) -> ConfigEntry:
    """A DescribeConfigs (or CreateTopics v5+) config struct as a ConfigEntry."""
    source = struct.config_source
    if version == 0 and hasattr(struct, "is_default"):
        # v0 has no source; derive it as Kafka's clients do.
        if struct.read_only and resource_type == ConfigResourceType.BROKER:
            source = ConfigSourceType.STATIC_BROKER_CONFIG
        elif struct.is_default:
            source = ConfigSourceType.DEFAULT_CONFIG
        else:
            source = ConfigSourceType.dynamic_for(resource_type)
    synonyms = tuple(ConfigSynonym(s.name, s.value, _enum_or_int(ConfigSourceType, s.source))
                     for s in getattr(struct, "synonyms", None) or ())
    return ConfigEntry(
        name=struct.name, value=struct.value, source=_enum_or_int(ConfigSourceType, source),
        read_only=struct.read_only, sensitive=struct.is_sensitive, synonyms=synonyms,
        type=_enum_or_int(ConfigType, getattr(struct, "config_type", 0)),
        documentation=getattr(struct, "documentation", None) or None)


# ---- the admin client ---------------------------------------------------------------------------------------

class Admin(ReplicaAdmin):
    """Administration of a Kafka cluster. Thread-safe; every method blocks until its answers arrived.

    Admin(bootstrap_servers, **options) takes KafkaClient's settings (ClientConfig: security, timeouts,
    retry_backoff_ms, ...); Admin(client=...) shares an existing KafkaClient, which close() leaves open."""

    # ---- cluster and topics ---------------------------------------------------------------------------

    def describe_cluster(self, *, include_authorized_operations: bool = False,
                         timeout: float | None = None) -> ClusterDescription:
        """The cluster id, the controller and the brokers (DescribeCluster, or Metadata on brokers before 2.8)."""
        reply, from_metadata = self._describe_cluster(self._deadline(timeout), include_authorized_operations)
        r = reply.response
        if from_metadata:
            brokers = tuple(BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in r.brokers)
            operations = getattr(r, "cluster_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)
        else:
            brokers = tuple(BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in r.brokers)
            operations = r.cluster_authorized_operations
        return ClusterDescription(r.cluster_id, r.controller_id, brokers, authorized_operations(operations))

    def list_topics(self, *, include_internal: bool = False, timeout: float | None = None) -> list[str]:
        """The names of the cluster's topics, sorted."""
        response = self._metadata(None, self._deadline(timeout)).response
        return sorted(t.name for t in response.topics
                      if t.name is not None and not t.error_code and (include_internal or not t.is_internal))

    def describe_topics(self, topics: Iterable[str] | None = None, *,
                        timeout: float | None = None) -> dict[str, TopicInfo]:
        """Partitions, leaders, replicas and ISRs of the named topics (None: every topic); never creates
        one. Unknown topics raise UnknownTopicOrPartitionError naming them."""
        names = None if topics is None else list(topics)
        if names is not None:
            if isinstance(topics, str):
                raise TypeError("topics must be a list of names, not one str")
            _check_unique(names, "topics")
        response = self._metadata(names, self._deadline(timeout)).response
        snapshot = ClusterMetadata()
        snapshot.update(response, time.monotonic(), all_topics=True)
        if snapshot.topic_errors:
            failures = {name: _error(code, None, f"topic {name!r}") for name, code in snapshot.topic_errors.items()}
            raise_failures("describe_topics", failures)
        return {name: snapshot.topics[name] for name in (names if names is not None else sorted(snapshot.topics))}

    def wait_for_topics(self, topics: Iterable[str], timeout: float = 10.0) -> None:
        """Wait until every topic is in the metadata with a leader for each partition (a created topic takes
        a moment to get there); KafkaTimeoutError naming the topics that are not ready."""
        names = list(topics)
        deadline = self._deadline(timeout)
        attempts = 0
        failure: BaseException | None = None
        while True:
            ready: set[str] = set()
            try:
                response = self._metadata(names, deadline).response
            except kerrors.KafkaError as exc:
                # A Metadata request lost to the deadline or a connection is a pass that found nothing ready, as
                # kafka-python's wait_for_topics counts it: the caller learns which topics were not ready.
                if not exc.retriable:
                    raise
                failure = exc
            else:
                ready = {t.name for t in response.topics
                         if not t.error_code and t.partitions
                         and all(p.leader_id >= 0 and not p.error_code for p in t.partitions)}
            attempts += 1
            missing = [name for name in names if name not in ready]
            if not missing:
                return
            delay = self._retry_delay(kerrors.LeaderNotAvailableError, attempts, deadline)
            if delay is None:
                raise kerrors.KafkaTimeoutError(f"topics not ready within {timeout:.1f} s: {missing}") from failure
            time.sleep(delay)

    def create_topics(self, new_topics: Iterable[NewTopic | str], *, timeout: float | None = None,
                      validate_only: bool = False, raise_errors: bool = True) -> dict[str, CreateTopicResult]:
        """Create topics (a name alone takes the broker's defaults); validate_only checks without creating."""
        answers = self._create_topics(new_topics, self._deadline(timeout), validate_only)
        results = {}
        for name, answer in answers.items():
            if answer.struct is None:
                results[name] = CreateTopicResult(name, _missing(f"topic {name!r}", "CreateTopics"))
                continue
            s = answer.struct
            configs = {c.name: config_entry(c, answer.version, ConfigResourceType.TOPIC) for c in s.configs or ()}
            results[name] = CreateTopicResult(
                name, _error(s.error_code, s.error_message, f"topic {name!r}"),
                s.topic_id if s.topic_id is not None and s.topic_id.int else None,
                s.num_partitions, s.replication_factor, configs)
        if raise_errors:
            raise_failures("create_topics", results)
        return results

    def delete_topics(self, topics: Iterable[str | uuid.UUID], *, timeout: float | None = None,
                      raise_errors: bool = True) -> dict[str | uuid.UUID, kerrors.KafkaError | None]:
        """Delete topics by name (or by topic id, from Kafka 2.8); each maps to its error or None."""
        answers = self._delete_topics(topics, self._deadline(timeout))
        results: dict[str | uuid.UUID, kerrors.KafkaError | None] = {}
        for key, answer in answers.items():
            item = f"topic {key!r}" if isinstance(key, str) else f"topic id {key}"
            results[key] = (_missing(item, "DeleteTopics") if answer.struct is None
                            else _error(answer.code, answer.message, item))
        if raise_errors:
            raise_failures("delete_topics", results)
        return results

    def create_partitions(self, new_partitions: Mapping[str, NewPartitions | int], *,
                          timeout: float | None = None, validate_only: bool = False,
                          raise_errors: bool = True) -> dict[str, kerrors.KafkaError | None]:
        """Raise topics' partition counts to the given totals (Kafka cannot remove partitions)."""
        answers = self._create_partitions(new_partitions, self._deadline(timeout), validate_only)
        results = {name: (_missing(f"topic {name!r}", "CreatePartitions") if answer.struct is None
                          else _error(answer.code, answer.message, f"topic {name!r}"))
                   for name, answer in answers.items()}
        if raise_errors:
            raise_failures("create_partitions", results)
        return results

    def delete_records(self, offsets: Mapping[TopicPartition, int], *, timeout: float | None = None,
                       raise_errors: bool = True) -> dict[TopicPartition, DeleteRecordsResult]:
        """Delete every record below the given offset of each partition (-1: below the high watermark)."""
        answers = self._delete_records(offsets, self._deadline(timeout))
        results = {}
        for tp, answer in answers.items():
            item = f"{tp.topic}-{tp.partition}"
            if answer.struct is None:
                results[tp] = DeleteRecordsResult(-1, _missing(item, "DeleteRecords"))
            else:
                results[tp] = DeleteRecordsResult(answer.struct.low_watermark,
                                                  _error(answer.code, answer.message, item))
        if raise_errors:
            raise_failures("delete_records", results)
        return results

    # ---- configurations -------------------------------------------------------------------------------

    def describe_configs(self, resources: Iterable[ConfigResource], *, include_synonyms: bool = False,
                         include_documentation: bool = False, timeout: float | None = None,
                         raise_errors: bool = True) -> dict[tuple[ConfigResourceType, str], ResourceConfigs]:
        """The configuration of each resource (only the keys in its `configs`, when given), keyed by
        (resource_type, name)."""
        answers = self._describe_configs(resources, self._deadline(timeout), include_synonyms,
                                         include_documentation)
        results = {}
        for (resource_type, name), answer in answers.items():
            item = f"{resource_type.name.lower()} {name!r}"
            if answer.struct is None:
                results[resource_type, name] = ResourceConfigs(resource_type, name, {},
                                                               _missing(item, "DescribeConfigs"))
                continue
            entries = {c.name: config_entry(c, answer.version, resource_type) for c in answer.struct.configs}
            results[resource_type, name] = ResourceConfigs(resource_type, name, entries,
                                                           _error(answer.code, answer.message, item))
        if raise_errors:
            raise_failures("describe_configs", results)
        return results

    def alter_configs(self, resources: Iterable[ConfigResource], *, validate_only: bool = False,
                      timeout: float | None = None,
                      raise_errors: bool = True) -> dict[tuple[ConfigResourceType, str], kerrors.KafkaError | None]:
        """Replace the whole dynamic configuration of each resource with its `configs` {key: value}
        (AlterConfigs: keys left out return to their defaults; prefer incremental_alter_configs)."""
        return self._alter_results("alter_configs", self._alter_configs(
            resources, self._deadline(timeout), validate_only, incremental=False), raise_errors)

    def incremental_alter_configs(self, resources: Iterable[ConfigResource], *, validate_only: bool = False,
                                  timeout: float | None = None, raise_errors: bool = True
                                  ) -> dict[tuple[ConfigResourceType, str], kerrors.KafkaError | None]:
        """Change only the listed keys of each resource: `configs` maps a key to a value (SET) or to
        (AlterConfigOp, value); DELETE returns the key to its default (Kafka 2.3+)."""
        return self._alter_results("incremental_alter_configs", self._alter_configs(
            resources, self._deadline(timeout), validate_only, incremental=True), raise_errors)

    @staticmethod
    def _alter_results(operation: str, answers: dict[tuple[ConfigResourceType, str], _ItemAnswer],
                       raise_errors: bool) -> dict[tuple[ConfigResourceType, str], kerrors.KafkaError | None]:
        api = "IncrementalAlterConfigs" if operation.startswith("incremental") else "AlterConfigs"
        results = {}
        for (resource_type, name), answer in answers.items():
            item = f"{resource_type.name.lower()} {name!r}"
            results[resource_type, name] = (_missing(item, api) if answer.struct is None
                                            else _error(answer.code, answer.message, item))
        if raise_errors:
            raise_failures(operation, results)
        return results

    def _create_topics(self, new_topics: Iterable[NewTopic | str], deadline: float,
                       validate_only: bool) -> dict[str, _ItemAnswer]:
        topics = [NewTopic(t) if isinstance(t, str) else t for t in new_topics]
        if not topics:
            raise ValueError("no topics to create")
        for topic in topics:
            if not isinstance(topic, NewTopic):
                raise TypeError(f"expected NewTopic or a topic name, got {topic!r}")
            _check_topic_name(topic.name)
            partitions = _check_int(topic.num_partitions, f"num_partitions of {topic.name!r}")
            if partitions != -1 and partitions < 1:
                raise kerrors.InvalidPartitionsError(
                    f"topic {topic.name!r}: num_partitions must be at least 1 (or -1 for the broker's default), "
                    f"not {partitions}")
            factor = _check_int(topic.replication_factor, f"replication_factor of {topic.name!r}")
            if factor != -1 and not 1 <= factor <= _MAX_REPLICATION_FACTOR:
                raise kerrors.InvalidReplicationFactorError(
                    f"topic {topic.name!r}: replication_factor must be 1 to {_MAX_REPLICATION_FACTOR} (or -1 for "
                    f"the broker's default), not {factor}")
            _check_configs(topic.topic_configs, f"topic_configs of {topic.name!r}")
        _check_unique([t.name for t in topics], "topics")
        T = kp.CreateTopicsRequest.CreatableTopic
        A = kp.CreateTopicsRequest.CreatableReplicaAssignment
        C = kp.CreateTopicsRequest.CreatableTopicConfig
        items = {t.name: T(name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                           assignments=[A(partition_index=p, broker_ids=list(brokers))
                                        for p, brokers in t.replica_assignments.items()],
                           configs=[C(name=k, value=v) for k, v in t.topic_configs.items()])
                 for t in topics}
        return self._controller_call(
            items, lambda batch, ms: kp.CreateTopicsRequest(topics=batch, timeout_ms=ms, validate_only=validate_only),
            lambda response: ((t.name, t) for t in response.topics), deadline)

    def _delete_topics(self, topics: Iterable[str | uuid.UUID], deadline: float) -> dict[Any, _ItemAnswer]:
        if isinstance(topics, (str, uuid.UUID)):
            raise TypeError("topics must be a list of names or topic ids, not one")
        keys = list(topics)
        for key in keys:
            if not isinstance(key, (str, uuid.UUID)):
                raise TypeError(f"a topic to delete is a name or a uuid.UUID topic id, not {key!r}")
        _check_unique(keys, "topics")
        S = kp.DeleteTopicsRequest.DeleteTopicState

        def build(batch: list[str | uuid.UUID], ms: int) -> Any:
            # v6+ reads `topics`, older versions `topic_names`; the encoder writes only its version's field.
            return kp.DeleteTopicsRequest(
                topics=[S(topic_id=k) if isinstance(k, uuid.UUID) else S(name=k) for k in batch],
                topic_names=[k for k in batch if isinstance(k, str)], timeout_ms=ms)

        ids = {k for k in keys if isinstance(k, uuid.UUID)}

        def answers(response: Any) -> Iterable[tuple[Any, Any]]:
            for r in response.responses:
                yield (r.topic_id if r.topic_id in ids else r.name), r

        return self._controller_call({k: k for k in keys}, build, answers, deadline)

    def _create_partitions(self, new_partitions: Mapping[str, NewPartitions | int], deadline: float,
                           validate_only: bool) -> dict[str, _ItemAnswer]:
        if not isinstance(new_partitions, Mapping):
            raise TypeError("new_partitions must map topic names to NewPartitions or a total count")
        T = kp.CreatePartitionsRequest.CreatePartitionsTopic
        A = kp.CreatePartitionsRequest.CreatePartitionsAssignment
        items = {}
        for name, spec in new_partitions.items():
            if not isinstance(name, str):
                raise TypeError(f"a topic name must be a str, not {name!r}")
            spec = NewPartitions(spec) if isinstance(spec, int) and not isinstance(spec, bool) else spec
            if not isinstance(spec, NewPartitions):
                raise TypeError(f"topic {name!r}: expected NewPartitions or an int, got {spec!r}")
            count = _check_int(spec.total_count, f"total_count of {name!r}")
            if count < 1:
                raise kerrors.InvalidPartitionsError(f"topic {name!r}: total_count must be at least 1, not {count}")
            assignments = (None if spec.new_assignments is None
                           else [A(broker_ids=list(brokers)) for brokers in spec.new_assignments])
            items[name] = T(name=name, count=count, assignments=assignments)
        if not items:
            raise ValueError("no topics to add partitions to")
        return self._controller_call(
            items,
            lambda batch, ms: kp.CreatePartitionsRequest(topics=batch, timeout_ms=ms, validate_only=validate_only),
            lambda response: ((r.name, r) for r in response.results), deadline)

    def _delete_records(self, offsets: Mapping[TopicPartition, int], deadline: float,
                        leader: int | None = None) -> dict[TopicPartition, _ItemAnswer]:
        """DeleteRecords to each partition's leader (or all to `leader`, without retries)."""
        if not isinstance(offsets, Mapping):
            raise TypeError("offsets must map TopicPartition to the offset to delete below")
        _topic_partitions(offsets)
        for tp, offset in offsets.items():
            if _check_int(offset, f"the offset of {tp.topic}-{tp.partition}") < -1:
                raise kerrors.OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition}: delete below offset {offset}? Use an offset >= 0, or -1 for the "
                    "high watermark")
        if leader is not None:
            self._check_brokers([leader], deadline)
        T = kp.DeleteRecordsRequest.DeleteRecordsTopic
        P = kp.DeleteRecordsRequest.DeleteRecordsPartition
        leaderless = _ItemAnswer(kerrors.LeaderNotAvailableError.errno, "no leader", None, -1)

        def one_pass(pending: list[TopicPartition], may_retry: bool, is_retry: bool
                     ) -> tuple[dict[TopicPartition, _ItemAnswer], dict[TopicPartition, _ItemAnswer]]:
            may_retry = may_retry and leader is None
            leaders = {tp: leader for tp in pending} if leader is not None else self._leaders(pending, deadline)
            final: dict[TopicPartition, _ItemAnswer] = {}
            retry: dict[TopicPartition, _ItemAnswer] = {}
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(pending):
                if leaders[tp] < 0:
                    (retry if may_retry else final)[tp] = leaderless
                else:
                    by_node[leaders[tp]].append(tp)
            requests = []
            for node_id, tps in by_node.items():
                by_topic = _topic_partitions(tps)
                requests.append((node_id, kp.DeleteRecordsRequest(
                    topics=[T(name=topic, partitions=[P(partition_index=i, offset=offsets[TopicPartition(topic, i)])
                                                      for i in indexes])
                            for topic, indexes in by_topic.items()],
                    timeout_ms=self._timeout_ms(deadline))))
            outcomes = self._send_many(requests, deadline)
            timed_out = [o for o in outcomes if isinstance(o, _TIMEOUTS)]
            if timed_out and is_retry:
                raise timed_out[0]
            wanted = set(pending)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
                for topic in outcome.response.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, p.partition_index)
                        if tp not in wanted or tp in final:
                            continue
                        answer = _ItemAnswer(p.error_code, None, p, outcome.version)
                        (retry if p.error_code in _LEADER_RETRY_CODES and may_retry else final)[tp] = answer
            return final, retry

        return self._until_answered(offsets, one_pass, kerrors.NotLeaderForPartitionError, deadline)

    def _config_requests(self, resources: Iterable[ConfigResource], deadline: float
                         ) -> dict[Any, list[ConfigResource]]:
        """Resources grouped by the node that answers for them (None: any broker)."""
        resources = list(resources)
        for resource in resources:
            if not isinstance(resource, ConfigResource):
                raise TypeError(f"expected ConfigResource, got {resource!r}")
            if not isinstance(resource.name, str):
                raise TypeError(f"{resource!r}: the resource name must be a str")
        _check_unique([r.key for r in resources], "config resources")
        by_node: dict[Any, list[ConfigResource]] = defaultdict(list)
        for resource in resources:
            node = None
            if resource.resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
                try:
                    node = int(resource.name)
                except ValueError:
                    raise ValueError(f"{resource!r}: a broker resource is named by its broker id") from None
            by_node[node].append(resource)
        brokers = [node for node in by_node if node is not None]
        if brokers:
            self._check_brokers(brokers, deadline)
        return by_node

    def _per_resource(self, by_node: dict[Any, list[ConfigResource]], build: Callable[[list[ConfigResource]], Any],
                      answers: Callable[[Any], Iterable[Any]], deadline: float
                      ) -> dict[tuple[ConfigResourceType, str], _ItemAnswer]:
        keys = [r.key for resources in by_node.values() for r in resources]
        nodes = list(by_node)
        results: dict[tuple[ConfigResourceType, str], _ItemAnswer] = {}
        for node, outcome in zip(nodes, self._send_many([(n, build(by_node[n])) for n in nodes], deadline)):
            if isinstance(outcome, BaseException):
                raise outcome
            asked = {r.key for r in by_node[node]}
            for struct in answers(outcome.response):
                key = (_enum_or_int(ConfigResourceType, struct.resource_type), struct.resource_name)
                if key in asked:
                    results[key] = _ItemAnswer(struct.error_code, struct.error_message, struct, outcome.version)
        return {key: results.get(key, _ItemAnswer(0, None, None, -1)) for key in keys}

    def _describe_configs(self, resources: Iterable[ConfigResource], deadline: float, include_synonyms: bool,
                          include_documentation: bool) -> dict[tuple[ConfigResourceType, str], _ItemAnswer]:
        R = kp.DescribeConfigsRequest.DescribeConfigsResource

        def build(batch: list[ConfigResource]) -> Any:
            return kp.DescribeConfigsRequest(
                resources=[R(resource_type=r.resource_type, resource_name=r.name,
                             configuration_keys=None if r.configs is None else list(r.configs)) for r in batch],
                include_synonyms=include_synonyms, include_documentation=include_documentation)

        return self._per_resource(self._config_requests(resources, deadline), build,
                                  lambda response: response.results, deadline)

    def _alter_configs(self, resources: Iterable[ConfigResource], deadline: float, validate_only: bool,
                       incremental: bool) -> dict[tuple[ConfigResourceType, str], _ItemAnswer]:
        by_node = self._config_requests(resources, deadline)
        entries = {}
        for batch in by_node.values():
            for resource in batch:
                entries[resource.key] = _alter_entries(resource, incremental)
        # The two requests have the same shape: the message, its resource and its config entry classes.
        M: type[kp.Struct]
        R: type[kp.Struct]
        C: type[kp.Struct]
        if incremental:
            M, R, C = (kp.IncrementalAlterConfigsRequest, kp.IncrementalAlterConfigsRequest.AlterConfigsResource,
                       kp.IncrementalAlterConfigsRequest.AlterableConfig)

            def config(name: str, op: AlterConfigOp, value: str | None) -> Any:
                return C(name=name, config_operation=op, value=value)
        else:
            M, R, C = (kp.AlterConfigsRequest, kp.AlterConfigsRequest.AlterConfigsResource,
                       kp.AlterConfigsRequest.AlterableConfig)

            def config(name: str, op: AlterConfigOp, value: str | None) -> Any:
                return C(name=name, value=value)

        def build(batch: list[ConfigResource]) -> Any:
            # Resources of whichever of the two requests (the same shape) M is.
            resources: list[Any] = [R(resource_type=r.resource_type, resource_name=r.name,
                                      configs=[config(*entry) for entry in entries[r.key]]) for r in batch]
            return M(resources=resources, validate_only=validate_only)

        return self._per_resource(by_node, build, lambda response: response.responses, deadline)

def _alter_entries(resource: ConfigResource, incremental: bool) -> list[tuple[str, AlterConfigOp, str | None]]:
    """(name, operation, value) of each configuration change of a resource."""
    configs = resource.configs or {}
    if not isinstance(configs, Mapping):
        raise TypeError(f"{resource!r}: configs to alter must be a mapping of names to values")
    entries = []
    for name, spec in configs.items():
        op, value = spec if isinstance(spec, tuple) else (AlterConfigOp.SET, spec)
        op = enum_member(AlterConfigOp, op, f"the operation on {name!r}")
        if not incremental and op is not AlterConfigOp.SET:
            raise ValueError(f"{resource!r}: AlterConfigs only sets values; {op.name} of {name!r} needs "
                             "incremental_alter_configs")
        if op is AlterConfigOp.DELETE:
            value = None
        if not isinstance(name, str) or not (value is None or isinstance(value, str)):
            raise TypeError(f"{resource!r}: {name!r} -> {value!r}: names and values must be str")
        entries.append((name, op, value))
    return entries
