"""A group member's offsets: commits (OffsetCommit, synchronous, asynchronous and automatic) and committed
offsets (OffsetFetch), sent to the group's coordinator on the loop thread; GroupCoordinator (group.py) has them.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient
from fastmq.kafka.group_config import GroupConfig
from fastmq.kafka.protocol.schema import ZERO_UUID
from fastmq.kafka.structs import MemberState, OffsetAndMetadata, TopicPartition
from fastmq.kafka.subscription import SubscriptionState

_log = logging.getLogger(__name__)

NO_GENERATION = -1
UNKNOWN_MEMBER = ""
COORDINATOR_ERRORS = (kerrors.CoordinatorNotAvailableError, kerrors.NotCoordinatorError)


class GroupCommits:
    """The commits of a group member; GroupCoordinator provides the membership they name, the loop, and the
    two calls they make: _send(request, callback) to the coordinator and coordinator_dead(reason)."""

    client: KafkaClient
    loop: Any
    config: GroupConfig
    subscriptions: SubscriptionState
    group_id: str
    generation: int
    member_id: str
    state: str
    rejoin_needed: bool
    _next_auto_commit: float
    _commit_callbacks: deque[tuple[Callable[..., Any], Any, Any]]
    _failures: dict[str, int]

    if TYPE_CHECKING:  # what GroupCoordinator (group.py) defines, declared for the type checker only
        def coordinator_dead(self, reason: str) -> None: ...

        def _send(self, request: Any, callback: Callable[[Any, BaseException | None], None],
                  timeout: float | None = None) -> None: ...

        def _reset_membership(self, lost: bool) -> None: ...

    def _backoff(self, step: str) -> float:
        """Seconds before `step` is tried again after one more failure in a row: the client's backoff, growing from
        retry_backoff_ms to retry_backoff_max_ms, so that members do not ask a coordinator that is down every
        100 ms for as long as it is down."""
        failures = self._failures[step] = self._failures.get(step, 0) + 1
        return self.client.retry.backoff.delay(failures)

    def _succeeded(self, step: str) -> None:
        self._failures.pop(step, None)

    # ---- commits ---------------------------------------------------------------------------------------

    def _commit_generation(self) -> tuple[int, str]:
        if not self.subscriptions.group_managed:
            return NO_GENERATION, UNKNOWN_MEMBER
        if self.state != MemberState.STABLE or self.generation == NO_GENERATION:
            if self.state == MemberState.REBALANCING or self.rejoin_needed:
                raise kerrors.RebalanceInProgressError(
                    "the consumer is rebalancing: call poll() to complete the rebalance, then commit again")
            raise kerrors.CommitFailedError(
                "the consumer is not part of an active group (it was removed or has not joined yet)")
        return self.generation, self.member_id

    def _commit_request(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> Any:
        generation, member_id = self._commit_generation()
        O = kp.OffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for tp, meta in offsets.items():
            if not isinstance(tp, TopicPartition) or not isinstance(meta, OffsetAndMetadata):
                raise TypeError("offsets must be dict[TopicPartition, OffsetAndMetadata]")
            topics.setdefault(tp.topic, []).append(O.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=meta.offset,
                committed_leader_epoch=meta.leader_epoch if meta.leader_epoch is not None else -1,
                committed_metadata=meta.metadata if meta.metadata is not None else ""))
        cluster = self.client.cluster
        return O(group_id=self.group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                 group_instance_id=self.config.group_instance_id,
                 topics=[O.OffsetCommitRequestTopic(name=topic, topic_id=_topic_id(cluster, topic), partitions=parts)
                         for topic, parts in topics.items()])

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                     callback: Callable[[Any, Any], Any] | None = None) -> Future[Any]:
        """Any thread: a Future of the commit (its result: the offsets). callback(offsets, response or
        exception) runs on the user's thread, in a later poll(), commit() or close()."""
        future: Future[Any] = Future()
        if callback is not None:
            future.add_done_callback(lambda f: self._commit_callbacks.append(
                (callback, offsets, f.exception() if f.exception() is not None else f.result())))
        if not offsets:
            future.set_result(offsets)
            return future
        try:
            request = self._commit_request(offsets)
        except Exception as exc:
            future.set_exception(exc)
            return future
        self.loop.call_soon_threadsafe(self._send, request,
                                       lambda response, error: self._on_commit(offsets, future, response, error))
        return future

    def _on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], future: Future[Any], response: Any,
                   error: BaseException | None) -> None:
        if error is not None:
            self.coordinator_dead(f"OffsetCommit failed: {error}")
            future.set_exception(error)
            return
        for topic in response.topics:
            for part in topic.partitions:
                if not part.error_code:
                    continue
                error_class = kerrors.for_code(part.error_code)
                tp = TopicPartition(topic.name, part.partition_index)
                if error_class in COORDINATOR_ERRORS or error_class is kerrors.RequestTimedOutError:
                    self.coordinator_dead(error_class.__name__)
                    future.set_exception(error_class(f"OffsetCommit of {tp}"))
                elif error_class is kerrors.RebalanceInProgressError:
                    self.rejoin_needed = True
                    future.set_exception(kerrors.CommitFailedError(error_class(f"OffsetCommit of {tp}")))
                elif error_class in (kerrors.UnknownMemberIdError, kerrors.IllegalGenerationError):
                    if error_class is kerrors.UnknownMemberIdError:
                        self.member_id = UNKNOWN_MEMBER
                    self._reset_membership(lost=True)
                    future.set_exception(kerrors.CommitFailedError(error_class(f"OffsetCommit of {tp}")))
                else:
                    future.set_exception(error_class(f"OffsetCommit of {tp}"))
                return
        future.set_result(offsets)

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout: float) -> None:
        """User's thread: commit and wait, retrying retriable failures (the coordinator moving, loading,
        a connection dropping) until the timeout; raises the last error otherwise."""
        deadline = time.monotonic() + timeout
        self.run_commit_callbacks()
        attempts = 0
        while True:
            attempts += 1
            future = self.commit_async(offsets)
            remaining = deadline - time.monotonic()
            try:
                future.result(max(remaining, 0.0) + 0.5)
                return
            except TimeoutError:
                raise kerrors.KafkaTimeoutError(f"offset commit did not finish within {timeout:.1f} s") from None
            except kerrors.KafkaError as exc:
                # As Kafka's consumer: a commit for a partition that does not exist is not retried.
                delay = None if isinstance(exc, kerrors.UnknownTopicOrPartitionError) else \
                    self.client.retry.next_delay(exc, attempts, time.monotonic(), deadline)
                if delay is None:
                    raise
                _log.debug("group %r: commit failed (%s); retrying", self.group_id, exc)
            time.sleep(delay)

    def maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000.0
        if self.subscriptions.group_managed and (self.state != MemberState.STABLE or self.rejoin_needed):
            return
        offsets = self.subscriptions.consumed_offsets()
        if offsets:
            self.commit_async(offsets, self._log_auto_commit)

    def _log_auto_commit(self, offsets: Any, result: Any) -> None:
        if isinstance(result, BaseException):
            _log.warning("group %r: auto-commit of %d offsets failed: %s", self.group_id, len(offsets), result)
            if isinstance(result, kerrors.KafkaError) and result.retriable:
                self._next_auto_commit = time.monotonic() + self._backoff("auto-commit")
        else:
            self._succeeded("auto-commit")

    def run_commit_callbacks(self) -> None:
        while self._commit_callbacks:
            callback, offsets, result = self._commit_callbacks.popleft()
            try:
                callback(offsets, result)
            except Exception:
                _log.exception("offset commit callback %r failed", callback)

    # ---- committed offsets ------------------------------------------------------------------------------

    def fetch_committed_async(self, partitions: list[TopicPartition]
                              ) -> Future[dict[TopicPartition, OffsetAndMetadata]]:
        """Any thread: a Future of {tp: OffsetAndMetadata} for the partitions that have a committed offset."""
        O = kp.OffsetFetchRequest
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = O(group_id=self.group_id,
                    topics=[O.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()],
                    groups=[O.OffsetFetchRequestGroup(group_id=self.group_id, topics=[
                        O.OffsetFetchRequestTopics(name=t, topic_id=_topic_id(self.client.cluster, t),
                                                   partition_indexes=p) for t, p in by_topic.items()])],
                    require_stable=True)
        future: Future[Any] = Future()

        def done(response: Any, error: BaseException | None) -> None:
            if error is not None:
                self.coordinator_dead(f"OffsetFetch failed: {error}")
                future.set_exception(error)
                return
            try:
                future.set_result(self._committed_from(response))
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(self._send, request, done)
        return future

    def fetch_committed(self, partitions: list[TopicPartition], timeout: float) -> dict[TopicPartition, OffsetAndMetadata]:
        """User's thread: the committed offsets of these partitions (absent when none was committed),
        retrying retriable failures until the timeout."""
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            attempts += 1
            future = self.fetch_committed_async(partitions)
            try:
                return future.result(max(deadline - time.monotonic(), 0.0) + 0.5)
            except TimeoutError:
                raise kerrors.KafkaTimeoutError(
                    f"fetching committed offsets did not finish within {timeout:.1f} s") from None
            except kerrors.KafkaError as exc:
                delay = self.client.retry.next_delay(exc, attempts, time.monotonic(), deadline)
                if delay is None:
                    raise
                _log.debug("group %r: offset fetch failed (%s); retrying", self.group_id, exc)
            time.sleep(delay)

    def _committed_from(self, response: Any) -> dict[TopicPartition, OffsetAndMetadata]:
        if response.groups:
            group = response.groups[0]
            code, topics = group.error_code, group.topics
        else:
            code, topics = response.error_code, response.topics
        if code:
            error_class = kerrors.for_code(code)
            if error_class in COORDINATOR_ERRORS:
                self.coordinator_dead(error_class.__name__)
            raise error_class(f"OffsetFetch of group {self.group_id!r}")
        committed = {}
        for topic in topics:
            for part in topic.partitions:
                if part.error_code:
                    error_class = kerrors.for_code(part.error_code)
                    raise error_class(f"OffsetFetch of {topic.name}-{part.partition_index}")
                if part.committed_offset >= 0:
                    committed[TopicPartition(topic.name, part.partition_index)] = OffsetAndMetadata(
                        part.committed_offset, part.metadata or "", part.committed_leader_epoch)
        return committed


def _topic_id(cluster: Any, topic: str) -> Any:
    info = cluster.topics.get(topic)
    return info.topic_id if info is not None and info.topic_id is not None else ZERO_UUID
