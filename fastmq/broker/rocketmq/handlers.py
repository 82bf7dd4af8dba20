"""The request codes the RocketMQ broker front end serves, and their handlers."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable

from fastmq.broker.rocketmq import admin, consumers, pull, send
from fastmq.broker.rocketmq.remoting import Handler, Request
from fastmq.rocketmq.protocol import RequestCode

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd


def handler_table(front: RocketMQFrontEnd) -> dict[int, Handler]:
    table: dict[int, Callable[[RocketMQFrontEnd, Request], None]] = {
        RequestCode.SEND_MESSAGE: send.send, RequestCode.SEND_MESSAGE_V2: send.send,
        RequestCode.SEND_BATCH_MESSAGE: send.send, RequestCode.CONSUMER_SEND_MSG_BACK: send.send_back,
        RequestCode.PULL_MESSAGE: pull.pull,
        RequestCode.QUERY_CONSUMER_OFFSET: consumers.query_offset,
        RequestCode.UPDATE_CONSUMER_OFFSET: consumers.update_offset,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: consumers.search_offset,
        RequestCode.GET_MAX_OFFSET: consumers.max_offset, RequestCode.GET_MIN_OFFSET: consumers.min_offset,
        consumers.GET_EARLIEST_MSG_STORETIME: consumers.earliest_store_time,
        RequestCode.HEART_BEAT: consumers.heartbeat, RequestCode.UNREGISTER_CLIENT: consumers.unregister,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumers.consumer_list,
        RequestCode.LOCK_BATCH_MQ: consumers.lock_batch, RequestCode.UNLOCK_BATCH_MQ: consumers.unlock_batch,
        RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic, admin.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
        admin.VIEW_MESSAGE_BY_ID: admin.view_message,
        RequestCode.GET_CONSUMER_RUNNING_INFO: admin.consumer_running_info,
        RequestCode.CONSUME_MESSAGE_DIRECTLY: admin.consume_message_directly,
        admin.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offset,
        RequestCode.END_TRANSACTION: lambda front, request: front.transactions.end(request),
    }
    handlers: dict[int, Handler] = {code: functools.partial(handler, front) for code, handler in table.items()}
    if front.acl is not None:
        return {code: front.acl.guard(handler) for code, handler in handlers.items()}
    return handlers
