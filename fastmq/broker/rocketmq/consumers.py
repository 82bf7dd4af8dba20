"""What consumers and producers ask besides sending and pulling: offsets (QUERY_CONSUMER_OFFSET 14,
UPDATE_CONSUMER_OFFSET 15, SEARCH_OFFSET_BY_TIMESTAMP 29, GET_MAX_OFFSET 30, GET_MIN_OFFSET 31,
GET_EARLIEST_MSG_STORETIME 32), heartbeats (HEART_BEAT 34, UNREGISTER_CLIENT 35), the members of a group
(GET_CONSUMER_LIST_BY_GROUP 38) and queue locks (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42).

Committed offsets are the core's (consumerOffset.json, "topic@group"), shared with Kafka's committed offsets of
the same group and topic. A group without a committed offset for a queue is answered offset 0 while the queue
still starts at 0 (RocketMQ answers so while the first message is in memory, so that a new group of a new topic
sees its first messages whatever its consumeFromWhere), else QUERY_NOT_FOUND; a 5.x client asking
setZeroIfNotFound=false always gets QUERY_NOT_FOUND then, and applies its consumeFromWhere.

A heartbeat makes every consumer group it names known in subscriptionGroup.json and creates the group's %RETRY%
topic, to which consumers subscribe for their retries. Members joining or leaving a group are told to the
others with NOTIFY_CONSUMER_IDS_CHANGED (40, oneway), so that they rebalance at once instead of within 20 s.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from fastmq.broker.offsets import CommittedOffset
from fastmq.broker.rocketmq.clients import HeartbeatData, HeartbeatError, parse_heartbeat
from fastmq.broker.rocketmq.namesrv import json_body, parse_json_body
from fastmq.broker.rocketmq.remoting import Request, RequestError
from fastmq.rocketmq.protocol import RequestCode, ResponseCode

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd

GET_EARLIEST_MSG_STORETIME = 32
MAX_INT = 2 ** 31 - 1


def _queue(request: Request) -> tuple[str, int]:
    return request.text("topic"), request.integer("queueId", low=0, high=MAX_INT)


def query_offset(front: RocketMQFrontEnd, request: Request) -> None:
    group = request.text("consumerGroup")
    topic, queue_id = _queue(request)
    committed = front.broker.offsets.fetch(group, topic, queue_id)
    if committed is not None:
        request.respond(fields={"offset": committed.offset})
    elif request.fields.get("setZeroIfNotFound", "true").lower() != "false" \
            and front.broker.store.get_min_offset(topic, queue_id) <= 0:
        request.respond(fields={"offset": 0})
    else:
        request.respond(ResponseCode.QUERY_NOT_FOUND,
                        remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")


def update_offset(front: RocketMQFrontEnd, request: Request) -> None:
    group = request.text("consumerGroup")
    topic, queue_id = _queue(request)
    offset = request.integer("commitOffset", low=0)
    front.broker.offsets.commit(group, [(topic, queue_id, CommittedOffset(offset))],
                                lambda ok: request.respond(ResponseCode.SUCCESS if ok else ResponseCode.SYSTEM_ERROR,
                                                           remark=None if ok else "offsets not written"))


def search_offset(front: RocketMQFrontEnd, request: Request) -> None:
    topic, queue_id = _queue(request)
    request.respond(fields={"offset": front.broker.store.get_offset_by_time(topic, queue_id,
                                                                            request.integer("timestamp"))})


def max_offset(front: RocketMQFrontEnd, request: Request) -> None:
    topic, queue_id = _queue(request)
    request.respond(fields={"offset": front.broker.store.get_max_offset(topic, queue_id)})


def min_offset(front: RocketMQFrontEnd, request: Request) -> None:
    topic, queue_id = _queue(request)
    request.respond(fields={"offset": front.broker.store.get_min_offset(topic, queue_id)})


def earliest_store_time(front: RocketMQFrontEnd, request: Request) -> None:
    topic, queue_id = _queue(request)
    store = front.broker.store
    timestamp = store.get_message_store_timestamp(topic, queue_id, store.get_min_offset(topic, queue_id))
    request.respond(fields={"timestamp": max(timestamp, 0)})


def heartbeat_data(request: Request) -> HeartbeatData:
    """The HeartbeatData a HEART_BEAT carries."""
    try:
        return parse_heartbeat(parse_json_body(request, "HEART_BEAT"))
    except HeartbeatError as exc:
        raise RequestError(f"not a HeartbeatData: {exc}") from None


def heartbeat(front: RocketMQFrontEnd, request: Request) -> None:
    data = heartbeat_data(request)
    session = request.session
    session.info.client_id = data.client_id
    for consumer in data.consumers:
        front.broker.register_subscription_group(consumer.group)
        front.ensure_retry_topic(consumer.group)
    front.clients.heartbeat(request.conn, session.language, session.version, data)
    request.respond()


def unregister(front: RocketMQFrontEnd, request: Request) -> None:
    front.clients.unregister(request.conn, request.fields.get("producerGroup"), request.fields.get("consumerGroup"))
    request.respond()


def consumer_list(front: RocketMQFrontEnd, request: Request) -> None:
    group = request.text("consumerGroup")
    ids = front.clients.consumer_ids(group)
    if not ids:
        request.respond(ResponseCode.SYSTEM_ERROR, remark=f"no consumer for this group, {group}")
    else:
        request.respond(body=json_body({"consumerIdList": ids}))


def notify_ids_changed(front: RocketMQFrontEnd, group: str, ids: list[str]) -> None:
    """ClientTable change listener: tell the group's remaining members."""
    config = front.broker.store.subscription_group_manager.find_subscription_group_config(group)
    if config is not None and not config.notify_consumer_ids_changed_enable:
        return
    for channel in front.clients.channels(group):
        front.remoting_listeners[0].tell_client(channel.connection, RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                {"consumerGroup": group})


def _lock_body(request: Request) -> tuple[str, str, list[tuple[str, str, int]]]:
    body = parse_json_body(request, "LOCK_BATCH_MQ")
    if not isinstance(body, dict) or not isinstance(body.get("mqSet", []), list):
        raise RequestError("not a LockBatchRequestBody")
    queues = []
    for mq in body.get("mqSet", []):
        if not isinstance(mq, dict) or not isinstance(mq.get("topic"), str) \
                or not isinstance(mq.get("queueId"), int) or isinstance(mq.get("queueId"), bool):
            raise RequestError(f"mqSet holds MessageQueues {{topic, brokerName, queueId}}, not {json.dumps(mq)[:80]}")
        queues.append((mq["topic"], str(mq.get("brokerName", "")), mq["queueId"]))
    group, client_id = body.get("consumerGroup"), body.get("clientId")
    if not isinstance(group, str) or not isinstance(client_id, str):
        raise RequestError("consumerGroup and clientId must be strings")
    return group, client_id, queues


def lock_batch(front: RocketMQFrontEnd, request: Request) -> None:
    group, client_id, queues = _lock_body(request)
    held = front.locks.lock(group, client_id, queues)
    request.respond(body=json_body({"lockOKMQSet": [{"topic": topic, "brokerName": broker, "queueId": queue_id}
                                                    for topic, broker, queue_id in held]}))


def unlock_batch(front: RocketMQFrontEnd, request: Request) -> None:
    group, client_id, queues = _lock_body(request)
    front.locks.unlock(group, client_id, queues)
    request.respond()
