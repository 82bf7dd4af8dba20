"""The admin client's consumer groups: listing, describing, deleting them, their committed offsets
(reading, altering, deleting) and removing members, each sent to the group's coordinator.

DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit, OffsetDelete and LeaveGroup go to each group's
coordinator (FindCoordinator, batched from v4). COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and
NOT_COORDINATOR make the admin look the coordinator up again and retry that group. ListGroups goes to every broker.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.admin_types import GroupDescription, GroupListing, MemberDescription
from fastmq.kafka.admin_wire import (
    _TIMEOUTS, AdminConnection, _check_unique, _error, _ItemAnswer, _missing, _Reply, _topic_partitions,
    authorized_operations, raise_failures,
)
from fastmq.kafka.protocol.schema import ZERO_UUID
from fastmq.kafka.coordinator import GROUP, coordinator_entries, find_coordinator_request
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition

_log = logging.getLogger(__name__)

_COORDINATOR_RETRY_CODES = frozenset({kerrors.CoordinatorLoadInProgressError.errno,
                                      kerrors.CoordinatorNotAvailableError.errno,
                                      kerrors.NotCoordinatorError.errno})


class GroupAdmin(AdminConnection):
    """The consumer-group operations of Admin (see the module docstring)."""

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

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                            timeout: float | None = None,
                            raise_errors: bool = True) -> dict[TopicPartition, kerrors.KafkaError | None]:
        """Commit offsets (OffsetAndMetadata or a plain offset) for a group that has no active members (an
        unknown group is created Empty); each partition maps to its error or None. A member's group answers
        UNKNOWN_MEMBER_ID per partition."""
        answers = self._commit_group_offsets(group_id, offsets, self._deadline(timeout))
        results = {tp: _error(code, None, f"group {group_id!r} {tp.topic}-{tp.partition}")
                   for tp, code in answers.items()}
        if raise_errors:
            raise_failures("alter_group_offsets", results)
        return results

    def remove_group_members(self, group_id: str, members: Iterable[tuple[str | None, str | None]], *,
                             reason: str | None = None, timeout: float | None = None,
                             raise_errors: bool = True) -> dict[str, kerrors.KafkaError | None]:
        """Make members leave a group (Kafka 2.3+): (member_id, group_instance_id) pairs, either of them None
        (a static member is named by its group_instance_id). {member id or instance id: error or None}; a
        group-level error always raises."""
        answer = self._leave_group(group_id, [(m, i, reason) for m, i in members], self._deadline(timeout))
        results = {m.member_id or m.group_instance_id: _error(m.error_code, None, f"member {m.member_id or m.group_instance_id!r}")
                   for m in answer.struct.members}
        if raise_errors:
            raise_failures("remove_group_members", results)
        return results

    # ---- groups on the wire ---------------------------------------------------------------------------

    def _find_coordinators(self, groups: list[str], deadline: float,
                           key_type: int = GROUP) -> tuple[dict[str, int], dict[str, _ItemAnswer]]:
        """({key: coordinator}, {key: lookup failure}) of groups (or of transactional ids: key_type
        TRANSACTION); lookups answered with a coordinator error are retried within the deadline. Found
        coordinators are remembered until a request to them says otherwise."""
        found = {g: self._coordinators[key_type, g] for g in groups if (key_type, g) in self._coordinators}
        failed: dict[str, _ItemAnswer] = {}
        missing = [g for g in groups if g not in found]
        refused: dict[str, _ItemAnswer] = {}
        attempts = 0
        while missing:
            attempts += 1
            request = find_coordinator_request(missing, key_type)
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
            delay = self._retry_delay(kerrors.CoordinatorNotAvailableError, attempts, deadline)
            new_nodes = []
            for key, code, message, node_id, host, port in rows:
                if key not in asked or key in found or key in failed or key in refused:
                    continue
                if not code:
                    found[key] = self._coordinators[key_type, key] = node_id
                    new_nodes.append((node_id, host, port))
                elif code in _COORDINATOR_RETRY_CODES and delay is not None:
                    refused[key] = _ItemAnswer(code, message, None, reply.version)
                else:
                    failed[key] = _ItemAnswer(code, message, None, reply.version)
            self._register_nodes(new_nodes)
            for key in asked:
                if key not in found and key not in failed and key not in refused:
                    failed[key] = _ItemAnswer(kerrors.UnknownError.errno,
                                              "the FindCoordinator response does not mention it", None, reply.version)
            missing = [g for g in missing if g not in found and g not in failed]
            if refused and delay is not None:     # refused only holds anything with a delay to wait
                time.sleep(delay)
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
        attempts = 0
        while pending:
            attempts += 1
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
            delay = None if coordinator is not None else self._retry_delay(
                kerrors.NotCoordinatorError, attempts, deadline)
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
                    if code in _COORDINATOR_RETRY_CODES and delay is not None:
                        self._coordinators.pop((GROUP, group_id), None)
                        refused[group_id] = answer
                    else:
                        results[group_id] = answer
            pending = list(refused)
            if refused and delay is not None:     # refused only holds anything with a delay to wait
                _log.debug("coordinator errors for groups %s; looking them up again", pending)
                time.sleep(delay)
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


    def _commit_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                              deadline: float, coordinator: int | None = None) -> dict[TopicPartition, int]:
        """OffsetCommit outside any generation (as an admin, not a member): {TopicPartition: error code}.
        A failed coordinator lookup raises its error."""
        committed = {tp: meta if isinstance(meta, OffsetAndMetadata) else OffsetAndMetadata(meta)
                     for tp, meta in offsets.items()}
        by_topic = _topic_partitions(committed)
        if not by_topic:
            return {}
        # OffsetCommit v10 names topics by id: a Metadata request learns them (zero for unknown topics).
        ids = {t.name: t.topic_id for t in self._metadata(list(by_topic), deadline).response.topics}
        names = {topic_id: name for name, topic_id in ids.items()}
        O = kp.OffsetCommitRequest
        request = O(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", topics=[
            O.OffsetCommitRequestTopic(name=topic, topic_id=ids.get(topic, ZERO_UUID), partitions=[
                O.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=committed[TopicPartition(topic, p)].offset,
                    committed_leader_epoch=_epoch(committed[TopicPartition(topic, p)].leader_epoch),
                    committed_metadata=committed[TopicPartition(topic, p)].metadata)
                for p in partitions])
            for topic, partitions in by_topic.items()])

        def answers(response: Any, version: int, asked: list[str]) -> Iterable[tuple[str, int, str | None, Any]]:
            # OffsetCommit has no group-level error: a coordinator error stands in every partition.
            codes = [p.error_code for t in response.topics for p in t.partitions]
            moved = [code for code in codes if code in _COORDINATOR_RETRY_CODES]
            yield asked[0], moved[0] if moved else 0, None, response

        answer = self._group_call([group_id], lambda groups: request, answers, deadline, batch=False,
                                  coordinator=coordinator)[group_id]
        if answer.struct is None:
            error = _error(answer.code or kerrors.UnknownError.errno, answer.message, f"group {group_id!r}")
            assert error is not None            # its code is never 0
            raise error
        return {TopicPartition(topic.name if answer.version < 10 else names.get(topic.topic_id, str(topic.topic_id)),
                               p.partition_index): p.error_code
                for topic in answer.struct.topics for p in topic.partitions}

    def _leave_group(self, group_id: str, members: list[tuple[str | None, str | None, str | None]],
                     deadline: float, coordinator: int | None = None) -> _ItemAnswer:
        """LeaveGroup v3+ for (member_id, group_instance_id, reason) of other clients' members; a group-level
        error raises, IncompatibleBrokerVersion below v3 (which names only the sender itself)."""
        for member_id, instance_id, _ in members:
            if not member_id and not instance_id:
                raise ValueError("a member to remove needs a member_id or a group_instance_id")
        L = kp.LeaveGroupRequest
        request = L(group_id=group_id, members=[
            L.MemberIdentity(member_id=member_id or "", group_instance_id=instance_id, reason=reason)
            for member_id, instance_id, reason in members])

        def answers(response: Any, version: int, asked: list[str]) -> Iterable[tuple[str, int, str | None, Any]]:
            yield asked[0], response.error_code, None, response

        answer = self._group_call([group_id], lambda groups: request, answers, deadline, batch=False,
                                  coordinator=coordinator)[group_id]
        if 0 <= answer.version < 3:
            raise kerrors.IncompatibleBrokerVersion(
                f"the coordinator speaks LeaveGroup v{answer.version}, which cannot remove other members (v3+)")
        error = _error(answer.code, answer.message, f"group {group_id!r}")
        if error is None and answer.struct is None:
            error = _missing(f"group {group_id!r}", "LeaveGroup")
        if error is not None:
            raise error
        return answer


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


def _epoch(leader_epoch: int | None) -> int:
    return -1 if leader_epoch is None else leader_epoch
