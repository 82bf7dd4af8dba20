"""kafka-python 3.x's KafkaAdminClient, on fastmq's Admin.

The constructor takes kafka-python 3.0's keywords (an unknown one raises KafkaConfigurationError, as there)
and connects at once (KafkaTimeoutError after bootstrap_timeout_ms without an answer). The methods have
kafka-python's names, arguments and defaults, and return what it returns: dicts shaped like its
`response.to_dict()` (the fields of the API version the broker answered with; zero topic ids as None;
authorized operations as lists of ACL operation names; bytes as text), the processed forms of describe_configs
and friends, TopicPartition / OffsetAndMetadata mappings, and the error classes of fastmq.kafka.errors, which
carry kafka-python's names. Routing, retries and the checks of bad input are Admin's (fastmq.kafka.admin).

Covered: every public method of kafka-python 3.x's KafkaAdminClient (tests/kafka/test_compat_api.py checks
the signatures): topics (create, delete, list, describe, describe_topic_partitions, wait_for_topics),
create_partitions, delete_records, list_partition_offsets, describe_cluster, api_versions,
get_broker_version_data, describe_features, update_features, describe_log_dirs, alter_replica_log_dirs,
describe_metadata_quorum, list and alter_partition_reassignments, elect_leaders, list_config_resources,
configurations (describe, alter, reset), groups (list, describe, delete, remove_group_members) and their offsets
(list, alter, reset, delete), transactions (list, describe, abort_transaction, find_hanging_transactions),
producers (describe), ACLs (compat_admin_security: describe, create, delete) and SCRAM credentials (describe,
alter).

describe_groups decodes members' metadata and assignment as consumer-protocol dicts, as kafka-python does.
kafka-python's own TopicPartition, ConfigResource, NewTopic and NewPartitions are taken (compat_types).

Deliberate differences: unknown bits of an authorized-operations field are skipped (kafka-python fails
on them); describe_groups always asks for authorized operations, as kafka-python does; a single str where a
list is expected raises TypeError instead of being taken letter by letter.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from enum import IntEnum
from typing import Any, Iterable, Iterator, Mapping, cast

import fastmq
from fastmq.closeable import Closeable
from fastmq.errors import CorruptDataError
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.admin import (
    AUTHORIZED_OPERATIONS_OMITTED, Admin, AlterConfigOp, ConfigResource, ConfigResourceType, ConfigSourceType,
    ConfigType, NewPartitions, NewTopic, enum_member, group_offsets, raise_failures,
)
from fastmq.kafka.compat_admin_types import (
    BrokerVersionData, MemberToRemove, OffsetTimestamp, PartitionProducerState, ProducerState, TransactionDescription,
    TransactionListing, TransactionState,
)
from fastmq.kafka.admin_replicas import AbortTransactionSpec, UpdateFeatureType
from fastmq.kafka.admin_security_types import (
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourcePatternFilter,
    ResourceType, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion,
)
from fastmq.kafka.compat_admin_replicas import ReplicaMethods
from fastmq.kafka.compat_admin_security import SecurityMethods
from fastmq.kafka.compat_config import CONNECTION_DEFAULTS, client_options, resolve
from fastmq.kafka.consumer_protocol import decode_assignment_message, decode_subscription_message
from fastmq.kafka.coordinator import TRANSACTION
from fastmq.kafka.compat_types import by_topic_partition, config_resource, new_partitions, new_topic, offsets_to_commit
from fastmq.kafka.compat_types import topic_partitions as _as_topic_partitions
from fastmq.kafka.structs import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = [
    "ACL", "ACLFilter", "ACLOperation", "ACLPermissionType", "ACLResourcePatternType", "AbortTransactionSpec",
    "ResourcePattern", "ResourcePatternFilter", "ResourceType", "ScramMechanism", "UpdateFeatureType",
    "UserScramCredentialDeletion", "UserScramCredentialUpsertion",
    "AlterConfigOp", "ConfigFilterType", "ConfigResource", "ConfigResourceType", "ConfigSourceType", "ConfigType",
    "IsolationLevel", "KafkaAdminClient", "MemberToRemove", "NewPartitions", "NewTopic", "OffsetSpec",
    "OffsetTimestamp", "PartitionProducerState", "ProducerState", "TransactionDescription", "TransactionListing",
    "TransactionState",
]

_log = logging.getLogger(__name__)


class ConfigFilterType(IntEnum):
    """Which configurations describe_configs returns: MODIFIED (the default) only those set explicitly,
    DYNAMIC those alter_configs may change, DEFAULT the defaults, STATIC static broker settings, ALL every one."""

    ALL = 0
    DYNAMIC = 1
    MODIFIED = 2
    DEFAULT = 3
    STATIC = 4

    def skips(self, source: ConfigSourceType | int, read_only: bool) -> bool:
        modified = isinstance(source, ConfigSourceType) and source.is_modified()
        if self is ConfigFilterType.DYNAMIC:
            return read_only
        if self is ConfigFilterType.MODIFIED:
            return not modified
        if self is ConfigFilterType.DEFAULT:
            return modified
        if self is ConfigFilterType.STATIC:
            return source != ConfigSourceType.STATIC_BROKER_CONFIG
        return False


class IsolationLevel(IntEnum):
    """Which records offset lookups see: all, or only those of committed transactions (kafka.IsolationLevel)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class OffsetSpec(IntEnum):
    """ListOffsets' special timestamps (kafka.OffsetSpec); a timestamp >= 0 asks for the first offset at or
    after it."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5



# Kafka's ACL operations, bit n of an authorized-operations field (kafka-python's ACLOperation names).
_ACL_OPERATIONS = {3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
                   10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS",
                   14: "DESCRIBE_TOKENS"}
# Partition errors after which kafka-python asks the partition's new leader again.
_LEADER_MOVED = (kerrors.NotLeaderForPartitionError.errno, kerrors.LeaderNotAvailableError.errno)
# kafka-python's GroupState names -> the broker's spelling.
_GROUP_STATES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCE": "PreparingRebalance",
                 "COMPLETING_REBALANCE": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty",
                 "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}
_GROUP_TYPES = {"UNKNOWN": "Unknown", "CLASSIC": "classic", "CONSUMER": "consumer", "SHARE": "share"}

# kafka-python 3.0's KafkaAdminClient settings and defaults: exactly the connection settings all its clients
# share (compat_config), the ones without a fastmq counterpart accepted with no effect or refused when set.
DEFAULT_CONFIG: dict[str, Any] = dict(CONNECTION_DEFAULTS)



def acl_operation_names(bitfield: int) -> list[str] | None:
    """An authorized-operations bitfield as ACL operation names; None when the broker gave none."""
    if bitfield == AUTHORIZED_OPERATIONS_OMITTED:
        return None
    return [name for bit, name in sorted(_ACL_OPERATIONS.items()) if bitfield & (1 << bit)]


def to_dict(struct: Any, version: int) -> dict[str, Any]:
    """A message struct as kafka-python's to_dict() shows it: the fields of `version` only, uuids as text
    (the zero uuid as None), bytes as text, authorized-operations fields as `authorized_operations` names."""
    out: dict[str, Any] = {}
    for fs in type(struct)._schema.fields:
        if version not in fs.versions:
            continue
        value = getattr(struct, fs.name)
        if fs.name.endswith("authorized_operations"):
            out["authorized_operations"] = acl_operation_names(value)
        elif fs.struct is not None:
            if value is None:
                out[fs.name] = None
            elif fs.is_array:
                out[fs.name] = [to_dict(item, version) for item in value]
            else:
                out[fs.name] = to_dict(value, version)
        elif fs.is_array and value is not None:
            out[fs.name] = [_json_value(fs.type, item) for item in value]
        else:
            out[fs.name] = _json_value(fs.type, value)
    return out


def _json_value(type_name: str, value: Any) -> Any:
    if value is None:
        return None
    if type_name == "uuid":
        return str(value) if value.int else None
    if type_name == "bytes":
        return bytes(value).decode("utf-8", "backslashreplace")
    return value


def _process_config(config: dict[str, Any], resource_type: ConfigResourceType) -> str:
    """kafka-python's form of a config dict (in place): its name popped and returned, sources and types as
    names."""
    name: str = config.pop("name")
    config["config_source"] = _config_source(config, resource_type).name
    for synonym in config.get("synonyms") or ():
        synonym["source"] = enum_member(ConfigSourceType, synonym["source"], "source").name
    if "config_type" in config:
        config["config_type"] = enum_member(ConfigType, config["config_type"], "config_type").name
    return name


def _config_source(config: dict[str, Any], resource_type: ConfigResourceType) -> ConfigSourceType:
    if "config_source" in config:
        return enum_member(ConfigSourceType, config["config_source"], "config_source")
    if config["read_only"] and resource_type is ConfigResourceType.BROKER:
        return ConfigSourceType.STATIC_BROKER_CONFIG
    if config.get("is_default", False):
        return ConfigSourceType.DEFAULT_CONFIG
    return ConfigSourceType.dynamic_for(resource_type)


def _decode_member(group_id: str, member: dict[str, Any], struct: Any) -> None:
    """A DescribeGroups member's metadata and assignment decoded as consumer-protocol dicts, as kafka-python
    shows them (left as text, with a warning, when they are not the consumer protocol's)."""
    for key, decode in (("member_metadata", decode_subscription_message),
                        ("member_assignment", decode_assignment_message)):
        data = getattr(struct, key)
        if not data:
            continue
        try:
            version, message = decode(data)
        except CorruptDataError:
            _log.warning("Unable to decode %s for %s/%s", key, group_id, member.get("member_id"))
            continue
        member[key] = to_dict(message, version)


def _new_topics(new_topics: Any) -> list[NewTopic]:
    if isinstance(new_topics, str):
        raise TypeError("new_topics must be a list of names, a list of NewTopic or a dict, not one str")
    if isinstance(new_topics, Mapping):
        return [NewTopic(name, data.get("num_partitions", -1), data.get("replication_factor", -1),
                         dict(data.get("assignments", {})), dict(data.get("configs", {})))
                for name, data in new_topics.items()]
    new_topics = list(new_topics)
    topics: list[NewTopic] = []
    if all(isinstance(t, str) for t in new_topics):
        topics = [NewTopic(name) for name in new_topics]
    elif all(hasattr(t, "name") and hasattr(t, "num_partitions") for t in new_topics):
        topics = [new_topic(t) for t in new_topics]     # fastmq's NewTopic or kafka-python's
    if not topics:
        raise ValueError(f"No valid topics found in new_topics: {new_topics}")
    return topics


def _new_partitions(spec: Any) -> NewPartitions | int:
    if isinstance(spec, Mapping):
        return NewPartitions(spec["count"], [list(b) for b in spec["assignments"]] if "assignments" in spec else None)
    return spec if isinstance(spec, int) else new_partitions(spec)


def _partition_answers(outcomes: list[Any]) -> Iterator[tuple[TopicPartition, Any]]:
    """(TopicPartition, partition struct) of every partition the replies answer (responses whose `topics` have
    `name` and `partitions` with `partition_index`); a request that failed raises its error."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        for topic in outcome.response.topics:
            for p in topic.partitions:
                yield TopicPartition(topic.name, p.partition_index), p


def _state_name(value: Any, names: dict[str, str], what: str) -> str:
    text = getattr(value, "value", value)
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, not {value!r}")
    return names.get(text.upper().replace("-", "_"), text)


class KafkaAdminClient(SecurityMethods, ReplicaMethods, Closeable):
    """kafka-python 3.x's admin client (see the module docstring); a context manager."""

    DEFAULT_CONFIG = DEFAULT_CONFIG

    def __init__(self, **configs: Any) -> None:
        self.config = resolve(configs, self.DEFAULT_CONFIG, kind="admin",
                              unknown_error=kerrors.KafkaConfigurationError)
        self._closed = True
        self._admin = Admin(**client_options(self.config))
        self._closed = False
        try:
            self._admin.client.bootstrap(self.config["bootstrap_timeout_ms"] / 1000.0)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the connections to the brokers."""
        if self._closed:
            _log.info("KafkaAdminClient already closed.")
            return
        self._closed = True
        self._admin.close()

    def _deadline(self, timeout_ms: float | None) -> float:
        return self._admin._deadline((timeout_ms or self.config["request_timeout_ms"]) / 1000.0)

    # ---- topics -----------------------------------------------------------------------------------------

    def list_topics(self) -> list[str]:
        """The names of every topic in the cluster."""
        response = self._admin._metadata(None, self._deadline(None)).response
        return [t.name for t in response.topics]

    def describe_topics(self, topics: list[Any] | None = None) -> list[dict[str, Any]]:
        """Metadata of the topics (names or uuid.UUID topic ids; None: all), unknown ones with their error code."""
        if isinstance(topics, str):
            raise TypeError("topics must be a list of names, not one str")
        reply = self._admin._metadata(None if topics is None else list(topics), self._deadline(None),
                                      authorized=True)
        return [to_dict(t, reply.version) for t in reply.response.topics]

    def create_topics(self, new_topics: Any, timeout_ms: float | None = None, validate_only: bool = False,
                      raise_errors: bool = True, wait_for_metadata: bool = False) -> dict[str, Any]:
        """Create topics from names, {name: {num_partitions, replication_factor, assignments, configs}} or
        NewTopic objects; returns the CreateTopics response as a dict."""
        if validate_only and wait_for_metadata:
            raise ValueError("validate_only and wait_for_metadata are mutually exclusive")
        topics = _new_topics(new_topics)
        answers = self._admin._create_topics(topics, self._deadline(timeout_ms), validate_only)
        if raise_errors:
            raise_failures("create_topics", {
                name: kerrors.for_code(a.code)(f"topic {name!r}: {a.message}") if a.code else None
                for name, a in answers.items()})
        if wait_for_metadata:
            self.wait_for_topics([t.name for t in topics])
        result = []
        for answer in answers.values():
            if answer.struct is None:
                continue
            topic = to_dict(answer.struct, answer.version)
            configs = topic.pop("configs", None)
            if configs:
                topic["configs"] = {_process_config(c, ConfigResourceType.TOPIC): c for c in configs}
            result.append(topic)
        return {"topics": result}

    def wait_for_topics(self, topic_names: Iterable[str], timeout_ms: float = 10000) -> None:
        """Block until each topic is in the metadata with a leader for every partition."""
        self._admin.wait_for_topics(list(topic_names), timeout_ms / 1000.0)

    def delete_topics(self, topics: list[Any], timeout_ms: float | None = None,
                      raise_errors: bool = True) -> dict[str, Any]:
        """Delete topics (names or uuid.UUID ids); returns the DeleteTopics response as a dict."""
        answers = self._admin._delete_topics(topics, self._deadline(timeout_ms))
        if raise_errors:
            raise_failures("delete_topics", {
                key: kerrors.for_code(a.code)(f"topic {key}: {a.message}") if a.code else None
                for key, a in answers.items()})
        return {"topics": [to_dict(a.struct, a.version) for a in answers.values() if a.struct is not None]}

    def create_partitions(self, topic_partitions: Mapping[str, Any], timeout_ms: float | None = None,
                          validate_only: bool = False, raise_errors: bool = True) -> Any:
        """Raise partition counts: {topic: total count, {count, assignments} or NewPartitions}; returns the
        CreatePartitionsResponse."""
        specs = {name: _new_partitions(spec) for name, spec in topic_partitions.items()}
        answers = self._admin._create_partitions(specs, self._deadline(timeout_ms), validate_only)
        if raise_errors:
            raise_failures("create_partitions", {
                name: kerrors.for_code(a.code)(f"topic {name!r}: {a.message}") if a.code else None
                for name, a in answers.items()})
        return kp.CreatePartitionsResponse(throttle_time_ms=0, results=[
            a.struct for a in answers.values() if a.struct is not None])

    def delete_records(self, records_to_delete: Mapping[TopicPartition, int], timeout_ms: float | None = None,
                       partition_leader_id: int | None = None) -> dict[TopicPartition, dict[str, Any]]:
        """Delete the records below the given offsets; {TopicPartition: {partition_index, low_watermark,
        error_code}}. Partitions whose leader moved are retried unless partition_leader_id is given."""
        answers = self._admin._delete_records(by_topic_partition(records_to_delete), self._deadline(timeout_ms),
                                              partition_leader_id)
        failed = {tp: a.code for tp, a in answers.items() if a.code or a.struct is None}
        if len(failed) == 1:
            (tp, code), = failed.items()
            raise (kerrors.for_code(code) if code else kerrors.UnknownError)(
                f"Error deleting records from topic {tp.topic} partition {tp.partition}")
        if failed:
            raise kerrors.BrokerResponseError(
                "The following errors occured when trying to delete records: " + ", ".join(
                    f"{tp.topic}(partition={tp.partition}): {kerrors.for_code(code).__name__}"
                    for tp, code in failed.items()))
        return {tp: to_dict(a.struct, a.version) for tp, a in answers.items()}

    def list_partition_offsets(self, topic_partition_specs: Mapping[Any, int],
                               isolation_level: IsolationLevel | str | int = IsolationLevel.READ_UNCOMMITTED,
                               timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp]:
        """{TopicPartition: OffsetAndTimestamp} for {TopicPartition: OffsetSpec or a timestamp in ms}, asked of
        each partition's leader; partitions whose leader moved are asked again until timeout_ms. Raises the
        first partition error (UnknownTopicOrPartitionError for partitions the cluster lacks)."""
        if not isinstance(topic_partition_specs, Mapping):
            raise TypeError("topic_partition_specs must map TopicPartition to an OffsetSpec or a timestamp")
        specs = by_topic_partition(topic_partition_specs)
        for tp, spec in specs.items():
            if not isinstance(spec, int) or isinstance(spec, bool):
                raise TypeError(f"Unsupported ts type {type(spec)}, expected int or OffsetSpec")
        level = enum_member(IsolationLevel, isolation_level, "isolation_level")
        deadline = self._deadline(timeout_ms)
        L = kp.ListOffsetsRequest
        results: dict[TopicPartition, OffsetAndTimestamp] = {}
        pending = set(specs)
        attempts = 0
        while pending:
            attempts += 1
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp, leader in self._admin._leaders(pending, deadline).items():
                if leader >= 0:
                    by_node[leader].append(tp)
            requests = []
            for node, partitions in by_node.items():
                topics: dict[str, list[Any]] = defaultdict(list)
                for tp in partitions:
                    topics[tp.topic].append(L.ListOffsetsPartition(partition_index=tp.partition, timestamp=specs[tp]))
                requests.append((node, L(replica_id=-1, isolation_level=int(level), topics=[
                    L.ListOffsetsTopic(name=name, partitions=parts) for name, parts in topics.items()])))
            for tp, p in _partition_answers(self._admin._send_many(requests, deadline)):
                if p.error_code in _LEADER_MOVED:
                    continue
                if p.error_code:
                    error = kerrors.for_code(p.error_code)
                    raise error(f"ListOffsetsRequest failed for {tp}: {error.__name__}")
                results[tp] = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch if p.leader_epoch >= 0 else None)
                pending.discard(tp)
            if pending:
                delay = self._admin._retry_delay(kerrors.NotLeaderForPartitionError, attempts, deadline)
                if delay is None:
                    raise kerrors.NotLeaderForPartitionError(
                        f"list_partition_offsets timed out waiting for the leaders of {sorted(pending)}")
                time.sleep(delay)
        return results

    # ---- cluster ----------------------------------------------------------------------------------------

    def describe_cluster(self) -> dict[str, Any]:
        """Cluster id, controller id, brokers and the cluster's authorized operations."""
        reply, from_metadata = self._admin._describe_cluster(self._deadline(None), authorized=True)
        metadata = to_dict(reply.response, reply.version)
        if from_metadata:
            metadata.pop("topics", None)
            for broker in metadata["brokers"]:
                broker["broker_id"] = broker.pop("node_id")
        else:
            for key in ("error_code", "error_message", "endpoint_type"):
                metadata.pop(key, None)
        metadata.pop("throttle_time_ms", None)
        return metadata

    def _api_versions(self, node_id: int | None) -> Any:
        response = self._admin._send(node_id, kp.ApiVersionsRequest(
            client_software_name="fastmq", client_software_version=fastmq.__version__), self._deadline(None)).response
        if response.error_code:
            raise kerrors.for_code(response.error_code)(f"ApiVersionsRequest failed: {response!r}")
        return response

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """{API key: (min version, max version)} of a broker of the cluster."""
        return {k.api_key: (k.min_version, k.max_version) for k in self._api_versions(None).api_keys}

    def get_broker_version_data(self, broker_id: int) -> BrokerVersionData:
        """The API version ranges of one broker (BrokerNotAvailableError if the cluster has no such broker)."""
        self._admin._check_brokers([broker_id], self._deadline(None))
        response = self._api_versions(broker_id)
        return BrokerVersionData({k.api_key: (k.min_version, k.max_version) for k in response.api_keys})

    def describe_features(self, send_request_to_controller: bool = False) -> dict[str, dict[str, Any]]:
        """{feature name: {"supported": (min, max), "finalized": (min level, max level), "finalized_epoch":
        epoch or None}} from a broker (or the controller): the cluster's feature flags (Kafka 2.4+)."""
        node = self._admin._controller(self._deadline(None)) if send_request_to_controller else None
        response = self._api_versions(node)
        epoch = response.finalized_features_epoch if response.finalized_features_epoch >= 0 else None
        features: dict[str, dict[str, Any]] = defaultdict(dict)
        for feature in response.supported_features or ():
            features[feature.name]["supported"] = (feature.min_version, feature.max_version)
        for feature in response.finalized_features or ():
            features[feature.name]["finalized"] = (feature.min_version_level, feature.max_version_level)
            features[feature.name]["finalized_epoch"] = epoch
        return dict(features)

    def _partitions_by_topic(self, topic_partitions: Any) -> list[tuple[str, list[int]]]:
        """kafka-python's partition selections: {topic: [partitions]}, or every partition of a list of topics
        (None: of all topics)."""
        if isinstance(topic_partitions, Mapping):
            return [(topic, list(partitions)) for topic, partitions in topic_partitions.items()]
        return [(t["name"], [p["partition_index"] for p in t["partitions"]])
                for t in self.describe_topics(topic_partitions)]

    def elect_leaders(self, election_type: int, topic_partitions: Any = None, timeout_ms: float | None = None,
                      raise_errors: bool = True) -> Any:
        """Elect leaders (election_type 0: preferred, 1: unclean) of {topic: [partitions]}, every partition of
        a list of topics, or of all topics (None); returns the ElectLeadersResponse. With raise_errors the
        first error other than ElectionNotNeededError is raised."""
        if election_type not in (0, 1):
            raise ValueError(f"election_type must be 0 (preferred) or 1 (unclean), not {election_type!r}")
        deadline = self._deadline(timeout_ms)
        E = kp.ElectLeadersRequest
        request = E(election_type=int(election_type), timeout_ms=self._admin._timeout_ms(deadline),
                    topic_partitions=[E.TopicPartitions(topic=topic, partitions=partitions)
                                      for topic, partitions in self._partitions_by_topic(topic_partitions)])
        reply = self._admin._send(self._admin._controller(deadline), request, deadline)
        response = reply.response
        if raise_errors:
            codes = [response.error_code] if reply.version >= 1 else []
            codes += [p.error_code for result in response.replica_election_results for p in result.partition_result]
            for code in codes:
                if code and code != kerrors.ElectionNotNeededError.errno:
                    raise kerrors.for_code(code)("ElectLeadersRequest failed")
        return response

    def describe_log_dirs(self, topic_partitions: Any = None, brokers: list[int] | None = None) -> list[dict[str, Any]]:
        """[{"broker": id, "log_dirs": [DescribeLogDirs result dicts]}] for each broker (None: all); for the
        partitions {topic: [partitions]}, or every partition of a list of topics (None: of all topics)."""
        deadline = self._deadline(None)
        D = kp.DescribeLogDirsRequest
        request = D(topics=[D.DescribableLogDirTopic(topic=topic, partitions=partitions)
                            for topic, partitions in self._partitions_by_topic(topic_partitions)])
        nodes = self._admin._brokers(deadline) if brokers is None else list(brokers)
        results = []
        for node, outcome in zip(nodes, self._admin._send_many([(node, request) for node in nodes], deadline)):
            if isinstance(outcome, BaseException):
                raise outcome
            results.append({"broker": node, "log_dirs": [to_dict(r, outcome.version) for r in outcome.response.results]})
        return results

    def list_partition_reassignments(self, topic_partitions: Any = None,
                                     timeout_ms: float | None = None) -> dict[TopicPartition, dict[str, list[int]]]:
        """{TopicPartition: {replicas, adding_replicas, removing_replicas}} of the reassignments under way, for
        {topic: [partitions]}, a list of TopicPartition, or None (all)."""
        deadline = self._deadline(timeout_ms)
        R = kp.ListPartitionReassignmentsRequest
        topics = None
        if isinstance(topic_partitions, Mapping):
            topics = [R.ListPartitionReassignmentsTopics(name=topic, partition_indexes=list(partitions))
                      for topic, partitions in topic_partitions.items()]
        elif topic_partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in _as_topic_partitions(topic_partitions):
                by_topic[tp.topic].append(tp.partition)
            topics = [R.ListPartitionReassignmentsTopics(name=topic, partition_indexes=partitions)
                      for topic, partitions in by_topic.items()]
        request = R(timeout_ms=self._admin._timeout_ms(deadline), topics=topics)
        response = self._admin._send(self._admin._controller(deadline), request, deadline).response
        if response.error_code:
            raise kerrors.for_code(response.error_code)(response.error_message or "")
        return {TopicPartition(topic.name, p.partition_index): {
                    "replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
                    "removing_replicas": list(p.removing_replicas)}
                for topic in response.topics for p in topic.partitions}

    def describe_metadata_quorum(self) -> dict[str, Any]:
        """The KRaft quorum of the cluster metadata log (__cluster_metadata, partition 0): leader, epoch, high
        watermark, voters and observers (and, from Kafka 3.8, the controllers' endpoints), each partition with
        "error" (None or the error's text). Needs a KRaft cluster."""
        deadline = self._deadline(None)
        Q = kp.DescribeQuorumRequest
        request = Q(topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[Q.PartitionData(
            partition_index=0)])])
        reply = self._admin._send(None, request, deadline)
        if reply.response.error_code:
            raise kerrors.for_code(reply.response.error_code)(reply.response.error_message or "")
        result = to_dict(reply.response, reply.version)
        for key in ("throttle_time_ms", "error_code", "error_message"):
            result.pop(key, None)
        for topic in result["topics"]:
            for partition in topic["partitions"]:
                code, message = partition.pop("error_code"), partition.pop("error_message", None)
                partition["error"] = str(kerrors.for_code(code)(message)) if code else None
        return result

    # ---- configurations -----------------------------------------------------------------------------------

    def describe_configs(self, config_resources: list[ConfigResource], include_synonyms: bool = False,
                         config_filter: ConfigFilterType | str = "modified") -> dict[str, dict[str, Any]]:
        """{resource type: {resource name: {config name: config dict}}}, filtered by config_filter."""
        return self._describe_configs([config_resource(r) for r in config_resources], include_synonyms, config_filter,
                                      self._deadline(None))

    def _describe_configs(self, config_resources: list[ConfigResource], include_synonyms: bool,
                          config_filter: Any, deadline: float) -> dict[str, dict[str, Any]]:
        config_filter = enum_member(ConfigFilterType, config_filter, "config_filter")
        answers = self._admin._describe_configs(config_resources, deadline, include_synonyms, False)
        described: dict[str, dict[str, Any]] = defaultdict(dict)
        for (resource_type, name), answer in answers.items():
            if answer.struct is None:
                continue
            resource_configs = {}
            for struct in answer.struct.configs:
                config = to_dict(struct, answer.version)
                key = _process_config(config, resource_type)
                source = ConfigSourceType[config["config_source"]]
                if not config_filter.skips(source, config["read_only"]):
                    resource_configs[key] = config
            described[resource_type.name.lower()][name] = resource_configs
        return dict(described)

    def _current(self, resources: list[ConfigResource], config_filter: str,
                 deadline: float) -> list[dict[str, Any]]:
        lookups = [ConfigResource(r.resource_type, r.name) for r in resources]
        described = self._describe_configs(lookups, False, config_filter, deadline)
        return [described.get(r.resource_type.name.lower(), {}).get(r.name, {}) for r in resources]

    def _missing_modified(self, resources: list[ConfigResource], deadline: float) -> list[dict[str, str]]:
        """Per resource, the modified keys (and values) that its configs leave out."""
        return [{key: config["value"] for key, config in current.items()
                 if key not in (r.configs or {}) and config["value"] is not None}
                for r, current in zip(resources, self._current(resources, "modified", deadline))]

    def _check_known(self, resources: list[ConfigResource], deadline: float) -> None:
        for r, dynamic in zip(resources, self._current(resources, "dynamic", deadline)):
            unknown = set(r.configs or []) - set(dynamic)
            if unknown:
                raise ValueError(f"Unrecognized configs: {unknown}")

    def _send_alter(self, resources: list[ConfigResource], validate_only: bool, incremental: bool,
                    deadline: float) -> dict[str, dict[str, str]]:
        answers = self._admin._alter_configs(resources, deadline, validate_only, incremental)
        results: dict[str, dict[str, str]] = defaultdict(dict)
        for (resource_type, name), answer in answers.items():
            if answer.struct is None:
                outcome = str(kerrors.UnknownError(f"the broker did not answer for {name!r}"))
            elif answer.code:
                outcome = str(kerrors.for_code(answer.code)(answer.message))
            else:
                outcome = "OK"
            results[resource_type.name.lower()][name] = outcome
        return dict(results)

    def _alter(self, resources: list[ConfigResource], validate_only: bool, incremental: bool | None,
               deadline: float, reset: bool) -> dict[str, dict[str, str]]:
        # IncrementalAlterConfigs unless told otherwise; a broker without it is known before anything is sent.
        if incremental is not False:
            try:
                return self._send_alter(self._incremental_form(resources, reset, deadline), validate_only, True,
                                        deadline)
            except kerrors.IncompatibleBrokerVersion:
                if incremental:
                    raise
        return self._send_alter(self._full_form(resources, reset, deadline), validate_only, False, deadline)

    def _incremental_form(self, resources: list[ConfigResource], reset: bool,
                          deadline: float) -> list[ConfigResource]:
        if not reset:
            return resources
        # Keys to reset become DELETE operations; a resource without keys resets every modified one.
        full = [r for r in resources if not r.configs]
        modified = dict(zip(map(id, full), self._missing_modified(full, deadline)))
        return [ConfigResource(r.resource_type, r.name,
                               {key: (AlterConfigOp.DELETE, None) for key in (r.configs or modified[id(r)])})
                for r in resources]

    def _full_form(self, resources: list[ConfigResource], reset: bool, deadline: float) -> list[ConfigResource]:
        # AlterConfigs returns every key it does not name to its default.
        if reset:
            # Name the modified keys that are to stay; a resource without keys is reset whole.
            partial = [r for r in resources if r.configs]
            keep = dict(zip(map(id, partial), self._missing_modified(partial, deadline)))
            return [ConfigResource(r.resource_type, r.name, keep[id(r)]) if r.configs else r for r in resources]
        missing = self._missing_modified(resources, deadline)
        # Resources to alter carry {key: value} mappings (the iterable form is describe's).
        return [ConfigResource(r.resource_type, r.name, {**extra, **cast(Mapping[str, Any], r.configs or {})})
                for r, extra in zip(resources, missing)]

    def alter_configs(self, config_resources: list[ConfigResource], validate_only: bool = False,
                      raise_on_unknown: bool = True, incremental: bool | None = None) -> dict[str, dict[str, str]]:
        """Alter configurations ({key: value} or {key: (op, value)} per resource); IncrementalAlterConfigs
        when the broker has it (or incremental=True), else AlterConfigs with the other modified keys kept.
        Returns {resource type: {resource name: 'OK' or the error}}."""
        deadline = self._deadline(None)
        resources = [config_resource(r) for r in config_resources]
        if raise_on_unknown:
            self._check_known(resources, deadline)
        return self._alter(resources, validate_only, incremental, deadline, reset=False)

    def reset_configs(self, config_resources: list[ConfigResource], validate_only: bool = False,
                      raise_on_unknown: bool = True, incremental: bool | None = None) -> dict[str, dict[str, str]]:
        """Return the listed keys (every modified key when a resource lists none) to their defaults."""
        deadline = self._deadline(None)
        resources = [config_resource(r) for r in config_resources]
        if raise_on_unknown:
            self._check_known(resources, deadline)
        return self._alter(resources, validate_only, incremental, deadline, reset=True)

    def list_config_resources(self, resource_types: list[Any] | None = None) -> dict[str, list[str]]:
        """{resource type name: [resource names]} of the resources with configurations, of the given types
        (ConfigResourceType or names; None or empty: every type the broker lists). Kafka 4.1+ for types other
        than CLIENT_METRICS."""
        R = kp.ListConfigResourcesRequest
        request = R(resource_types=[enum_member(ConfigResourceType, t, "resource_type").value
                                    for t in resource_types or ()])
        response = self._admin._send(None, request, self._deadline(None)).response
        if response.error_code:
            raise kerrors.for_code(response.error_code)(f"ListConfigResourcesRequest failed with {response!r}")
        listed: dict[str, list[str]] = defaultdict(list)
        for resource in response.config_resources:
            listed[enum_member(ConfigResourceType, resource.resource_type, "resource_type").name.lower()].append(
                resource.resource_name)
        return dict(listed)

    # ---- groups -------------------------------------------------------------------------------------------

    def list_groups(self, broker_ids: list[int] | None = None, states_filter: list[Any] | None = None,
                    types_filter: list[Any] | None = None) -> list[dict[str, Any]]:
        """Every group of the given brokers (None: all brokers), as ListGroups dicts."""
        states = None if not states_filter else [_state_name(s, _GROUP_STATES, "a state") for s in states_filter]
        types = None if not types_filter else [_state_name(t, _GROUP_TYPES, "a type") for t in types_filter]
        replies = self._admin._list_groups(broker_ids, states, types, self._deadline(None))
        return [to_dict(g, reply.version) for reply in replies for g in reply.response.groups]

    def describe_groups(self, group_ids: list[str], group_coordinator_id: int | None = None,
                        include_authorized_operations: bool = False) -> dict[str, dict[str, Any]]:
        """{group_id: DescribeGroups dict, with 'error' (None or the error's text)}."""
        answers = self._admin._describe_groups(group_ids, self._deadline(None), True, group_coordinator_id)
        results = {}
        for group_id, answer in answers.items():
            if answer.struct is None:
                error = kerrors.for_code(answer.code or kerrors.UnknownError.errno)(answer.message or "")
                results[group_id] = {"group_id": group_id, "error": str(error)}
                continue
            group = to_dict(answer.struct, answer.version)
            for member, struct in zip(group.get("members") or (), answer.struct.members or ()):
                _decode_member(group_id, member, struct)
            code = group.pop("error_code")
            message = group.pop("error_message", "")
            group["error"] = str(kerrors.for_code(code)(message)) if code else None
            results[group_id] = group
        return results

    def list_group_offsets(self, group_specs: Any) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Committed offsets: group_specs is a group id, a list of them, or {group_id: [TopicPartition] or
        None (all)}; returns {group_id: {TopicPartition: OffsetAndMetadata}}."""
        if isinstance(group_specs, str):
            group_specs = {group_specs: None}
        elif isinstance(group_specs, list):
            group_specs = {group_id: None for group_id in group_specs}
        answers = self._admin._fetch_group_offsets(
            {g: None if tps is None else _as_topic_partitions(tps) for g, tps in group_specs.items()}, self._deadline(None))
        return {group_id: group_offsets(group_id, answer) for group_id, answer in answers.items()}

    def delete_groups(self, group_ids: list[str], group_coordinator_id: int | None = None) -> dict[str, str]:
        """{group_id: 'OK' or the error class's name}."""
        answers = self._admin._delete_groups(group_ids, self._deadline(None), group_coordinator_id)
        return {group_id: "OK" if not a.code and a.struct is not None
                else kerrors.for_code(a.code or kerrors.UnknownError.errno).__name__
                for group_id, a in answers.items()}

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                             group_coordinator_id: int | None = None) -> dict[TopicPartition, type]:
        """{TopicPartition: error class (NoError on success)}; a group-level error raises."""
        partitions = _as_topic_partitions(partitions)
        if not partitions:
            return {}
        answer = self._admin._delete_group_offsets(group_id, partitions, self._deadline(None), group_coordinator_id)
        if answer.code or answer.struct is None:
            raise kerrors.for_code(answer.code or kerrors.UnknownError.errno)(
                f"OffsetDeleteRequest failed for group {group_id!r}: {answer.message or ''}")
        return {TopicPartition(topic.name, p.partition_index): kerrors.for_code(p.error_code)
                for topic in answer.struct.topics for p in topic.partitions}

    def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, Any],
                            group_coordinator_id: int | None = None) -> dict[TopicPartition, type]:
        """Commit {TopicPartition: OffsetAndMetadata} for a group without active members; {TopicPartition:
        error class (NoError on success)}."""
        offsets = offsets_to_commit(offsets)
        if not offsets:
            return {}
        codes = self._admin._commit_group_offsets(group_id, offsets, self._deadline(None), group_coordinator_id)
        return {tp: kerrors.for_code(code) for tp, code in codes.items()}

    def reset_group_offsets(self, group_id: str, offset_specs: Mapping[Any, Any],
                            group_coordinator_id: int | None = None) -> dict[TopicPartition, dict[str, Any]]:
        """Commit, for a group without active members, offsets given per partition as an OffsetSpec, an
        OffsetTimestamp (both looked up with ListOffsets) or a plain int offset, each clamped to the
        partition's [earliest, latest] (a timestamp past the last record: latest); committed metadata is
        kept. {TopicPartition: {"error": error class, "offset": the offset committed}}."""
        specs = by_topic_partition(offset_specs)
        if not specs:
            return {}
        explicit = {}
        for tp, spec in specs.items():
            if type(spec) is int:
                explicit[tp] = spec
            elif not isinstance(spec, int) or isinstance(spec, bool):
                raise TypeError(f"Unsupported reset target for {tp}: {spec!r} "
                                "(expected OffsetSpec, OffsetTimestamp, or int offset)")
        partitions = list(specs)
        current = self.list_group_offsets({group_id: partitions})[group_id]
        earliest = self.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in partitions})
        latest = self.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
        looked_up = self.list_partition_offsets({tp: int(s) for tp, s in specs.items() if tp not in explicit})
        targets = {}
        for tp in partitions:
            raw = explicit[tp] if tp in explicit else looked_up[tp].offset
            high, low = latest[tp].offset, earliest[tp].offset
            offset = high if raw < 0 or raw > high else max(raw, low)
            old = current.get(tp)
            targets[tp] = OffsetAndMetadata(offset, old.metadata if old is not None and old.offset >= 0 else "",
                                            old.leader_epoch if old is not None and old.offset >= 0 else None)
        codes = self._admin._commit_group_offsets(group_id, targets, self._deadline(None), group_coordinator_id)
        return {tp: {"error": kerrors.for_code(code), "offset": targets[tp].offset} for tp, code in codes.items()}

    def remove_group_members(self, group_id: str, members: Iterable[Any],
                             group_coordinator_id: int | None = None) -> dict[str, type]:
        """Make members (MemberToRemove, or any object with member_id, group_instance_id and reason) leave
        a group (LeaveGroup v3+, Kafka 2.3+); {member id or group instance id: error class}. A group-level
        error raises."""
        wanted = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in members]
        if not wanted:
            return {}
        answer = self._admin._leave_group(group_id, wanted, self._deadline(None), group_coordinator_id)
        return {m.member_id or m.group_instance_id: kerrors.for_code(m.error_code) for m in answer.struct.members}

    # ---- transactions -------------------------------------------------------------------------------------

    def list_transactions(self, broker_ids: list[int] | None = None, producer_id_filters: list[int] | None = None,
                          state_filters: list[Any] | None = None, duration_filter_ms: int | None = None,
                          transactional_id_pattern: str | None = None) -> dict[int, list[TransactionListing]]:
        """{broker id: [TransactionListing]} of the transactions each broker coordinates (None: all brokers),
        optionally only those of these producer ids, in these states, running longer than duration_filter_ms
        (Kafka 3.8+) or with ids matching transactional_id_pattern (a regular expression; Kafka 4.1+)."""
        deadline = self._deadline(None)
        if broker_ids is None:
            nodes = self._admin._brokers(deadline)
        else:
            nodes = list(broker_ids)
            self._admin._check_brokers(nodes, deadline)
        L = kp.ListTransactionsRequest
        request = L(state_filters=[getattr(s, "value", s) for s in state_filters or ()],
                    producer_id_filters=list(producer_id_filters or ()),
                    duration_filter=-1 if duration_filter_ms is None else int(duration_filter_ms),
                    transactional_id_pattern=transactional_id_pattern)
        needed = 2 if transactional_id_pattern is not None else 1 if duration_filter_ms is not None else 0
        listed = {}
        for node, outcome in zip(nodes, self._admin._send_many([(node, request) for node in nodes], deadline)):
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome.version < needed:
                # The filter would be dropped on the wire: refuse, as kafka-python does.
                raise kerrors.UnsupportedVersionError(
                    f"broker {node} speaks ListTransactions v{outcome.version}; the filter needs v{needed}+")
            response = outcome.response
            if response.error_code:
                raise kerrors.for_code(response.error_code)(f"ListTransactionsRequest failed with {response!r}")
            listed[node] = [TransactionListing(t.transactional_id, t.producer_id, TransactionState.named(
                t.transaction_state)) for t in response.transaction_states]
        return listed

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        """{transactional id: TransactionDescription}, asked of each id's transaction coordinator; a
        transactional id's error (TransactionalIdNotFoundError for an unknown one) raises."""
        ids = list(transactional_ids)
        if not ids:
            return {}
        deadline = self._deadline(None)
        found, failed = self._admin._find_coordinators(ids, deadline, TRANSACTION)
        for txn_id, answer in failed.items():
            raise kerrors.for_code(answer.code or kerrors.UnknownError.errno)(
                f"FindCoordinator failed for transactional id {txn_id!r}: {answer.message or ''}")
        by_node: dict[int, list[str]] = defaultdict(list)
        for txn_id in ids:
            by_node[found[txn_id]].append(txn_id)
        requests = [(node, kp.DescribeTransactionsRequest(transactional_ids=node_ids))
                    for node, node_ids in by_node.items()]
        described = {}
        for (node, _), outcome in zip(requests, self._admin._send_many(requests, deadline)):
            if isinstance(outcome, BaseException):
                raise outcome
            for t in outcome.response.transaction_states:
                if t.error_code:
                    raise kerrors.for_code(t.error_code)(
                        f"DescribeTransactionsRequest failed for transactional id '{t.transactional_id}'.")
                described[t.transactional_id] = TransactionDescription(
                    node, TransactionState.named(t.transaction_state), t.producer_id, t.producer_epoch,
                    t.transaction_timeout_ms, t.transaction_start_time_ms,
                    {TopicPartition(topic.topic, p) for topic in t.topics for p in topic.partitions})
        return described

    def describe_producers(self, partitions: Iterable[Any], broker_id: int | None = None
                           ) -> dict[TopicPartition, PartitionProducerState]:
        """{TopicPartition: PartitionProducerState} of the active producers of each partition, asked of its
        leader (or of broker_id); a partition's error raises."""
        tps = _as_topic_partitions(partitions)
        if not tps:
            return {}
        deadline = self._deadline(None)
        leaders = ({tp: broker_id for tp in tps} if broker_id is not None
                   else self._admin._leaders(tps, deadline))
        by_node: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for tp in tps:
            by_node[leaders[tp]][tp.topic].append(tp.partition)
        D = kp.DescribeProducersRequest
        requests = [(node, D(topics=[D.TopicRequest(name=topic, partition_indexes=indexes)
                                     for topic, indexes in topics.items()]))
                    for node, topics in by_node.items()]
        states = {}
        for tp, p in _partition_answers(self._admin._send_many(requests, deadline)):
            if p.error_code:
                raise kerrors.for_code(p.error_code)(f"DescribeProducersRequest failed for {tp}: {p.error_message}")
            states[tp] = PartitionProducerState([ProducerState(
                s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                s.current_txn_start_offset) for s in p.active_producers])
        return states
