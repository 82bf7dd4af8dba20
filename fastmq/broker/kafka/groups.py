"""FindCoordinator and the consumer-group APIs, on the core's protocol-free GroupManager (fastmq/broker/groups.py).

This broker coordinates every group and every transactional id.
Groups that exist only through committed offsets (after a restart, or simple consumers) are listed and described
as Empty.
"""
from __future__ import annotations

from typing import Any

from fastmq.broker import groups as core
from fastmq.broker.errors import CoreError
from fastmq.broker.kafka.errors import kafka_code
from fastmq.broker.kafka.front import Request
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

NONE = 0
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
INVALID_REQUEST = kerrors.InvalidRequestError.errno
GROUP_TYPE = "classic"


def handle_find_coordinator(request: Request, body: Any) -> None:
    host, port = request.listener.advertised
    node = request.broker.config.node_id
    if body.key_type in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        error, message = NONE, None
    else:
        error, message = INVALID_REQUEST, f"key type {body.key_type} is not supported"
    ok = error == NONE
    if request.version >= 4:
        coordinator = kp.FindCoordinatorResponse.Coordinator
        request.respond(kp.FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            coordinator(key=key, node_id=node if ok else -1, host=host if ok else "", port=port if ok else -1,
                        error_code=error, error_message=message) for key in body.coordinator_keys]))
        return
    request.respond(kp.FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                               node_id=node if ok else -1, host=host if ok else "",
                                               port=port if ok else -1))


def handle_join_group(request: Request, body: Any) -> None:
    version = request.version

    def answer(result: core.JoinResult) -> None:
        members = [kp.JoinGroupResponse.JoinGroupResponseMember(member_id=member_id, group_instance_id=instance,
                                                                metadata=metadata)
                   for member_id, instance, metadata in result.members]
        protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
        request.respond(kp.JoinGroupResponse(
            throttle_time_ms=0, error_code=kafka_code(result.error), generation_id=result.generation,
            protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader,
            skip_assignment=False, member_id=result.member_id, members=members))

    request.broker.groups.join(
        body.group_id, body.member_id, body.group_instance_id, request.client_id or "", request.client_host,
        body.session_timeout_ms, body.rebalance_timeout_ms, body.protocol_type,
        [(protocol.name, bytes(protocol.metadata)) for protocol in body.protocols], version >= 4, answer)


def handle_sync_group(request: Request, body: Any) -> None:
    def answer(result: core.SyncResult) -> None:
        request.respond(kp.SyncGroupResponse(throttle_time_ms=0, error_code=kafka_code(result.error),
                                             protocol_type=result.protocol_type,
                                             protocol_name=result.protocol_name, assignment=result.assignment))

    assignments = {entry.member_id: bytes(entry.assignment) for entry in body.assignments}
    request.broker.groups.sync(body.group_id, body.generation_id, body.member_id, body.group_instance_id,
                               body.protocol_type if request.version >= 5 else None,
                               body.protocol_name if request.version >= 5 else None, assignments, answer)


def handle_heartbeat(request: Request, body: Any) -> None:
    error = request.broker.groups.heartbeat(body.group_id, body.generation_id, body.member_id,
                                            body.group_instance_id)
    request.respond(kp.HeartbeatResponse(throttle_time_ms=0, error_code=kafka_code(error)))


def handle_leave_group(request: Request, body: Any) -> None:
    groups = request.broker.groups
    if request.version < 3:
        ((_, _, error),) = groups.leave(body.group_id, [(body.member_id, None)])
        request.respond(kp.LeaveGroupResponse(throttle_time_ms=0, error_code=kafka_code(error)))
        return
    results = groups.leave(body.group_id, [(m.member_id, m.group_instance_id) for m in body.members])
    member = kp.LeaveGroupResponse.MemberResponse
    # Each member answers as it was asked for (Apache Kafka's way): a static member named by its instance id
    # keeps the empty member id, which is how an admin's remove_group_members tells its answers apart.
    request.respond(kp.LeaveGroupResponse(throttle_time_ms=0, error_code=NONE, members=[
        member(member_id=asked.member_id, group_instance_id=asked.group_instance_id, error_code=kafka_code(error))
        for asked, (_, _, error) in zip(body.members, results)]))


def handle_describe_groups(request: Request, body: Any) -> None:
    broker = request.broker
    described = kp.DescribeGroupsResponse.DescribedGroup
    member_type = kp.DescribeGroupsResponse.DescribedGroupMember
    groups = []
    for group_id in body.groups:
        description = broker.groups.describe(group_id)
        if description is None:
            state = core.EMPTY if group_id in broker.known_groups() else core.DEAD
            groups.append(described(error_code=NONE, group_id=group_id, group_state=state, protocol_type="",
                                    protocol_data="", members=[]))
            continue
        groups.append(described(
            error_code=NONE, group_id=group_id, group_state=description.state,
            protocol_type=description.protocol_type, protocol_data=description.protocol_name,
            members=[member_type(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                                 client_host=m.client_host, member_metadata=m.metadata,
                                 member_assignment=m.assignment) for m in description.members]))
    request.respond(kp.DescribeGroupsResponse(throttle_time_ms=0, groups=groups))


def handle_list_groups(request: Request, body: Any) -> None:
    broker = request.broker
    listed: dict[str, tuple[str, str]] = {}          # group -> (protocol type, state)
    for group_id in broker.known_groups():
        listed[group_id] = ("", core.EMPTY)
    for group_id, group in broker.groups.groups.items():
        listed[group_id] = (group.protocol_type or "", group.state)
    states = set(body.states_filter) if request.version >= 4 and body.states_filter else None
    types = {t.lower() for t in body.types_filter} if request.version >= 5 and body.types_filter else None
    entry = kp.ListGroupsResponse.ListedGroup
    groups = [entry(group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=GROUP_TYPE)
              for group_id, (protocol_type, state) in sorted(listed.items())
              if (states is None or state in states) and (types is None or GROUP_TYPE in types)]
    request.respond(kp.ListGroupsResponse(throttle_time_ms=0, error_code=NONE, groups=groups))


def handle_delete_groups(request: Request, body: Any) -> None:
    broker = request.broker
    result_type = kp.DeleteGroupsResponse.DeletableGroupResult
    results = []
    known_groups = broker.known_groups()
    with_offsets = broker.offsets.groups()
    to_delete = []
    for group_id in body.groups_names:
        known = group_id in known_groups
        error = broker.groups.delete(group_id) if known else CoreError.GROUP_NOT_FOUND
        if error is None:
            broker.forget_subscription_group(group_id)
            if group_id in with_offsets:
                to_delete.append(group_id)
        results.append(result_type(group_id=group_id, error_code=kafka_code(error)))
    response = kp.DeleteGroupsResponse(throttle_time_ms=0, results=results)
    if not to_delete:
        request.respond(response)
        return
    pending = [len(to_delete)]

    def deleted(ok: bool) -> None:
        pending[0] -= 1
        if pending[0] == 0:
            request.respond(response)

    for group_id in to_delete:
        broker.offsets.delete(group_id, None, deleted)


HANDLERS = {
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
}
