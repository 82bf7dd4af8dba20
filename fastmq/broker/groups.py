"""The group manager: consumer-group membership (the rules of Kafka's classic protocol: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) as a state machine that knows nothing of any wire format. Front ends call it with plain values on the
broker's I/O thread and get their answers through callbacks, so that a join can wait for the rest of the group.

States (Kafka's): Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to PreparingRebalance
whenever membership or a member's protocols change.
- Join: a new member without an id gets one and MEMBER_ID_REQUIRED (when the front end asks for that), and joins
  again with it. A rebalance waits until every known member (and every member handed an id) has joined, or the
  largest rebalance timeout passes (members that did not join are removed). The first rebalance of an empty
  group waits initial_rebalance_delay first, extended while members keep arriving (Kafka's
  group.initial.rebalance.delay.ms), so a group starting together settles in one generation.
- Completing: every joined member gets the generation; the leader (kept from the last generation when it is
  still a member) gets the members' metadata. The group then waits for the leader's SyncGroup, whose
  assignments every member's SyncGroup returns; without it within the rebalance timeout, the members that did
  not sync are removed and the group rebalances.
- Sessions: a member that neither heartbeats nor joins nor syncs within its session timeout is removed (members
  waiting for a join or sync answer are alive by definition).
- Static members (group.instance.id) keep their place across restarts: a rejoin under the same instance id takes
  over the old member id's place; when nothing changed and the group is stable, without a rebalance.
Refusals are CoreErrors (None: done), which each front end maps onto its protocol's codes.
"""
from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any, Callable, Protocol

from fastmq.broker.errors import CoreError

log = logging.getLogger(__name__)

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

class Scheduler(Protocol):
    """What the group manager needs of an event loop (fastmq.io.IOLoop is one)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Any: ...


@dataclasses.dataclass
class GroupSettings:
    initial_rebalance_delay_ms: int = 100
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 1000


@dataclasses.dataclass
class JoinResult:
    error: CoreError | None
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = dataclasses.field(default_factory=list)  # leader only


@dataclasses.dataclass
class SyncResult:
    error: CoreError | None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclasses.dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclasses.dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: list[MemberDescription]


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


class Member:
    __slots__ = ("member_id", "instance_id", "client_id", "client_host", "session_timeout", "rebalance_timeout",
                 "protocol_type", "protocols", "assignment", "join_callback", "sync_callback", "deadline",
                 "expiry_timer")

    def __init__(self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                 session_timeout: float, rebalance_timeout: float, protocol_type: str,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout = session_timeout
        self.rebalance_timeout = rebalance_timeout
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_callback: JoinCallback | None = None
        self.sync_callback: SyncCallback | None = None
        self.deadline = 0.0
        self.expiry_timer: Any = None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    @property
    def waiting(self) -> bool:
        return self.join_callback is not None or self.sync_callback is not None


class Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.instances: dict[str, str] = {}           # group.instance.id -> member id
        self.pending: dict[str, Any] = {}             # member ids handed out with MEMBER_ID_REQUIRED -> timer
        self.rebalance_timer: Any = None
        self.initial_delay_until = 0.0                # > 0 while the first rebalance's delay runs
        self.initial_delay_deadline = 0.0             # the delay never runs past this

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            mine = {name for name, _ in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def accepts(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & {name for name, _ in protocols})

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member's instance id now belongs to another member id (a newer incarnation)."""
        return instance_id is not None and self.instances.get(instance_id, member_id) != member_id

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_callback is not None for m in self.members.values())


class GroupManager:
    def __init__(self, scheduler: Scheduler, settings: GroupSettings | None = None) -> None:
        self.scheduler = scheduler
        self.settings = settings or GroupSettings()
        self.groups: dict[str, Group] = {}
        # Called with (group id, member) when a member joins or leaves a group (connection management, stats).
        self.membership_listeners: list[Callable[[str, Member, bool], None]] = []

    # -- JoinGroup --------------------------------------------------------------------------------------------

    def join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool, callback: JoinCallback) -> None:
        settings = self.settings
        if not group_id:
            callback(JoinResult(CoreError.INVALID_GROUP_ID, member_id))
            return
        if not settings.min_session_timeout_ms <= session_timeout_ms <= settings.max_session_timeout_ms:
            callback(JoinResult(CoreError.INVALID_SESSION_TIMEOUT, member_id))
            return
        if not protocol_type or not protocols:
            callback(JoinResult(CoreError.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                callback(JoinResult(CoreError.UNKNOWN_MEMBER, member_id))
                return
            group = self.groups[group_id] = Group(group_id)
        if group.state == DEAD:
            callback(JoinResult(CoreError.NOT_AVAILABLE, member_id))
            return
        if not group.accepts(protocol_type, protocols):
            callback(JoinResult(CoreError.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        session = session_timeout_ms / 1000.0
        rebalance = (rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms) / 1000.0
        args = (client_id, client_host, session, rebalance, protocol_type, protocols)
        if not member_id:
            self._join_unknown(group, instance_id, require_known_member_id, args, callback)
        elif member_id in group.pending:
            group.pending.pop(member_id).cancel()
            self._add_member(group, Member(member_id, instance_id, *args), callback)
        else:
            self._join_known(group, member_id, instance_id, args, callback)

    def _join_unknown(self, group: Group, instance_id: str | None, require_known_member_id: bool, args: tuple[Any, ...],
                      callback: JoinCallback) -> None:
        client_id = args[0]
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.instances:
            self._replace_static_member(group, group.members[group.instances[instance_id]], new_id, args, callback)
            return
        if len(group.members) + len(group.pending) >= self.settings.max_size:
            callback(JoinResult(CoreError.GROUP_FULL, ""))
            return
        if instance_id is None and require_known_member_id:
            session = args[2]
            group.pending[new_id] = self.scheduler.call_later(session, self._expire_pending, group, new_id)
            callback(JoinResult(CoreError.MEMBER_ID_REQUIRED, new_id))
            return
        self._add_member(group, Member(new_id, instance_id, *args), callback)

    def _replace_static_member(self, group: Group, old: Member, new_id: str, args: tuple[Any, ...],
                               callback: JoinCallback) -> None:
        unchanged = old.protocols == args[5] and old.protocol_type == args[4]
        was_leader = group.leader_id == old.member_id
        # The old id is fenced: whoever still waits under it is told so.
        self._answer_waiting(old, CoreError.FENCED_INSTANCE)
        self._cancel_expiry(old)
        del group.members[old.member_id]
        member = Member(new_id, old.instance_id, *args)
        member.assignment = old.assignment
        group.members[new_id] = member
        assert old.instance_id is not None          # only static members are replaced
        group.instances[old.instance_id] = new_id
        if was_leader:
            group.leader_id = new_id
        if group.state == STABLE and unchanged and not was_leader:
            self._touch(group, member)
            callback(self._join_result(group, member, with_members=False))
            return
        member.join_callback = callback
        self._touch(group, member)
        if group.state == PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {old.instance_id} rejoined")

    def _join_known(self, group: Group, member_id: str, instance_id: str | None, args: tuple[Any, ...],
                    callback: JoinCallback) -> None:
        if group.fenced(member_id, instance_id):
            callback(JoinResult(CoreError.FENCED_INSTANCE, member_id))
            return
        member = group.members.get(member_id)
        if member is None:
            callback(JoinResult(CoreError.UNKNOWN_MEMBER, member_id))
            return
        client_id, client_host, session, rebalance, protocol_type, protocols = args
        changed = protocols != member.protocols
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout, member.rebalance_timeout = session, rebalance
        if group.state == PREPARING_REBALANCE:
            member.protocols = protocols
            if member.join_callback is not None:      # a second join while waiting: the old one is superseded
                member.join_callback(JoinResult(CoreError.UNKNOWN_MEMBER, member_id))
            member.join_callback = callback
            self._touch(group, member)
            self._maybe_complete_join(group)
        elif group.state == COMPLETING_REBALANCE and not changed:
            self._touch(group, member)
            callback(self._join_result(group, member, with_members=member_id == group.leader_id))
        elif group.state == STABLE and not changed and member_id != group.leader_id:
            self._touch(group, member)
            callback(self._join_result(group, member, with_members=False))
        else:
            member.protocols = protocols
            member.join_callback = callback
            self._touch(group, member)
            self._prepare_rebalance(group, f"member {member_id} rejoined")

    def _add_member(self, group: Group, member: Member, callback: JoinCallback) -> None:
        member.join_callback = callback
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.instances[member.instance_id] = member.member_id
        if group.protocol_type is None:
            group.protocol_type = member.protocol_type
        self._touch(group, member)
        for listener in self.membership_listeners:
            listener(group.group_id, member, True)
        if group.state == PREPARING_REBALANCE:
            if group.initial_delay_until:
                self._extend_initial_delay(group)
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} joined")

    # -- rebalancing ------------------------------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == COMPLETING_REBALANCE:
            for member in group.members.values():
                if member.sync_callback is not None:
                    callback, member.sync_callback = member.sync_callback, None
                    callback(SyncResult(CoreError.REBALANCE_IN_PROGRESS))
        initial = group.state == EMPTY
        group.state = PREPARING_REBALANCE
        self._cancel_rebalance_timer(group)
        now = self.scheduler.time()
        timeout = max((m.rebalance_timeout for m in group.members.values()), default=0.0)
        log.info("group %s: rebalancing (generation %d): %s", group.group_id, group.generation, reason)
        if initial and self.settings.initial_rebalance_delay_ms > 0:
            delay = self.settings.initial_rebalance_delay_ms / 1000.0
            group.initial_delay_deadline = now + max(timeout, delay)
            group.initial_delay_until = now + delay
            group.rebalance_timer = self.scheduler.call_later(delay, self._initial_delay_over, group)
            return
        group.rebalance_timer = self.scheduler.call_later(timeout, self._join_timed_out, group)
        self._maybe_complete_join(group)

    def _extend_initial_delay(self, group: Group) -> None:
        now = self.scheduler.time()
        group.initial_delay_until = min(now + self.settings.initial_rebalance_delay_ms / 1000.0,
                                        group.initial_delay_deadline)

    def _initial_delay_over(self, group: Group) -> None:
        group.rebalance_timer = None
        if group.state != PREPARING_REBALANCE or not group.initial_delay_until:
            return
        remaining = group.initial_delay_until - self.scheduler.time()
        if remaining > 0.001:
            group.rebalance_timer = self.scheduler.call_later(remaining, self._initial_delay_over, group)
            return
        group.initial_delay_until = 0.0
        timeout = max((m.rebalance_timeout for m in group.members.values()), default=0.0)
        group.rebalance_timer = self.scheduler.call_later(timeout, self._join_timed_out, group)
        self._maybe_complete_join(group)

    def _join_timed_out(self, group: Group) -> None:
        group.rebalance_timer = None
        if group.state == PREPARING_REBALANCE:
            self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state == PREPARING_REBALANCE and not group.initial_delay_until and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._cancel_rebalance_timer(group)
        group.initial_delay_until = 0.0
        for timer in group.pending.values():
            timer.cancel()
        group.pending.clear()
        for member in [m for m in group.members.values() if m.join_callback is None]:
            log.info("group %s: member %s did not rejoin in time; removed", group.group_id, member.member_id)
            self._remove_member(group, member)
        group.generation += 1
        if not group.members:
            group.state = EMPTY
            group.protocol_name = None
            group.leader_id = None
            log.info("group %s is empty (generation %d)", group.group_id, group.generation)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = COMPLETING_REBALANCE
        for member in group.members.values():
            member.assignment = b""
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s", group.group_id,
                 group.generation, len(group.members), group.protocol_name, group.leader_id)
        for member in list(group.members.values()):
            callback, member.join_callback = member.join_callback, None
            assert callback is not None             # the join completes once every member waits in it
            self._touch(group, member)
            callback(self._join_result(group, member, with_members=member.member_id == group.leader_id))
        timeout = max(m.rebalance_timeout for m in group.members.values())
        group.rebalance_timer = self.scheduler.call_later(timeout, self._sync_timed_out, group, group.generation)

    def _sync_timed_out(self, group: Group, generation: int) -> None:
        group.rebalance_timer = None
        if group.state != COMPLETING_REBALANCE or group.generation != generation:
            return
        for member in [m for m in group.members.values() if m.sync_callback is None]:
            log.info("group %s: member %s did not sync in time; removed", group.group_id, member.member_id)
            self._remove_member(group, member)
        self._prepare_rebalance(group, "the leader's assignment did not arrive in time")

    def _join_result(self, group: Group, member: Member, with_members: bool) -> JoinResult:
        members = []
        if with_members:
            members = [(m.member_id, m.instance_id, m.metadata(group.protocol_name or ""))
                       for m in group.members.values()]
        return JoinResult(None, member.member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", members)

    # -- SyncGroup --------------------------------------------------------------------------------------------

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             callback: SyncCallback) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.fenced(member_id, instance_id):
            callback(SyncResult(CoreError.FENCED_INSTANCE))
            return
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            callback(SyncResult(CoreError.UNKNOWN_MEMBER))
            return
        if generation != group.generation:
            callback(SyncResult(CoreError.STALE_GENERATION))
            return
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            callback(SyncResult(CoreError.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.state == PREPARING_REBALANCE:
            callback(SyncResult(CoreError.REBALANCE_IN_PROGRESS))
            return
        self._touch(group, member)
        if group.state == STABLE:
            callback(SyncResult(None, group.protocol_type, group.protocol_name, member.assignment))
            return
        if group.state != COMPLETING_REBALANCE:
            callback(SyncResult(CoreError.UNKNOWN_MEMBER))
            return
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(CoreError.REBALANCE_IN_PROGRESS))
        member.sync_callback = callback
        if member_id == group.leader_id:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            group.state = STABLE
            self._cancel_rebalance_timer(group)
            for other in group.members.values():
                if other.sync_callback is not None:
                    waiting, other.sync_callback = other.sync_callback, None
                    waiting(SyncResult(None, group.protocol_type, group.protocol_name, other.assignment))

    # -- Heartbeat and LeaveGroup -----------------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> CoreError | None:
        group = self.groups.get(group_id)
        if group is None:
            return CoreError.UNKNOWN_MEMBER
        if group.state == DEAD:
            return CoreError.NOT_AVAILABLE
        if group.fenced(member_id, instance_id):
            return CoreError.FENCED_INSTANCE
        member = group.members.get(member_id)
        if member is None:
            return CoreError.UNKNOWN_MEMBER
        if generation != group.generation:
            return CoreError.STALE_GENERATION
        self._touch(group, member)
        return CoreError.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else None

    def leave(self, group_id: str,
              members: list[tuple[str, str | None]]) -> list[tuple[str, str | None, CoreError | None]]:
        """Remove members, given by member id or (with an empty id) by group.instance.id; per member an error."""
        group = self.groups.get(group_id)
        results: list[tuple[str, str | None, CoreError | None]] = []
        removed = False
        for member_id, instance_id in members:
            if group is None:
                results.append((member_id, instance_id, CoreError.UNKNOWN_MEMBER))
                continue
            if not member_id and instance_id is not None:
                member_id = group.instances.get(instance_id, "")
            elif group.fenced(member_id, instance_id):
                results.append((member_id, instance_id, CoreError.FENCED_INSTANCE))
                continue
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
                results.append((member_id, instance_id, None))
                removed = True
                continue
            member = group.members.get(member_id)
            if member is None:
                results.append((member_id, instance_id, CoreError.UNKNOWN_MEMBER))
                continue
            self._answer_waiting(member, CoreError.UNKNOWN_MEMBER)
            self._remove_member(group, member)
            results.append((member_id, instance_id, None))
            removed = True
        if removed and group is not None:
            self._membership_changed(group, "members left")
        return results

    def _membership_changed(self, group: Group, reason: str) -> None:
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state == PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        self._cancel_expiry(member)
        group.members.pop(member.member_id, None)
        if member.instance_id is not None and group.instances.get(member.instance_id) == member.member_id:
            del group.instances[member.instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = None
        for listener in self.membership_listeners:
            listener(group.group_id, member, False)

    @staticmethod
    def _answer_waiting(member: Member, error: CoreError) -> None:
        if member.join_callback is not None:
            join_callback, member.join_callback = member.join_callback, None
            join_callback(JoinResult(error, member.member_id))
        if member.sync_callback is not None:
            sync_callback, member.sync_callback = member.sync_callback, None
            sync_callback(SyncResult(error))

    # -- sessions ---------------------------------------------------------------------------------------------

    def _touch(self, group: Group, member: Member) -> None:
        # Deadlines move with every contact; the one timer per member re-arms itself lazily when it fires.
        member.deadline = self.scheduler.time() + member.session_timeout
        if member.expiry_timer is None:
            member.expiry_timer = self.scheduler.call_later(member.session_timeout, self._check_expiry, group,
                                                            member)

    def _check_expiry(self, group: Group, member: Member) -> None:
        member.expiry_timer = None
        if group.members.get(member.member_id) is not member:
            return
        remaining = member.deadline - self.scheduler.time()
        if member.waiting or remaining > 0:
            member.expiry_timer = self.scheduler.call_later(max(remaining, member.session_timeout / 10),
                                                            self._check_expiry, group, member)
            return
        log.info("group %s: member %s missed its session timeout; removed", group.group_id, member.member_id)
        self._remove_member(group, member)
        self._membership_changed(group, f"member {member.member_id} expired")

    @staticmethod
    def _cancel_expiry(member: Member) -> None:
        if member.expiry_timer is not None:
            member.expiry_timer.cancel()
            member.expiry_timer = None

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._maybe_complete_join(group)

    @staticmethod
    def _cancel_rebalance_timer(group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None

    # -- offsets, listing, deletion ---------------------------------------------------------------------------

    def validate_commit(self, group_id: str, generation: int, member_id: str,
                        instance_id: str | None) -> CoreError | None:
        """Whether a member may commit offsets for the group now (Kafka's rules for OffsetCommit); generation < 0:
        a committer outside the group's membership."""
        group = self.groups.get(group_id)
        if group is None or group.state == EMPTY:
            if generation < 0:
                return None                    # a simple consumer or an admin tool: no membership
            if group is None or member_id not in group.members:
                return CoreError.UNKNOWN_MEMBER
            return CoreError.STALE_GENERATION
        if group.state == DEAD:
            return CoreError.NOT_AVAILABLE
        if group.fenced(member_id, instance_id):
            return CoreError.FENCED_INSTANCE
        if group.state == COMPLETING_REBALANCE:
            return CoreError.REBALANCE_IN_PROGRESS
        if member_id not in group.members:
            return CoreError.UNKNOWN_MEMBER
        if generation != group.generation:
            return CoreError.STALE_GENERATION
        return None

    def describe(self, group_id: str) -> GroupDescription | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        protocol = group.protocol_name or ""
        stable = group.state == STABLE
        members = [MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host, m.metadata(protocol),
                                     m.assignment if stable else b"") for m in group.members.values()]
        return GroupDescription(group_id, group.state, group.protocol_type or "",
                                protocol if group.state in (STABLE, COMPLETING_REBALANCE) else "", members)

    def delete(self, group_id: str) -> CoreError | None:
        """Forget an empty group (its offsets are the caller's); NON_EMPTY_GROUP while it has members."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members or group.pending or group.state not in (EMPTY, DEAD):
            return CoreError.NON_EMPTY_GROUP
        group.state = DEAD
        del self.groups[group_id]
        return None

    def close(self) -> None:
        """Answer everyone still waiting (the broker is going away) and stop every timer."""
        for group in self.groups.values():
            self._cancel_rebalance_timer(group)
            for timer in group.pending.values():
                timer.cancel()
            for member in group.members.values():
                self._cancel_expiry(member)
                self._answer_waiting(member, CoreError.NOT_AVAILABLE)
