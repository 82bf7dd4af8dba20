"""Topic administration and message lookup: UPDATE_AND_CREATE_TOPIC 17 (what `mqadmin updateTopic` and
DefaultMQAdminExt send), DELETE_TOPIC_IN_BROKER 215, VIEW_MESSAGE_BY_ID 33 (the record at a CommitLog offset,
as pulled).

Questions for a client, relayed over that client's own connection and answered with its answer, as Apache's
broker does (`mqadmin consumerStatus`, `mqadmin consumeMessage`): GET_CONSUMER_RUNNING_INFO 307 (consumerGroup,
clientId, jstackEnable) and CONSUME_MESSAGE_DIRECTLY 309 (consumerGroup, clientId, msgId: an offset msgId of this
broker, whose record goes to the client as the body). A client that is not connected, or does not answer within
CLIENT_ANSWER_TIMEOUT_S, makes a SYSTEM_ERROR.

An administrator's offset reset, INVOKE_BROKER_TO_RESET_OFFSET 222 (topic, group, timestamp: -1 for the end of
each queue, isForce: also move forward; `mqadmin resetOffsetByTime`), is told to each of the group's connected
consumers with RESET_CONSUMER_CLIENT_OFFSET 220 (oneway; ResetOffsetBody), who restart there and commit, as in
Apache's Broker2Client.resetOffset: the answer lists the offsets told, CONSUMER_NOT_ONLINE when no consumer of
the group is connected (nothing is changed then), SYSTEM_ERROR for a queue the group has no offset of (Apache 5.x
answers so too with useServerSideResetOffset=false; by default it keeps the reset offsets itself and swaps them
into the group's next pulls).

A created or changed topic is registered with the namesrv at once; a deleted one leaves the routes at the next
registration (the core's deletion listeners trigger it). Queue numbers only grow, as for Kafka partitions: the
store keeps a queue's messages, so a smaller number would hide them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from fastmq.broker.errors import TopicError
from fastmq.broker.rocketmq.remoting import Request, RequestError
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.route import MessageQueue
from fastmq.rocketmq.server_requests import reset_offset_body
from fastmq.store import TopicConfig
from fastmq.store.message import decode_message_id

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd
    from fastmq.rocketmq._native.remoting import RemotingCommand

VIEW_MESSAGE_BY_ID = 33
CLIENT_ANSWER_TIMEOUT_S = 10.0
DELETE_TOPIC_IN_BROKER = 215
INVOKE_BROKER_TO_RESET_OFFSET = 222
CONSUMER_NOT_ONLINE = 206
MAX_QUEUES = 1024


def create_topic(front: RocketMQFrontEnd, request: Request) -> None:
    topic = request.text("topic")
    queues = max(request.integer("readQueueNums", 8, 1, MAX_QUEUES),
                 request.integer("writeQueueNums", 8, 1, MAX_QUEUES))
    perm = request.integer("perm", 6, 0, 7)
    sys_flag = request.integer("topicSysFlag", 0, 0, 2 ** 31 - 1)
    existing = front.topic_config(topic)
    if existing is None:
        front.create_topic(topic, queues, perm, sys_flag)
    else:
        if queues > max(existing.read_queue_nums, existing.write_queue_nums):
            try:
                front.broker.topics.add_partitions(topic, queues)
            except TopicError as exc:
                raise RequestError(str(exc)) from None
        config = front.topic_config(topic)
        if config is None:
            raise RequestError(f"topic {topic!r} was deleted meanwhile", ResponseCode.TOPIC_NOT_EXIST)
        front.broker.store.topic_config_manager.update_topic_config(TopicConfig(
            topic, config.read_queue_nums, config.write_queue_nums, perm, config.topic_filter_type, sys_flag,
            request.boolean("order", config.order)))
        front.register()
    request.respond()


def delete_topic(front: RocketMQFrontEnd, request: Request) -> None:
    topic = request.text("topic")
    try:
        front.broker.topics.delete(topic)
    except TopicError as exc:
        raise RequestError(str(exc), ResponseCode.TOPIC_NOT_EXIST) from None
    request.respond()


def view_message(front: RocketMQFrontEnd, request: Request) -> None:
    offset = request.integer("offset", low=0)
    message = front.broker.store.get_message_by_offset(offset)
    if message is None:
        raise RequestError(f"no message at CommitLog offset {offset}", ResponseCode.SYSTEM_ERROR)
    request.respond(body=_record_bytes(front, offset, message.store_size))


def _record_bytes(front: RocketMQFrontEnd, offset: int, size: int) -> bytes:
    # The record was found a moment ago, but its CommitLog file may have been deleted since.
    data = front.broker.store.get_data(offset, size)
    if data is None:
        raise RequestError(f"the message at CommitLog offset {offset} is no longer readable", ResponseCode.SYSTEM_ERROR)
    return bytes(data)


def _relay_to_client(front: RocketMQFrontEnd, request: Request, body: bytes | None = None) -> None:
    group, client_id = request.text("consumerGroup"), request.text("clientId")
    channel = next((c for c in front.clients.channels(group) if c.client_id == client_id), None)
    if channel is None:
        raise RequestError(f"The consumer <{client_id}> of group <{group}> is not online", ResponseCode.SYSTEM_ERROR)

    def answered(answer: RemotingCommand | None) -> None:
        if answer is None:
            request.respond(ResponseCode.SYSTEM_ERROR, remark=f"the consumer <{client_id}> did not answer")
        else:
            request.respond(answer.code, body=answer.body, remark=answer.remark)

    front.remoting_listeners[0].call_client(channel.connection, request.code, dict(request.fields), body, answered,
                                            CLIENT_ANSWER_TIMEOUT_S)


def consumer_running_info(front: RocketMQFrontEnd, request: Request) -> None:
    _relay_to_client(front, request)


def consume_message_directly(front: RocketMQFrontEnd, request: Request) -> None:
    try:
        _, offset = decode_message_id(request.text("msgId"))
    except ValueError as exc:
        raise RequestError(str(exc), ResponseCode.INVALID_PARAMETER) from None
    message = front.broker.store.get_message_by_offset(offset)
    if message is None:
        raise RequestError(f"no message {request.fields['msgId']} on this broker", ResponseCode.SYSTEM_ERROR)
    _relay_to_client(front, request, _record_bytes(front, offset, message.store_size))


def reset_offset(front: RocketMQFrontEnd, request: Request) -> None:
    topic, group = request.text("topic"), request.text("group")
    timestamp = request.integer("timestamp")
    force = request.boolean("isForce", True)
    config = front.topic_config(topic)
    if config is None:
        raise RequestError(f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
    store = front.broker.store
    offsets = {}
    for queue_id in range(config.write_queue_nums):
        committed = front.broker.offsets.fetch(group, topic, queue_id)
        if committed is None:
            raise RequestError(f"THe consumer group <{group}> not exist")
        target = store.get_max_offset(topic, queue_id) if timestamp == -1 else \
            max(store.get_offset_by_time(topic, queue_id, timestamp), 0)
        offsets[MessageQueue(topic, front.settings.broker_name, queue_id)] = \
            target if force or target < committed.offset else committed.offset
    channels = front.clients.channels(group)
    if not channels:
        raise RequestError(f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                           f"Timestamp: {timestamp}", CONSUMER_NOT_ONLINE)
    body = reset_offset_body(offsets)
    for channel in channels:
        front.remoting_listeners[0].tell_client(channel.connection, RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                                {"topic": topic, "group": group, "timestamp": timestamp,
                                                 "isForce": force}, body)
    request.respond(body=body)
