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
Retries wait retry_backoff_ms and stay within the operation's timeout (seconds; request_timeout_ms when None),
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

kafka-python's KafkaAdminClient (fastmq.kafka.compat_admin) is built on this class: it reads the wire-level
answers through the underscore methods below and shapes them as kafka-python does.
"""
from __future__ import annotations

import logging
import re
import time
import uuid
from collections import defaultdict
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import CLIENT_OPTIONS, ClientConfig, KafkaClient
from fastmq.kafka.cluster import BrokerInfo, ClusterMetadata, TopicInfo
from fastmq.kafka.coordinator import GROUP, coordinator_entries, find_coordinator_request
from fastmq.kafka.admin_types import (  # noqa: F401  (the admin's public types are imported from here too)
    ConfigResourceType, AlterConfigOp, ConfigSourceType, ConfigType, enum_member, _enum_or_int, NewTopic,
    NewPartitions, ConfigResource, ClusterDescription, ConfigSynonym, ConfigEntry, CreateTopicResult,
    ResourceConfigs, GroupListing, MemberDescription, GroupDescription, DeleteRecordsResult,
)
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition

_log = logging.getLogger(__name__)

# Kafka's value of an authorized-operations bitfield that was not requested (or that the broker left out).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# Kafka's topic name rules (org.apache.kafka.common.internals.Topic).
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_NAME_LENGTH = 249
_MAX_REPLICATION_FACTOR = 32767  # int16 on the wire
_NOT_CONTROLLER = kerrors.NotControllerError.errno
_COORDINATOR_RETRY_CODES = frozenset({kerrors.CoordinatorLoadInProgressError.errno,
                                      kerrors.CoordinatorNotAvailableError.errno,
                                      kerrors.NotCoordinatorError.errno})
_LEADER_RETRY_CODES = frozenset({kerrors.LeaderNotAvailableError.errno, kerrors.NotLeaderForPartitionError.errno})
# What a request that ran out of the operation's time raises (before sending, or while in flight).
_TIMEOUTS = (kerrors.KafkaTimeoutError, kerrors.RequestTimedOutError)


class _Reply(NamedTuple):
    response: Any
    version: int
    node_id: Any


class _ItemAnswer(NamedTuple):
    """One item's part of a response: its struct (None when the broker did not get to answer) and the
    version of the response it came in."""

    code: int
    message: str | None
    struct: Any
    version: int


def _error(code: int, message: str | None, item: str) -> kerrors.KafkaError | None:
    if not code:
        return None
    return kerrors.for_code(code)(f"{item}: {message}" if message else item)


def _missing(item: str, api: str) -> kerrors.KafkaError:
    return kerrors.UnknownError(f"{item}: the broker's {api} response does not mention it")


def raise_failures(operation: str, results: Mapping[Any, Any]) -> None:
    """Raise the first failed item's error class, listing every failed item; `results` rides along."""
    failed = [(key, getattr(value, "error", value)) for key, value in results.items()]
    failed = [(key, error) for key, error in failed if isinstance(error, BaseException)]
    if not failed:
        return
    details = "; ".join(f"{error.args[0] if error.args else key} ({type(error).__name__})" for key, error in failed)
    error = type(failed[0][1])(f"{operation} failed for {len(failed)} of {len(results)}: {details}")
    error.results = dict(results)  # type: ignore[attr-defined]
    raise error


def _check_unique(items: list[Any], what: str) -> None:
    seen: set[Any] = set()
    duplicates = set()
    for item in items:
        if item in seen:
            duplicates.add(item)
        seen.add(item)
    if duplicates:
        raise kerrors.InvalidRequestError(
            f"{what} named more than once in one request: {sorted(set(map(str, duplicates)))}; a broker "
            "fails every duplicate")


def _check_topic_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"a topic name must be a str, not {type(name).__name__}")
    if (not name or len(name) > _MAX_TOPIC_NAME_LENGTH or name in (".", "..")
            or not _LEGAL_TOPIC_NAME.fullmatch(name)):
        raise kerrors.InvalidTopicError(
            f"topic name {name!r} is illegal: use 1 to {_MAX_TOPIC_NAME_LENGTH} of the characters "
            "a-z A-Z 0-9 . _ - (and not '.' or '..')")


def _check_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def _check_configs(configs: Mapping[str, Any], what: str) -> None:
    if not isinstance(configs, Mapping):
        raise TypeError(f"{what} must be a mapping of names to values, not {type(configs).__name__}")
    for name, value in configs.items():
        if not isinstance(name, str) or not (value is None or isinstance(value, str)):
            raise TypeError(f"{what}: {name!r} -> {value!r}: names and values must be str (values may be None)")


def _topic_partitions(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        if not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str):
            raise TypeError(f"expected TopicPartition(topic, partition), got {tp!r}")
        by_topic[tp[0]].append(_check_int(tp[1], f"the partition of {tp[0]!r}"))
    return by_topic


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
            source = ConfigSourceType.dynamic_for(resource_type)  # type: ignore[arg-type]
    synonyms = tuple(ConfigSynonym(s.name, s.value, _enum_or_int(ConfigSourceType, s.source))
                     for s in getattr(struct, "synonyms", None) or ())
    return ConfigEntry(
        name=struct.name, value=struct.value, source=_enum_or_int(ConfigSourceType, source),
        read_only=struct.read_only, sensitive=struct.is_sensitive, synonyms=synonyms,
        type=_enum_or_int(ConfigType, getattr(struct, "config_type", 0)),
        documentation=getattr(struct, "documentation", None) or None)


def authorized_operations(value: int) -> int | None:
    return None if value == AUTHORIZED_OPERATIONS_OMITTED else value


# ---- the admin client ---------------------------------------------------------------------------------------

class Admin:
    """Administration of a Kafka cluster. Thread-safe; every method blocks until its answers arrived.

    Admin(bootstrap_servers, **options) takes KafkaClient's settings (ClientConfig: security, timeouts,
    retry_backoff_ms, ...); Admin(client=...) shares an existing KafkaClient, which close() leaves open."""

    def __init__(self, bootstrap_servers: str | list[str] = "localhost", *, client: KafkaClient | None = None,
                 **options: Any) -> None:
        if client is None:
            unknown = set(options) - CLIENT_OPTIONS
            if unknown:
                raise kerrors.KafkaConfigurationError(
                    f"unknown options {sorted(unknown)}; Admin takes the KafkaClient settings {sorted(CLIENT_OPTIONS)}")
            # Describing a topic must never create it.
            options.setdefault("allow_auto_create_topics", False)
            client = KafkaClient(ClientConfig(bootstrap_servers=bootstrap_servers, **options), name="fastmq-admin")
            self._own_client = True
        else:
            if options:
                raise kerrors.KafkaConfigurationError(
                    f"options {sorted(options)} belong to the KafkaClient given as client=")
            self._own_client = False
        self._client = client
        self._retry_backoff = client.config.retry_backoff_ms / 1000.0
        self._default_timeout = client.config.request_timeout_ms / 1000.0
        self._controller_id: int | None = None
        self._coordinators: dict[str, int] = {}
        self._closed = False

    @property
    def client(self) -> KafkaClient:
        return self._client

    def close(self, timeout: float = 5.0) -> None:
        """Close the connections (unless the client was given to the constructor); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._own_client:
            self._client.close(timeout)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        while True:
            response = self._metadata(names, deadline).response
            ready = {t.name for t in response.topics
                     if not t.error_code and t.partitions
                     and all(p.leader_id >= 0 and not p.error_code for p in t.partitions)}
            missing = [name for name in names if name not in ready]
            if not missing:
                return
            if not self._can_retry(deadline):
                raise kerrors.KafkaTimeoutError(f"topics not ready within {timeout:.1f} s: {missing}")
            time.sleep(self._retry_backoff)

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

    # ---- consumer groups ------------------------------------------------------------------------------

    def list_groups(self, *, states: Iterable[str] | None = None, types: Iterable[str] | None = None,
                    timeout: float | None = None) -> list[GroupListing]:
        """The groups of every broker, optionally only those in the given states (e.g. "Stable", "Empty";
        Kafka 2.6+) or of the given types ("classic", "consumer"; Kafka 3.8+)."""
        listings = []
        for reply in self._list_groups(None, states, types, self._deadline(timeout)):
            for g in reply.response.groups:
                listings.append(GroupListing(g.group_id, g.protocol_type, g.group_state if reply.version >= 4 else None,
                                             g.group_type if reply.version >= 5 else None))
        return listings

    def describe_groups(self, group_ids: Iterable[str], *, include_authorized_operations: bool = False,
                        timeout: float | None = None, raise_errors: bool = True) -> dict[str, GroupDescription]:
        """State, protocol and members of each group (members' metadata and assignment as raw bytes)."""
        answers = self._describe_groups(group_ids, self._deadline(timeout), include_authorized_operations)
        results = {}
        for group_id, answer in answers.items():
            error = _error(answer.code, answer.message, f"group {group_id!r}")
            g = answer.struct
            if g is None:
                results[group_id] = GroupDescription(group_id, error or _missing(f"group {group_id!r}",
                                                                                 "DescribeGroups"))
                continue
            members = tuple(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                              bytes(m.member_metadata), bytes(m.member_assignment))
                            for m in g.members)
            results[group_id] = GroupDescription(group_id, error, g.group_state, g.protocol_type, g.protocol_data,
                                                 members, authorized_operations(g.authorized_operations))
        if raise_errors:
            raise_failures("describe_groups", results)
        return results

    def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                           require_stable: bool = False,
                           timeout: float | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets: of the given partitions (offset -1 where none is committed) or of
        every partition it committed. Group and partition errors raise."""
        specs = {group_id: None if partitions is None else list(partitions)}
        answer = self._fetch_group_offsets(specs, self._deadline(timeout), require_stable)[group_id]
        return group_offsets(group_id, answer)

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition], *,
                             timeout: float | None = None,
                             raise_errors: bool = True) -> dict[TopicPartition, kerrors.KafkaError | None]:
        """Forget the group's committed offsets of these partitions (Kafka 2.4+; the group must not be
        subscribed to their topics). A group-level error (e.g. GroupIdNotFoundError) always raises."""
        answer = self._delete_group_offsets(group_id, partitions, self._deadline(timeout))
        group_error = _error(answer.code, answer.message, f"group {group_id!r}")
        if group_error is not None:
            raise group_error
        results = {}
        for topic in answer.struct.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                results[tp] = _error(p.error_code, None, f"group {group_id!r} {tp.topic}-{tp.partition}")
        if raise_errors:
            raise_failures("delete_group_offsets", results)
        return results

    def delete_groups(self, group_ids: Iterable[str], *, timeout: float | None = None,
                      raise_errors: bool = True) -> dict[str, kerrors.KafkaError | None]:
        """Delete empty groups with their committed offsets; each maps to its error or None."""
        answers = self._delete_groups(group_ids, self._deadline(timeout))
        results = {group_id: _error(answer.code, answer.message, f"group {group_id!r}")
                   if answer.struct is not None or answer.code else _missing(f"group {group_id!r}", "DeleteGroups")
                   for group_id, answer in answers.items()}
        if raise_errors:
            raise_failures("delete_groups", results)
        return results

    # ---- the wire level (shared with compat_admin) ------------------------------------------------------

    def _deadline(self, timeout: float | None) -> float:
        if self._closed:
            raise kerrors.IllegalStateError("the admin client is closed")
        if timeout is None:
            timeout = self._default_timeout
        elif not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        return time.monotonic() + timeout

    def _can_retry(self, deadline: float) -> bool:
        """Whether a retry after retry_backoff_ms still starts before the deadline."""
        return time.monotonic() + self._retry_backoff < deadline

    @staticmethod
    def _timeout_ms(deadline: float) -> int:
        return max(1, int((deadline - time.monotonic()) * 1000))

    def _register_nodes(self, nodes: Iterable[tuple[int, str, int]]) -> None:
        """Make brokers known to the connection pool before anything is sent to them."""
        nodes = list(nodes)
        pool = self._client.pool

        def add() -> None:
            for node_id, host, port in nodes:
                pool.add_node(node_id, host, port)

        # Callbacks run in order on the loop thread, so a call() made after this finds the nodes.
        self._client.loop.call_soon_threadsafe(add)

    def _send_many(self, requests: list[tuple[Any, Any]], deadline: float) -> list[_Reply | BaseException]:
        """Send (node_id, request) pairs at once and wait for all; each gives its reply or its error."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return [kerrors.KafkaTimeoutError(f"the operation's timeout expired before {request.API_NAME}")
                    for _, request in requests]
        futures = [self._client.call(node_id, request, remaining) for node_id, request in requests]
        outcomes: list[_Reply | BaseException] = []
        for (node_id, request), future in zip(requests, futures):
            try:
                response = future.result(max(0.0, deadline - time.monotonic()) + 1.0)
                # KafkaClient.call() notes on its future which node answered in which version.
                outcomes.append(_Reply(response, future.api_version, future.node_id))  # type: ignore[attr-defined]
            except FutureTimeoutError:
                outcomes.append(kerrors.KafkaTimeoutError(
                    f"no answer to {request.API_NAME} from node {node_id} within the timeout"))
            except kerrors.IncompatibleBrokerVersion as exc:
                outcomes.append(exc)
            except kerrors.UnsupportedVersionError as exc:
                node = getattr(future, "node_id", node_id)
                unsupported = kerrors.IncompatibleBrokerVersion(
                    f"broker {node} does not support the {request.API_NAME} API that this operation needs")
                unsupported.__cause__ = exc
                outcomes.append(unsupported)
            except (kerrors.KafkaConnectionError, kerrors.KafkaTimeoutError, kerrors.RequestTimedOutError) as exc:
                # Say which request to which node failed; the engine's error stays attached as the cause.
                failure = type(exc)(f"{request.API_NAME} to node {getattr(future, 'node_id', node_id)}: "
                                    f"{exc.args[0] if exc.args else exc}")
                failure.__cause__ = exc
                outcomes.append(failure)
            except Exception as exc:  # the request's own error, raised in the caller
                outcomes.append(exc)
        return outcomes

    def _send(self, node_id: Any, request: Any, deadline: float) -> _Reply:
        outcome = self._send_many([(node_id, request)], deadline)[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _metadata(self, topics: Sequence[str | uuid.UUID] | None, deadline: float, *,
                  authorized: bool = False) -> _Reply:
        """A fresh Metadata response for these topics (names or topic ids; None: all, []: none), never
        creating topics."""
        T = kp.MetadataRequest.MetadataRequestTopic
        request = kp.MetadataRequest(
            topics=None if topics is None else [T(name=None, topic_id=t) if isinstance(t, uuid.UUID) else T(name=t)
                                                for t in topics],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=authorized,
            include_topic_authorized_operations=authorized)
        reply = self._send(None, request, deadline)
        self._register_nodes((b.node_id, b.host, b.port) for b in reply.response.brokers)
        if reply.response.controller_id >= 0:
            self._controller_id = reply.response.controller_id
        return reply

    def _describe_cluster(self, deadline: float, authorized: bool) -> tuple[_Reply, bool]:
        """(reply, from_metadata): DescribeCluster, or Metadata where the broker lacks it."""
        request = kp.DescribeClusterRequest(include_cluster_authorized_operations=authorized)
        try:
            reply = self._send(None, request, deadline)
        except kerrors.IncompatibleBrokerVersion:
            return self._metadata([], deadline, authorized=authorized), True
        error = _error(reply.response.error_code, reply.response.error_message, "DescribeCluster")
        if error is not None:
            raise error
        return reply, False

    def _brokers(self, deadline: float) -> list[int]:
        return [b.node_id for b in self._metadata([], deadline).response.brokers]

    def _check_brokers(self, node_ids: Iterable[int], deadline: float) -> list[int]:
        """The cluster's brokers (now known to the connection pool); BrokerNotAvailableError for the given
        ids that are not among them."""
        known = self._brokers(deadline)
        unknown = [node_id for node_id in node_ids if node_id not in known]
        if unknown:
            raise kerrors.BrokerNotAvailableError(f"brokers {unknown} are not in the cluster")
        return known

    def _controller(self, deadline: float) -> int:
        while self._controller_id is None:
            self._metadata([], deadline)
            if self._controller_id is None:
                if not self._can_retry(deadline):
                    raise kerrors.KafkaTimeoutError("the cluster named no controller within the timeout")
                time.sleep(self._retry_backoff)
        return self._controller_id

    def _controller_call(self, items: dict[Any, Any], build: Callable[[list[Any], int], Any],
                         answers: Callable[[Any], Iterable[tuple[Any, Any]]],
                         deadline: float) -> dict[Any, _ItemAnswer]:
        """Send items (key -> request item) to the controller; answers(response) yields (key, struct with
        error_code/error_message). NOT_CONTROLLER items are retried against a fresh controller; when the time
        runs out during a retry, their NOT_CONTROLLER is their answer."""
        pending = dict(items)
        results: dict[Any, _ItemAnswer] = {}
        refused: dict[Any, _ItemAnswer] = {}
        while pending:
            try:
                controller = self._controller(deadline)
                reply = self._send(controller, build(list(pending.values()), self._timeout_ms(deadline)), deadline)
            except _TIMEOUTS:
                if not refused:
                    raise
                results.update(refused)
                break
            refused = {}
            can_retry = self._can_retry(deadline)
            for key, struct in answers(reply.response):
                if key not in pending or key in results or key in refused:
                    continue
                answer = _ItemAnswer(struct.error_code, struct.error_message, struct, reply.version)
                if struct.error_code == _NOT_CONTROLLER and can_retry:
                    refused[key] = answer
                else:
                    results[key] = answer
            if not refused:
                break
            _log.debug("%d items went to node %s, which is not the controller; retrying", len(refused), controller)
            self._controller_id = None
            pending = {key: pending[key] for key in refused}
            time.sleep(self._retry_backoff)
        return {key: results.get(key, _ItemAnswer(0, None, None, -1)) for key in items}

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

    def _leaders(self, partitions: Iterable[TopicPartition], deadline: float) -> dict[TopicPartition, int]:
        """The leader of each partition (-1 while it has none); UnknownTopicOrPartitionError for partitions
        the cluster does not have."""
        wanted = set(partitions)
        response = self._metadata(sorted({tp.topic for tp in wanted}), deadline).response
        leaders = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp in wanted:
                    leaders[tp] = p.leader_id
        unknown = wanted - set(leaders)
        if unknown:
            raise kerrors.UnknownTopicOrPartitionError(
                f"the cluster has no partitions {sorted(f'{tp.topic}-{tp.partition}' for tp in unknown)}")
        return leaders

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
        pending = set(offsets)
        results: dict[TopicPartition, _ItemAnswer] = {}
        refused: dict[TopicPartition, _ItemAnswer] = {}
        while pending:
            try:
                leaders = {tp: leader for tp in pending} if leader is not None else self._leaders(pending, deadline)
            except _TIMEOUTS:
                if not refused:
                    raise
                results.update(refused)
                break
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            leaderless = _ItemAnswer(kerrors.LeaderNotAvailableError.errno, "no leader", None, -1)
            retry = {}
            for tp in sorted(pending):
                if leaders[tp] < 0:
                    retry[tp] = leaderless
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
            can_retry = leader is None and self._can_retry(deadline)
            outcomes = self._send_many(requests, deadline)
            timed_out = [o for o in outcomes if isinstance(o, _TIMEOUTS)]
            if timed_out and refused:
                results.update(refused)
                break
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
                for topic in outcome.response.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, p.partition_index)
                        if tp not in pending or tp in results:
                            continue
                        answer = _ItemAnswer(p.error_code, None, p, outcome.version)
                        if p.error_code in _LEADER_RETRY_CODES and can_retry:
                            retry[tp] = answer
                        else:
                            results[tp] = answer
            if retry and not can_retry:
                results.update((tp, answer) for tp, answer in retry.items() if tp not in results)
                break
            if not retry:
                break
            refused = retry
            pending = set(retry)
            time.sleep(self._retry_backoff)
        return {tp: results.get(tp, _ItemAnswer(0, None, None, -1)) for tp in offsets}

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
            return M(resources=[R(resource_type=r.resource_type, resource_name=r.name,
                                  configs=[config(*entry) for entry in entries[r.key]]) for r in batch],
                     validate_only=validate_only)

        return self._per_resource(by_node, build, lambda response: response.responses, deadline)

    # ---- groups on the wire ---------------------------------------------------------------------------

    def _find_coordinators(self, groups: list[str], deadline: float) -> tuple[dict[str, int], dict[str, _ItemAnswer]]:
        """({group: coordinator}, {group: lookup failure}); lookups answered with a coordinator error are
        retried within the deadline. Found coordinators are remembered until a group request says
        otherwise."""
        found = {g: self._coordinators[g] for g in groups if g in self._coordinators}
        failed: dict[str, _ItemAnswer] = {}
        missing = [g for g in groups if g not in found]
        refused: dict[str, _ItemAnswer] = {}
        while missing:
            request = find_coordinator_request(missing, GROUP)
            try:
                reply = self._send(None, request, deadline)
            except _TIMEOUTS:
                if not refused:
                    raise
                failed.update(refused)
                break
            refused = {}
            asked = missing if reply.version >= 4 else missing[:1]     # v0-3 ask for one key at a time
            rows = [(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
                    for c in coordinator_entries(reply.response, asked)]
            can_retry = self._can_retry(deadline)
            new_nodes = []
            for key, code, message, node_id, host, port in rows:
                if key not in asked or key in found or key in failed or key in refused:
                    continue
                if not code:
                    found[key] = self._coordinators[key] = node_id
                    new_nodes.append((node_id, host, port))
                elif code in _COORDINATOR_RETRY_CODES and can_retry:
                    refused[key] = _ItemAnswer(code, message, None, reply.version)
                else:
                    failed[key] = _ItemAnswer(code, message, None, reply.version)
            self._register_nodes(new_nodes)
            for key in asked:
                if key not in found and key not in failed and key not in refused:
                    failed[key] = _ItemAnswer(kerrors.UnknownError.errno,
                                              "the FindCoordinator response does not mention it", None, reply.version)
            missing = [g for g in missing if g not in found and g not in failed]
            if refused:
                time.sleep(self._retry_backoff)
        return found, failed

    def _group_call(self, groups: Iterable[str], build: Callable[[list[str]], Any],
                    answers: Callable[[Any, int, list[str]], Iterable[tuple[str, int, str | None, Any]]],
                    deadline: float, *, batch: bool, coordinator: int | None = None) -> dict[str, _ItemAnswer]:
        """Send group requests to the groups' coordinators (one request per coordinator when batch, else per
        group); answers(response, version, groups asked) yields (group, error_code, error_message, struct).
        Coordinator errors send the group to a fresh lookup and again, within the deadline."""
        if isinstance(groups, str):
            raise TypeError("group ids must be a list of str, not one str")
        group_ids = list(groups)
        for group_id in group_ids:
            if not isinstance(group_id, str):
                raise TypeError(f"a group id must be a str, not {group_id!r}")
            if not group_id:
                raise kerrors.InvalidGroupIdError("a group id must not be empty")
        _check_unique(group_ids, "groups")
        if coordinator is not None:
            self._check_brokers([coordinator], deadline)
        results: dict[str, _ItemAnswer] = {}
        refused: dict[str, _ItemAnswer] = {}
        pending = group_ids
        while pending:
            failed: dict[str, _ItemAnswer] = {}
            try:
                if coordinator is not None:
                    nodes = {g: coordinator for g in pending}
                else:
                    nodes, failed = self._find_coordinators(pending, deadline)
            except _TIMEOUTS:
                if not refused:
                    raise
                results.update(refused)
                break
            results.update(failed)
            by_node: dict[int, list[str]] = defaultdict(list)
            for g in pending:
                if g in nodes:
                    by_node[nodes[g]].append(g)
            requests = []
            for node_id, node_groups in by_node.items():
                for chunk in ([node_groups] if batch else [[g] for g in node_groups]):
                    requests.append((node_id, chunk))
            can_retry = coordinator is None and self._can_retry(deadline)
            outcomes = self._send_many([(node_id, build(chunk)) for node_id, chunk in requests], deadline)
            if refused and any(isinstance(o, _TIMEOUTS) for o in outcomes):
                results.update((g, answer) for g, answer in refused.items() if g not in results)
                break
            refused = {}
            for (node_id, chunk), outcome in zip(requests, outcomes):
                if isinstance(outcome, BaseException):
                    raise outcome
                for group_id, code, message, struct in answers(outcome.response, outcome.version, chunk):
                    if group_id not in chunk or group_id in results or group_id in refused:
                        continue
                    answer = _ItemAnswer(code, message, struct, outcome.version)
                    if code in _COORDINATOR_RETRY_CODES and can_retry:
                        self._coordinators.pop(group_id, None)
                        refused[group_id] = answer
                    else:
                        results[group_id] = answer
            pending = list(refused)
            if refused:
                _log.debug("coordinator errors for groups %s; looking them up again", pending)
                time.sleep(self._retry_backoff)
        return {g: results.get(g, _ItemAnswer(0, None, None, -1)) for g in group_ids}

    def _list_groups(self, broker_ids: Iterable[int] | None, states: Iterable[str] | None,
                     types: Iterable[str] | None, deadline: float) -> list[_Reply]:
        states = None if states is None else list(states)
        types = None if types is None else list(types)
        asked = None if broker_ids is None else list(broker_ids)
        known = self._check_brokers(asked or (), deadline)
        nodes = known if asked is None else asked
        request = kp.ListGroupsRequest(states_filter=states or [], types_filter=types or [])
        replies = []
        for node_id, outcome in zip(nodes, self._send_many([(n, request) for n in nodes], deadline)):
            if isinstance(outcome, BaseException):
                raise outcome
            # An older broker would drop the filters silently and list every group.
            if states and outcome.version < 4 or types and outcome.version < 5:
                raise kerrors.IncompatibleBrokerVersion(
                    f"broker {node_id} speaks ListGroups v{outcome.version}, which cannot filter by "
                    f"{'state' if states and outcome.version < 4 else 'type'}")
            error = _error(outcome.response.error_code, None, f"ListGroups on broker {node_id}")
            if error is not None:
                raise error
            replies.append(outcome)
        return replies

    def _describe_groups(self, group_ids: Iterable[str], deadline: float, authorized: bool,
                         coordinator: int | None = None) -> dict[str, _ItemAnswer]:
        def answers(response: Any, version: int, asked: list[str]) -> Iterable[tuple[str, int, str | None, Any]]:
            for g in response.groups:
                yield g.group_id, g.error_code, g.error_message, g

        return self._group_call(
            group_ids, lambda groups: kp.DescribeGroupsRequest(groups=groups, include_authorized_operations=authorized),
            answers, deadline, batch=True, coordinator=coordinator)

    def _delete_groups(self, group_ids: Iterable[str], deadline: float,
                       coordinator: int | None = None) -> dict[str, _ItemAnswer]:
        def answers(response: Any, version: int, asked: list[str]) -> Iterable[tuple[str, int, str | None, Any]]:
            for r in response.results:
                yield r.group_id, r.error_code, None, r

        return self._group_call(group_ids, lambda groups: kp.DeleteGroupsRequest(groups_names=groups), answers,
                                deadline, batch=True, coordinator=coordinator)

    def _fetch_group_offsets(self, specs: Mapping[str, list[TopicPartition] | None], deadline: float,
                             require_stable: bool = False) -> dict[str, _ItemAnswer]:
        """OffsetFetch per group; a struct with `topics` [name, partitions [partition_index,
        committed_offset, committed_leader_epoch, metadata, error_code]] answers each group."""
        OF = kp.OffsetFetchRequest
        requests = {}
        for group_id, partitions in specs.items():
            by_topic = None if partitions is None else _topic_partitions(partitions)
            old = (None if by_topic is None else
                   [OF.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()])
            new = (None if by_topic is None else
                   [OF.OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in by_topic.items()])
            # v0-7 read group_id/topics, v8+ `groups`; the encoder writes only its version's fields.
            requests[group_id] = OF(group_id=group_id, topics=old, require_stable=require_stable,
                                    groups=[OF.OffsetFetchRequestGroup(group_id=group_id, topics=new)])

        def answers(response: Any, version: int, asked: list[str]) -> Iterable[tuple[str, int, str | None, Any]]:
            if version >= 8:
                for g in response.groups:
                    yield g.group_id, g.error_code, None, g
            else:
                yield asked[0], response.error_code, None, response

        return self._group_call(list(specs), lambda groups: requests[groups[0]], answers, deadline, batch=False)

    def _delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition], deadline: float,
                              coordinator: int | None = None) -> _ItemAnswer:
        by_topic = _topic_partitions(partitions)
        T = kp.OffsetDeleteRequest.OffsetDeleteRequestTopic
        P = kp.OffsetDeleteRequest.OffsetDeleteRequestPartition
        request = kp.OffsetDeleteRequest(group_id=group_id, topics=[
            T(name=topic, partitions=[P(partition_index=i) for i in indexes]) for topic, indexes in by_topic.items()])

        def answers(response: Any, version: int, asked: list[str]) -> Iterable[tuple[str, int, str | None, Any]]:
            yield asked[0], response.error_code, None, response

        return self._group_call([group_id], lambda groups: request, answers, deadline, batch=False,
                                coordinator=coordinator)[group_id]


def group_offsets(group_id: str, answer: _ItemAnswer) -> dict[TopicPartition, OffsetAndMetadata]:
    """The offsets of an OffsetFetch answer; the group's error, or every failed partition's, raises."""
    error = _error(answer.code, answer.message, f"group {group_id!r}")
    if error is None and answer.struct is None:
        error = _missing(f"group {group_id!r}", "OffsetFetch")
    if error is not None:
        raise error
    offsets = {}
    failures = {}
    for topic in answer.struct.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if p.error_code:
                failures[tp] = _error(p.error_code, None, f"group {group_id!r} {tp.topic}-{tp.partition}")
            else:
                offsets[tp] = OffsetAndMetadata(p.committed_offset, p.metadata, p.committed_leader_epoch)
    if failures:
        raise_failures("list_group_offsets", {**offsets, **failures})
    return offsets


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
