"""The admin client's wire level: its connection to the cluster, sending to nodes within an operation's
deadline, the controller, and the helpers every admin operation shares (per-item answers and errors).

Admin (fastmq.kafka.admin) is built on it: GroupAdmin (admin_groups.py) adds the consumer groups, Admin the
topics, partitions, records and configurations. compat_admin reads the wire-level answers through the
underscore methods.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from fastmq.closeable import Closeable
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import CLIENT_OPTIONS, ClientConfig, KafkaClient
from fastmq.kafka.structs import TopicPartition

_log = logging.getLogger(__name__)

# Kafka's value of an authorized-operations bitfield that was not requested (or that the broker left out).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
_NOT_CONTROLLER = kerrors.NotControllerError.errno
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
    error.results = dict(results)
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


def _check_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def _topic_partitions(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        if not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str):
            raise TypeError(f"expected TopicPartition(topic, partition), got {tp!r}")
        by_topic[tp[0]].append(_check_int(tp[1], f"the partition of {tp[0]!r}"))
    return by_topic


def authorized_operations(value: int) -> int | None:
    return None if value == AUTHORIZED_OPERATIONS_OMITTED else value



class AdminConnection(Closeable):
    """An admin client's connection to a cluster and its wire level (see the module docstring)."""

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
        self._default_timeout = client.config.request_timeout_ms / 1000.0
        self._controller_id: int | None = None
        self._coordinators: dict[tuple[int, str], int] = {}     # (key type, key) -> coordinator
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

    # ---- the wire level (shared with compat_admin) ------------------------------------------------------

    def _deadline(self, timeout: float | None) -> float:
        if self._closed:
            raise kerrors.IllegalStateError("the admin client is closed")
        if timeout is None:
            timeout = self._default_timeout
        elif not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        return time.monotonic() + timeout

    def _retry_delay(self, retrying: type[BaseException], attempts: int, deadline: float) -> float | None:
        """The client's RetryPolicy (retry_backoff_ms, growing to retry_backoff_max_ms) after `attempts`
        passes that met `retrying`: seconds to wait before the next pass, None when none may start before the
        deadline."""
        return self._client.retry.next_delay(retrying(), attempts, time.monotonic(), deadline)

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
                outcomes.append(_Reply(response, future.api_version, future.node_id))
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

    def _controller(self, deadline: float) -> int:
        attempts = 0
        while self._controller_id is None:
            self._metadata([], deadline)
            attempts += 1
            if self._controller_id is None:
                delay = self._retry_delay(kerrors.NotControllerError, attempts, deadline)
                if delay is None:
                    raise kerrors.KafkaTimeoutError("the cluster named no controller within the timeout")
                time.sleep(delay)
        return self._controller_id

    def _until_answered(self, keys: Iterable[Any], one_pass: Callable[[list[Any], bool, bool], Any],
                        retrying: type[BaseException], deadline: float,
                        before_retry: Callable[[dict[Any, _ItemAnswer]], None] | None = None
                        ) -> dict[Any, _ItemAnswer]:
        """Send items in passes until each has its answer. one_pass(pending keys, may_retry, is_retry) sends them
        and returns (answers, refused): {key: _ItemAnswer} final, and {key: _ItemAnswer} to send again (only when
        may_retry; a pass that may not retry makes every answer final). Refused keys go again after the
        RetryPolicy's delay for `retrying`; when the time runs out during a retry, their refusal is their answer.
        before_retry(refused) runs before each retry. Keys never answered get an empty _ItemAnswer."""
        keys = list(keys)
        pending = list(keys)
        results: dict[Any, _ItemAnswer] = {}
        refused: dict[Any, _ItemAnswer] = {}
        attempts = 0
        while pending:
            attempts += 1
            delay = self._retry_delay(retrying, attempts, deadline)
            try:
                answers, refused_now = one_pass(pending, delay is not None, bool(refused))
            except _TIMEOUTS:
                if not refused:
                    raise
                results.update(refused)
                break
            results.update((key, answer) for key, answer in answers.items() if key not in results)
            refused = {key: answer for key, answer in refused_now.items() if key not in results}
            if not refused:
                break
            # The pass took time: the wait before the next one is measured from now.
            delay = self._retry_delay(retrying, attempts, deadline)
            if delay is None:
                results.update(refused)
                break
            if before_retry is not None:
                before_retry(refused)
            pending = list(refused)
            time.sleep(delay)
        return {key: results.get(key, _ItemAnswer(0, None, None, -1)) for key in keys}

    def _controller_call(self, items: dict[Any, Any], build: Callable[[list[Any], int], Any],
                         answers: Callable[[Any], Iterable[tuple[Any, Any]]],
                         deadline: float) -> dict[Any, _ItemAnswer]:
        """Send items (key -> request item) to the controller; answers(response) yields (key, struct with
        error_code/error_message). NOT_CONTROLLER items are retried against a fresh controller; when the time
        runs out during a retry, their NOT_CONTROLLER is their answer."""
        controller: list[int] = []

        def one_pass(pending: list[Any], may_retry: bool, is_retry: bool
                     ) -> tuple[dict[Any, _ItemAnswer], dict[Any, _ItemAnswer]]:
            controller[:] = [self._controller(deadline)]
            reply = self._send(controller[0], build([items[key] for key in pending], self._timeout_ms(deadline)),
                               deadline)
            final: dict[Any, _ItemAnswer] = {}
            refused: dict[Any, _ItemAnswer] = {}
            wanted = set(pending)
            for key, struct in answers(reply.response):
                if key not in wanted or key in final or key in refused:
                    continue
                answer = _ItemAnswer(struct.error_code, struct.error_message, struct, reply.version)
                (refused if struct.error_code == _NOT_CONTROLLER and may_retry else final)[key] = answer
            return final, refused

        def forget_controller(refused: dict[Any, _ItemAnswer]) -> None:
            _log.debug("%d items went to node %s, which is not the controller; retrying", len(refused), controller[0])
            self._controller_id = None

        return self._until_answered(items, one_pass, kerrors.NotControllerError, deadline, forget_controller)
