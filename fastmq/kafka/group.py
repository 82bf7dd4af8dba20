"""Consumer-group membership: coordinator discovery, join / sync / heartbeat; with offset commits and fetches
(group_commits.py) and the member's settings and rebalance listener (group_config.py).

Who does what (the split of Kafka's own consumer, so that slow processing never loses the group):
- the I/O loop thread runs the protocol: FindCoordinator, JoinGroup (retrying MEMBER_ID_REQUIRED,
  UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS and a moving coordinator), the leader's assignment, SyncGroup,
  and heartbeats on their own timer every heartbeat_interval_ms. A heartbeat that reports a rebalance only
  raises a flag; one that finds this member gone (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) resets the
  membership. If the user's thread has not polled for max_poll_interval_ms, the loop leaves the group so
  that the partitions move to a member that is alive;
- the user's thread, in poll(), decides to (re)join and applies results: before a join it commits (with
  auto-commit) and calls the listener's on_partitions_revoked (eager protocol: all partitions; cooperative:
  none), after a join on_partitions_assigned. So listener callbacks, and any commit they make, run on the
  user's thread, never on the loop.

The coordinator gets its own connection (a pool node named "coordinator-<broker id>"): a broker answers one
request per connection at a time, and a heartbeat must not wait behind a Fetch that the broker holds for
fetch_max_wait_ms.

Static membership (group_instance_id, KIP-345): the instance id goes into every request, and close() does
not leave the group, so a restart within session_timeout_ms gets the same partitions without a rebalance.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.assignors import COOPERATIVE, PartitionAssignor, rebalance_protocol
from fastmq.kafka.client import KafkaClient, kafka_error
from fastmq.kafka.consumer_protocol import PROTOCOL_TYPE, Assignment, Subscription
from fastmq.kafka.coordinator import GROUP, coordinator_entries, find_coordinator_request
from fastmq.kafka.group_commits import COORDINATOR_ERRORS, NO_GENERATION, UNKNOWN_MEMBER, GroupCommits
from fastmq.kafka.group_config import (  # noqa: F401  (ConsumerRebalanceListener: public here since the split)
    ConsumerRebalanceListener as ConsumerRebalanceListener, GroupConfig, call_listener,
)
from fastmq.kafka.structs import ConsumerGroupMetadata, MemberState
from fastmq.kafka.subscription import SubscriptionState

_log = logging.getLogger(__name__)

# Join errors after which retrying cannot help: they reach the user from poll().
_FATAL_JOIN_ERRORS = (
    kerrors.InconsistentGroupProtocolError, kerrors.InvalidSessionTimeoutError, kerrors.InvalidGroupIdError,
    kerrors.GroupAuthorizationFailedError, kerrors.GroupMaxSizeReachedError, kerrors.FencedInstanceIdError,
    kerrors.UnsupportedVersionError,
)


@dataclass
class _Joined:
    generation: int
    member_id: str
    protocol: str
    assignment: Assignment


class GroupCoordinator(GroupCommits):
    """Membership of one consumer in one group. See the module docstring for the thread split."""

    def __init__(self, client: KafkaClient, subscriptions: SubscriptionState, config: GroupConfig,
                 assignors: list[PartitionAssignor], wakeup: threading.Condition) -> None:
        config.validate()
        self.client = client
        self.loop = client.loop
        self.subscriptions = subscriptions
        self.config = config
        self.group_id = config.group_id
        self.assignors = assignors
        self.protocol = rebalance_protocol(assignors)
        self.wakeup = wakeup
        # Membership, written on the loop thread, read anywhere.
        self.member_id = UNKNOWN_MEMBER
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.state = MemberState.UNJOINED
        self.rejoin_needed = False
        self.fatal_error: BaseException | None = None
        self.last_poll = time.monotonic()
        # Loop thread only.
        self.coordinator: str | None = None
        self._finding = False
        self._waiting_for_coordinator: list[Callable[[str | None, BaseException | None], None]] = []
        self._dispatch_pending = False
        self._joining = False
        self._join_protocols: list[tuple[str, bytes]] = []
        self._heartbeat_timer: Any = None
        self._heartbeat_in_flight = False
        self._last_heartbeat_ok = time.monotonic()
        self._failures = {}                 # step -> failures in a row, for its backoff
        self._closed = False
        self._lost = False                  # the membership was reset under the user: partitions are lost
        # Handed from the loop thread to the user's thread.
        self._handoff_lock = threading.Lock()
        self._joined: _Joined | None = None
        # User's thread only.
        self._join_prepared = False
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000.0
        self._commit_callbacks: deque[tuple[Callable[..., Any], Any, Any]] = deque()
        self._assigned_counts: dict[str, int] = {}      # leader: partition counts its assignment used
        self.client.loop.call_soon_threadsafe(self.client.pool.add_listener, self._on_node_state)

    # ==== the loop thread: the coordinator ===============================================================

    def _with_coordinator(self, action: Callable[[str | None, BaseException | None], None]) -> None:
        """Run action(node, None) once the coordinator is known and can take a request (action(None, error)
        when the consumer closes first)."""
        if self._closed:
            action(None, kerrors.KafkaConnectionError("the consumer is closed"))
            return
        self._waiting_for_coordinator.append(action)
        if self.coordinator is None:
            self._find_coordinator()
        else:
            self._run_waiting()

    def _run_waiting(self) -> None:
        node = self.coordinator
        if node is None or not self._waiting_for_coordinator or self._closed:
            return
        if not self.client.ready(node):
            # Connecting: the pool's ready notification calls back. At max_in_flight or in a reconnect
            # backoff nothing would: try again when a slot may be free or the backoff ends.
            delay = self.client.connection_delay(node)
            if delay != float("inf") and not self._dispatch_pending:
                self._dispatch_pending = True
                self.loop.call_later(max(delay, 0.005), self._retry_waiting)
            return
        while self._waiting_for_coordinator and self.client.is_ready(node):
            self._waiting_for_coordinator.pop(0)(node, None)
        if self._waiting_for_coordinator:
            self._run_waiting()

    def _retry_waiting(self) -> None:
        self._dispatch_pending = False
        self._run_waiting()

    def _on_node_state(self, node_id: Any, ready: bool, error: BaseException | None) -> None:
        if node_id != self.coordinator or self._closed:
            return
        if ready:
            self._run_waiting()
        elif error is not None:
            self.coordinator_dead(f"its connection failed: {error}")

    def _find_coordinator(self) -> None:
        if self._finding or self._closed:
            return
        node = self.client.least_loaded_node()
        if node is None or not self.client.ready(node):
            self._finding = True
            self.loop.call_later(0.05, self._retry_find)
            return
        self._finding = True
        request = find_coordinator_request([self.group_id], GROUP)
        try:
            self.client.send(node, request, self._on_find_coordinator)
        except Exception as exc:
            self._on_find_coordinator(None, exc)

    def _retry_find(self) -> None:
        self._finding = False
        if self._waiting_for_coordinator and self.coordinator is None:
            self._find_coordinator()

    def _on_find_coordinator(self, response: Any, error: BaseException | None) -> None:
        if self._closed:
            self._finding = False
            return
        if error is None:
            entry = coordinator_entries(response, [self.group_id])[0]
            node_id, host, port = entry.node_id, entry.host, entry.port
            if entry.error_code:
                error = kerrors.for_code(entry.error_code)(f"FindCoordinator for group {self.group_id!r}")
        if error is not None:
            if isinstance(error, kerrors.GroupAuthorizationFailedError):
                self._fail(error)
                self._finding = False
                return
            _log.debug("coordinator lookup for group %r failed: %s", self.group_id, error)
            self.loop.call_later(self._backoff("find"), self._retry_find)
            return
        self._succeeded("find")
        self._finding = False
        self.coordinator = f"coordinator-{node_id}"
        self.client.pool.add_node(self.coordinator, host, port)
        _log.info("group %r: coordinator is broker %s at %s:%s", self.group_id, node_id, host, port)
        if self.client.ready(self.coordinator):
            self._run_waiting()

    def coordinator_dead(self, reason: str) -> None:
        """Loop thread: forget the coordinator (it moved or its connection failed); the next request looks
        it up again."""
        if self.coordinator is None:
            return
        _log.info("group %r: marking coordinator %s dead: %s", self.group_id, self.coordinator, reason)
        node, self.coordinator = self.coordinator, None
        self.client.pool.close(node)
        if self._waiting_for_coordinator:
            self._find_coordinator()

    def _send(self, request: Any, callback: Callable[[Any, BaseException | None], None],
              timeout: float | None = None) -> None:
        """Loop thread: send to the coordinator once known; callback(response, error) on the loop thread."""
        def with_node(node: str | None, error: BaseException | None) -> None:
            if error is not None:
                callback(None, error)
                return
            try:
                self.client.send(node, request, callback, timeout=timeout)
            except Exception as exc:
                callback(None, kafka_error(exc))

        self._with_coordinator(with_node)

    def _fail(self, error: BaseException) -> None:
        _log.error("group %r: %s", self.group_id, error)
        self.fatal_error = error
        if self._joining:
            self._joining = False
            self.state = MemberState.UNJOINED       # the next poll() tries again (and fails again if it must)
        self._notify()

    def _notify(self) -> None:
        with self.wakeup:
            self.wakeup.notify_all()

    # ==== the loop thread: join and sync ===================================================================

    def _start_join(self, protocols: list[tuple[str, bytes]]) -> None:
        if self._closed or self._joining:
            return
        self._join_protocols = protocols
        self._joining = True
        self.rejoin_needed = False
        self.state = MemberState.REBALANCING
        self._stop_heartbeats()
        self._send_join()

    def _retry_join(self) -> None:
        if not self._joining or self._closed:
            return
        self.loop.call_later(self._backoff("join"), self._send_join)

    def _send_join(self) -> None:
        if not self._joining or self._closed:
            return
        config = self.config
        J = kp.JoinGroupRequest
        request = J(group_id=self.group_id, session_timeout_ms=config.session_timeout_ms,
                    rebalance_timeout_ms=config.max_poll_interval_ms, member_id=self.member_id,
                    group_instance_id=config.group_instance_id, protocol_type=PROTOCOL_TYPE,
                    protocols=[J.JoinGroupRequestProtocol(name=name, metadata=data)
                               for name, data in self._join_protocols])
        # The coordinator holds a JoinGroup until every member has rejoined (up to the rebalance timeout).
        timeout = max(config.request_timeout_ms, config.max_poll_interval_ms + 5000) / 1000.0
        _log.debug("group %r: joining as %r", self.group_id, self.member_id or "(new member)")
        self._send(request, self._on_join, timeout=timeout)

    def _on_join(self, response: Any, error: BaseException | None) -> None:
        if not self._joining or self._closed:
            return
        if error is not None:
            self.coordinator_dead(f"JoinGroup failed: {error}")
            self._retry_join()
            return
        error_class = kerrors.for_code(response.error_code) if response.error_code else None
        if error_class is None:
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.protocol_name = response.protocol_name
            _log.info("group %r: joined generation %d as %s%s", self.group_id, self.generation, self.member_id,
                      " (leader)" if response.leader == self.member_id else "")
            if response.leader == self.member_id and not response.skip_assignment:
                self._lead(response)
            else:
                self._send_sync([])
        elif error_class is kerrors.MemberIdRequiredError:
            self.member_id = response.member_id         # KIP-394: join again with the id the broker gave
            self._send_join()
        elif error_class is kerrors.UnknownMemberIdError:
            self.member_id = UNKNOWN_MEMBER
            self._send_join()
        elif error_class in COORDINATOR_ERRORS:
            self.coordinator_dead(error_class.__name__)
            self._retry_join()
        elif error_class in (kerrors.CoordinatorLoadInProgressError, kerrors.RebalanceInProgressError):
            self._retry_join()
        elif issubclass(error_class, _FATAL_JOIN_ERRORS):
            self._fail(error_class(f"JoinGroup of group {self.group_id!r}"))
        else:
            self._fail(error_class(f"JoinGroup of group {self.group_id!r} failed"))

    def _lead(self, response: Any, deadline: float | None = None) -> None:
        """The leader: assign once the metadata covers every topic some member subscribes to."""
        if not self._joining or self._closed:
            return
        subscriptions = {m.member_id: Subscription.decode(m.metadata, m.group_instance_id)
                         for m in response.members}
        topics = {t for s in subscriptions.values() for t in s.topics}
        cluster = self.client.cluster
        missing = {t for t in topics if t not in cluster.topics and t not in cluster.topic_errors}
        now = time.monotonic()
        if deadline is None:
            deadline = now + self.config.request_timeout_ms / 1000.0
        if missing and now < deadline:
            self.client.add_topics(missing)
            self.loop.call_later(0.05, self._lead, response, deadline)
            return
        counts = {t: len(cluster.topics[t].partitions) for t in topics if t in cluster.topics}
        assignor = next((a for a in self.assignors if a.name == response.protocol_name), None)
        if assignor is None:
            self._fail(kerrors.InconsistentGroupProtocolError(
                f"the coordinator chose assignor {response.protocol_name!r}, which this consumer did not offer"))
            return
        try:
            assignments = assignor.assign(counts, subscriptions)
        except Exception as exc:
            self._fail(kerrors.KafkaError(f"assignor {assignor.name!r} failed: {exc!r}"))
            return
        self._assigned_counts = counts
        _log.info("group %r: assigned %s with %s", self.group_id,
                  {m: [f"{tp.topic}-{tp.partition}" for tp in a.partitions] for m, a in assignments.items()},
                  assignor.name)
        S = kp.SyncGroupRequest
        self._send_sync([S.SyncGroupRequestAssignment(member_id=m, assignment=a.encode())
                         for m, a in assignments.items()])

    def _send_sync(self, assignments: list[Any]) -> None:
        request = kp.SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.config.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name, assignments=assignments)
        generation = self.generation
        self._send(request, lambda response, error: self._on_sync(generation, response, error))

    def _on_sync(self, generation: int, response: Any, error: BaseException | None) -> None:
        if not self._joining or self._closed:
            return
        if error is not None:
            self.coordinator_dead(f"SyncGroup failed: {error}")
            self._retry_join()
            return
        error_class = kerrors.for_code(response.error_code) if response.error_code else None
        if error_class is None:
            try:
                assignment = Assignment.decode(response.assignment)
            except Exception as exc:
                self._fail(kerrors.KafkaProtocolError(f"unreadable assignment from the group leader: {exc}"))
                return
            self._joining = False
            self._succeeded("join")
            with self._handoff_lock:
                self._joined = _Joined(generation, self.member_id, self.protocol_name or "", assignment)
            self.state = MemberState.STABLE
            self._last_heartbeat_ok = time.monotonic()
            self._schedule_heartbeat()
            self._notify()
        elif error_class is kerrors.RebalanceInProgressError:
            self._send_join()
        elif error_class in (kerrors.UnknownMemberIdError, kerrors.IllegalGenerationError):
            if error_class is kerrors.UnknownMemberIdError:
                self.member_id = UNKNOWN_MEMBER
            self.generation = NO_GENERATION
            self._send_join()
        elif error_class in COORDINATOR_ERRORS:
            self.coordinator_dead(error_class.__name__)
            self._retry_join()
        elif error_class is kerrors.CoordinatorLoadInProgressError:
            self._retry_join()
        else:
            self._fail(error_class(f"SyncGroup of group {self.group_id!r}"))

    # ==== the loop thread: heartbeats =====================================================================

    def _schedule_heartbeat(self, delay: float | None = None) -> None:
        self._stop_heartbeats()
        if self._closed:
            return
        delay = self.config.heartbeat_interval_ms / 1000.0 if delay is None else delay
        self._heartbeat_timer = self.loop.call_later(delay, self._heartbeat)

    def _stop_heartbeats(self) -> None:
        if self._heartbeat_timer is not None:
            self._heartbeat_timer.cancel()
            self._heartbeat_timer = None

    def _heartbeat(self) -> None:
        self._heartbeat_timer = None
        if self._closed or self.state != MemberState.STABLE:
            return
        now = time.monotonic()
        if now - self.last_poll > self.config.max_poll_interval_ms / 1000.0:
            _log.warning(
                "group %r: poll() was not called for more than max_poll_interval_ms (%d ms); leaving the group "
                "so that its partitions move to a live member. Process records faster, lower max_poll_records "
                "or raise max_poll_interval_ms.", self.group_id, self.config.max_poll_interval_ms)
            self._leave("the consumer poll timeout expired")
            self._reset_membership(lost=True)
            return
        if now - self._last_heartbeat_ok > self.config.session_timeout_ms / 1000.0:
            self.coordinator_dead("no successful heartbeat within the session timeout")
        if self._heartbeat_in_flight:
            self._schedule_heartbeat(self.config.retry_backoff_ms / 1000.0)
            return
        self._heartbeat_in_flight = True
        request = kp.HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                      member_id=self.member_id, group_instance_id=self.config.group_instance_id)
        generation = self.generation
        self._send(request, lambda response, error: self._on_heartbeat(generation, response, error))
        self._schedule_heartbeat()

    def _on_heartbeat(self, generation: int, response: Any, error: BaseException | None) -> None:
        self._heartbeat_in_flight = False
        if self._closed or generation != self.generation or self.state != MemberState.STABLE:
            return
        if error is not None:
            self.coordinator_dead(f"heartbeat failed: {error}")
            self._schedule_heartbeat(self._backoff("heartbeat"))
            return
        error_class = kerrors.for_code(response.error_code) if response.error_code else None
        if error_class is None:
            self._last_heartbeat_ok = time.monotonic()
            self._succeeded("heartbeat")
        elif error_class is kerrors.RebalanceInProgressError:
            self._last_heartbeat_ok = time.monotonic()
            if not self.rejoin_needed:
                _log.info("group %r: a rebalance started; rejoining at the next poll()", self.group_id)
                self.rejoin_needed = True
                self._notify()
        elif error_class in (kerrors.IllegalGenerationError, kerrors.UnknownMemberIdError):
            _log.warning("group %r: heartbeat says %s; this member lost its partitions and rejoins",
                         self.group_id, error_class.__name__)
            if error_class is kerrors.UnknownMemberIdError:
                self.member_id = UNKNOWN_MEMBER
            self._reset_membership(lost=True)
        elif error_class is kerrors.FencedInstanceIdError:
            self._reset_membership(lost=True)
            self._fail(error_class(f"group instance id {self.config.group_instance_id!r} is used by another "
                                   "consumer"))
        elif error_class in COORDINATOR_ERRORS:
            self.coordinator_dead(error_class.__name__)
            self._schedule_heartbeat(self._backoff("heartbeat"))
        else:
            _log.warning("group %r: heartbeat failed with %s", self.group_id, error_class.__name__)

    def _reset_membership(self, lost: bool) -> None:
        self._stop_heartbeats()
        self.generation = NO_GENERATION
        if self.config.group_instance_id is None and lost:
            self.member_id = UNKNOWN_MEMBER
        self.state = MemberState.UNJOINED
        self._lost = self._lost or lost
        self.rejoin_needed = True
        self._notify()

    def _leave(self, reason: str, done: threading.Event | None = None) -> None:
        """Loop thread: tell the coordinator this dynamic member is gone (static members just stop); `done`
        is set once the coordinator answered or the request could not be sent."""
        if (self.config.group_instance_id is not None or self.member_id == UNKNOWN_MEMBER
                or self.coordinator is None or not self.client.is_ready(self.coordinator)):
            if done is not None:
                done.set()
            return
        L = kp.LeaveGroupRequest
        request = L(group_id=self.group_id, member_id=self.member_id,
                    members=[L.MemberIdentity(member_id=self.member_id, reason=reason)])
        _log.info("group %r: leaving (%s)", self.group_id, reason)
        try:
            self.client.send(self.coordinator, request,
                             None if done is None else lambda response, error: done.set())
        except Exception as exc:
            _log.debug("LeaveGroup not sent: %s", exc)
            if done is not None:
                done.set()

    # ==== the user's thread ==================================================================================

    def ensure_active(self, deadline: float) -> bool:
        """poll()'s group step: rejoin when needed and apply a finished join, waiting for it until the deadline
        unless there are partitions to consume meanwhile (cooperative rebalancing). True when this member holds
        a current assignment."""
        self.last_poll = time.monotonic()
        self.run_commit_callbacks()
        self._raise_fatal()
        if not self.subscriptions.group_managed:
            return True
        self._apply_joined()
        if self.rejoin_needed or self.state == MemberState.UNJOINED:
            self._begin_join(deadline)
        while self.state != MemberState.STABLE or self._joined is not None:
            if self._apply_joined():
                continue
            self._raise_fatal()
            if self.state == MemberState.UNJOINED:
                self._begin_join(deadline)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self.protocol == COOPERATIVE and self.subscriptions.assignment):
                break
            with self.wakeup:
                if self._joined is None and self.fatal_error is None and self.state != MemberState.UNJOINED:
                    self.wakeup.wait(remaining)
        return self.state == MemberState.STABLE

    def _raise_fatal(self) -> None:
        if self.fatal_error is not None:
            error, self.fatal_error = self.fatal_error, None
            raise error

    def _begin_join(self, deadline: float) -> None:
        if self.state == MemberState.REBALANCING and not self.rejoin_needed:
            return                              # a join is under way
        if not self._join_prepared:
            self._on_join_prepare(deadline)
            self._join_prepared = True
        owned = sorted(self.subscriptions.assignment) if self.protocol == COOPERATIVE else []
        topics = set(self.subscriptions.topics)
        protocols = []
        for assignor in self.assignors:
            subscription = assignor.subscription(topics, owned, self.generation)
            subscription.rack_id = self.config.client_rack or None
            protocols.append((assignor.name, subscription.encode()))
        self.rejoin_needed = False
        self.state = MemberState.REBALANCING
        self.loop.call_soon_threadsafe(self._start_join, protocols)

    def _on_join_prepare(self, deadline: float) -> None:
        lost = self._lost
        self._lost = False
        assigned = self.subscriptions.assigned_partitions()
        if not lost and self.config.enable_auto_commit and self.generation != NO_GENERATION:
            # The partitions may move: commit what was consumed even when poll()'s own timeout is shorter.
            budget = max(deadline - time.monotonic(), min(5.0, self.config.request_timeout_ms / 1000.0))
            try:
                self.commit(self.subscriptions.consumed_offsets(), budget)
            except Exception as exc:
                _log.warning("group %r: committing before the rebalance failed: %s", self.group_id, exc)
        listener = self.subscriptions.listener
        if lost:
            if listener is not None and assigned:
                call_listener(listener, "on_partitions_lost", assigned)
            self.subscriptions.assign_from_group(())
        elif self.protocol != COOPERATIVE:
            if listener is not None:
                call_listener(listener, "on_partitions_revoked", assigned)
            self.subscriptions.assign_from_group(())
        else:
            # Cooperative: keep consuming; give up only partitions of topics no longer subscribed.
            gone = {tp for tp in assigned if tp.topic not in self.subscriptions.topics}
            if gone:
                if listener is not None:
                    call_listener(listener, "on_partitions_revoked", gone)
                self.subscriptions.assign_from_group(assigned - gone)

    def _apply_joined(self) -> bool:
        with self._handoff_lock:
            joined, self._joined = self._joined, None
        if joined is None:
            return False
        self._join_prepared = False
        assignor = next((a for a in self.assignors if a.name == joined.protocol), None)
        if assignor is not None:
            assignor.on_assignment(joined.assignment, joined.generation)
        subscribed = self.subscriptions.topics
        new = {tp for tp in joined.assignment.partitions if tp.topic in subscribed}
        dropped = {tp for tp in joined.assignment.partitions if tp.topic not in subscribed}
        if dropped:
            _log.warning("group %r: assigned partitions of topics not subscribed to: %s", self.group_id, dropped)
            self.rejoin_needed = True
        listener = self.subscriptions.listener
        owned = self.subscriptions.assigned_partitions()
        revoked = owned - new
        if revoked and listener is not None:
            call_listener(listener, "on_partitions_revoked", revoked)
        self.subscriptions.assign_from_group(new)
        if listener is not None:
            call_listener(listener, "on_partitions_assigned", new - owned if self.protocol == COOPERATIVE else new)
        if revoked and self.protocol == COOPERATIVE:
            self.rejoin_needed = True             # the partitions given up now go to their new owners
        _log.info("group %r: generation %d, assigned %s", self.group_id, joined.generation, sorted(new))
        return True

    def check_metadata(self) -> None:
        """The leader rejoins when a subscribed topic's partition count changed since it assigned."""
        if not self._assigned_counts or self.state != MemberState.STABLE:
            return
        topics = self.client.cluster.topics
        for topic, count in self._assigned_counts.items():
            info = topics.get(topic)
            if info is not None and len(info.partitions) != count:
                _log.info("group %r: %s now has %d partitions; rebalancing", self.group_id, topic,
                          len(info.partitions))
                self._assigned_counts = {}
                self.rejoin_needed = True
                return

    def request_rejoin(self) -> None:
        self.rejoin_needed = True

    def has_news(self) -> bool:
        """A rebalance to start or a finished join to apply: poll() should not sleep."""
        return self.rejoin_needed or self._joined is not None or self.fatal_error is not None

    def time_to_auto_commit(self) -> float:
        """Seconds until the next auto-commit is due (inf without auto-commit)."""
        if not self.config.enable_auto_commit:
            return float("inf")
        return max(0.0, self._next_auto_commit - time.monotonic())

    # ---- the rest -----------------------------------------------------------------------------------------

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id, self.config.group_instance_id,
                                     self.state)

    def _give_back(self, autocommit: bool, deadline: float) -> None:
        """Commit (when asked and enabled, and the membership is current) and call on_partitions_revoked."""
        stable = not self.subscriptions.group_managed or (self.state == MemberState.STABLE
                                                          and self.generation != NO_GENERATION)
        if autocommit and self.config.enable_auto_commit and stable:
            offsets = self.subscriptions.consumed_offsets()
            if offsets:
                try:
                    self.commit(offsets, max(0.0, deadline - time.monotonic()))
                except Exception as exc:
                    _log.warning("group %r: committing the consumed offsets failed: %s", self.group_id, exc)
        if self.subscriptions.group_managed and self.subscriptions.listener is not None:
            assigned = self.subscriptions.assigned_partitions()
            if assigned:
                call_listener(self.subscriptions.listener, "on_partitions_revoked", assigned)
        self.run_commit_callbacks()

    def unsubscribe(self, timeout: float) -> None:
        """User's thread: commit, give the partitions back and leave; a later subscribe() joins again."""
        self._give_back(True, time.monotonic() + timeout)

        def leave() -> None:
            self._leave("the consumer unsubscribed")
            self._joining = False
            self._reset_membership(lost=False)
            self.member_id = UNKNOWN_MEMBER

        self.loop.call_soon_threadsafe(leave)

    def close(self, autocommit: bool, timeout: float) -> None:
        """User's thread: commit (when asked and enabled), hand the partitions back, leave the group."""
        deadline = time.monotonic() + timeout
        try:
            self._give_back(autocommit, deadline)
        finally:
            left = threading.Event()

            def shut() -> None:
                self._stop_heartbeats()
                if self.subscriptions.group_managed:
                    self._leave("the consumer is closing", left)
                else:
                    left.set()
                self._closed = True
                self._joining = False
                waiting, self._waiting_for_coordinator = self._waiting_for_coordinator, []
                for action in waiting:
                    action(None, kerrors.KafkaConnectionError("the consumer is closed"))

            try:
                self.loop.run_in_loop(shut, timeout=max(0.1, deadline - time.monotonic()))
                left.wait(max(0.0, deadline - time.monotonic()))
            except Exception as exc:
                _log.debug("group %r: shutdown on the loop did not finish: %s", self.group_id, exc)
