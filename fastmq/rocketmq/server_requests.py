"""Requests a broker sends to a client (ClientRemotingProcessor of the Java client), and what answers them.

- NOTIFY_CONSUMER_IDS_CHANGED 40 (oneway, consumerGroup): the group's consumers rebalance now.
- GET_CONSUMER_RUNNING_INFO 307 (consumerGroup, clientId, jstackEnable): the consumer's ConsumerRunningInfo as JSON
  (properties, subscriptionSet, mqTable, statusTable, and the threads' stacks when jstackEnable). An administrator
  asks the broker (`mqadmin consumerStatus`, the dashboard) and the broker asks the client over its connection.
- CONSUME_MESSAGE_DIRECTLY 309 (consumerGroup, clientId, msgId, brokerName; body: the message record): a push
  consumer's listener runs on that one message (`mqadmin consumeMessage`); the answer is ConsumeMessageDirectlyResult
  {order, autoCommit, consumeResult CR_SUCCESS|CR_LATER|CR_RETURN_NULL|CR_THROW_EXCEPTION, remark, spentTimeMills}.
- RESET_CONSUMER_CLIENT_OFFSET 220 (oneway; topic, group, timestamp, isForce; body ResetOffsetBody, the new offset
  of each queue of the topic on that broker): sent by a broker for an administrator's INVOKE_BROKER_TO_RESET_OFFSET
  (`mqadmin resetOffsetByTime`); the group's consumers drop what they fetched of those queues, go on from the new
  offsets and commit them.
- CHECK_TRANSACTION_STATE 39 (oneway; tranStateTableOffset, commitLogOffset, msgId, transactionId, offsetMsgId;
  body: the half message): the transaction producer of the message's PGROUP asks its listener and sends
  END_TRANSACTION (fastmq.rocketmq.transaction).

ConsumerRunningInfo's mqTable and ResetOffsetBody's offsetTable are maps keyed by MessageQueue objects. Java writes
them with fastjson, whose output (and input) has the key object itself before the colon:
{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}. That is not standard JSON, but it is what the Java tools
parse, so it is written so, and read back.
"""
from __future__ import annotations

import json
import logging
import re
import sys
import threading
import traceback
from concurrent.futures import Future
from typing import Any

from fastmq.errors import CorruptDataError
from fastmq.rocketmq._native.messages import decode_messages
from fastmq.rocketmq._native.remoting import FLAG_RESPONSE, RemotingCommand
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.route import MessageQueue

_log = logging.getLogger(__name__)
_QUEUE_KEY = re.compile(r'\{"brokerName":("(?:[^"\\]|\\.)*"),"queueId":(-?\d+),"topic":("(?:[^"\\]|\\.)*")\}:')


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _queue_key(queue: MessageQueue) -> str:
    return _json({"brokerName": queue.broker_name, "queueId": queue.queue_id, "topic": queue.topic})


def _queue_keyed(table: dict[MessageQueue, Any]) -> str:
    """A map keyed by MessageQueue objects as fastjson writes it."""
    return "{" + ",".join(_queue_key(queue) + ":" + _json(value) for queue, value in table.items()) + "}"


def running_info_json(info: dict[str, Any], jstack: bool) -> bytes:
    """ConsumerRunningInfo as fastjson writes it (fields in name order, MessageQueue keys as objects)."""
    parts = []
    if jstack:
        parts.append('"jstack":' + _json(thread_stacks()))
    parts += ['"mqTable":' + _queue_keyed(info["mqTable"]), '"properties":' + _json(info["properties"]),
              '"statusTable":' + _json(info.get("statusTable", {})),
              '"subscriptionSet":' + _json(info["subscriptionSet"])]
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def parse_running_info(body: bytes) -> dict[str, Any]:
    """The inverse of running_info_json (mqTable keyed by MessageQueue); CorruptDataError when it is not one."""
    return _parse_queue_keyed(body, "mqTable", "ConsumerRunningInfo")


def reset_offset_body(offsets: dict[MessageQueue, int]) -> bytes:
    """ResetOffsetBody: {"offsetTable": {MessageQueue: offset}}, what RESET_CONSUMER_CLIENT_OFFSET carries."""
    return ('{"offsetTable":' + _queue_keyed(offsets) + "}").encode("utf-8")


def parse_reset_offset_body(body: bytes) -> dict[MessageQueue, int]:
    """The offsets of a ResetOffsetBody; CorruptDataError when it is not one."""
    # MessageQueue keys by _parse_queue_keyed; the values are checked next.
    table: dict[MessageQueue, int] = _parse_queue_keyed(body, "offsetTable", "ResetOffsetBody")["offsetTable"]
    if not all(isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0
               for offset in table.values()):
        raise CorruptDataError("not a ResetOffsetBody: offsets must be whole numbers >= 0")
    return table


def _parse_queue_keyed(body: bytes, field: str, what: str) -> dict[str, Any]:
    """A JSON object whose `field` is a map keyed by MessageQueue objects (read into MessageQueue keys)."""
    queues: list[MessageQueue] = []

    def key(match: re.Match[str]) -> str:
        # a placeholder no key of the body can equal: a NUL, then the queue's index (duplicates are refused below)
        queues.append(MessageQueue(json.loads(match[3]), json.loads(match[1]), int(match[2])))
        return f'"\\u0000{len(queues) - 1}":'

    try:
        parsed: dict[str, Any] = json.loads(_QUEUE_KEY.sub(key, body.decode("utf-8")), object_pairs_hook=_unique_keys)
        parsed[field] = {queues[int(index[1:])]: value for index, value in parsed[field].items()
                         if index.startswith("\0") or _not_a_queue(index)}
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise CorruptDataError(f"not a {what}: {exc!r}") from None
    return parsed


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("a key appears twice")
    return result


def _not_a_queue(key: str) -> bool:
    raise ValueError(f"the key {key!r} is not a MessageQueue")


def thread_stacks() -> str:
    """Every thread's stack, as jstack lists Java's."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(f'"{names.get(ident, ident)}"\n' + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


def _response(request: RemotingCommand, code: int, body: bytes | None = None,
              remark: str | None = None) -> RemotingCommand:
    return RemotingCommand(code, request.opaque, flag=FLAG_RESPONSE, body=body, remark=remark)


def answer(instance: Any, address: str, request: RemotingCommand
           ) -> RemotingCommand | Future[RemotingCommand] | None:
    """The answer to a broker's request to the client instance (None: no answer, or not supported)."""
    fields = request.ext_fields
    group = fields.get("consumerGroup", "")
    if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
        for consumer in instance.members_of("consumer", group):
            consumer.rebalance_soon()
        return None
    if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        for consumer in instance.members_of("consumer", group):
            body = running_info_json(consumer.running_info(), fields.get("jstackEnable") == "true")
            return _response(request, ResponseCode.SUCCESS, body)
        return _response(request, ResponseCode.SYSTEM_ERROR,
                         remark=f"The Consumer Group <{group}> not exist in this consumer")
    if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
        for consumer in instance.members_of("consumer", group):
            if hasattr(consumer, "consume_directly"):
                return _consume_directly(consumer, request)
        return _response(request, ResponseCode.SYSTEM_ERROR,
                         remark=f"The Consumer Group <{group}> not exist in this consumer")
    if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
        try:
            offsets = parse_reset_offset_body(request.body or b"")
        except CorruptDataError as exc:
            _log.warning("a reset of group %s's offsets from %s is unreadable: %s", fields.get("group"), address, exc)
            return None
        topic = fields.get("topic")
        for consumer in instance.members_of("consumer", fields.get("group", "")):
            consumer.reset_offsets({queue: offset for queue, offset in offsets.items() if queue.topic == topic})
        return None
    if request.code == RequestCode.CHECK_TRANSACTION_STATE:
        messages = decode_messages(request.body or b"", check_crc=False)
        if messages:
            producer_group = messages[0].properties.get("PGROUP", "")
            for producer in instance.members_of("producer", producer_group):
                if hasattr(producer, "check_transaction"):
                    producer.check_transaction(address, fields, messages[0])
                    break
        return None
    return None


def _consume_directly(consumer: Any, request: RemotingCommand) -> Future[RemotingCommand]:
    answered: Future[RemotingCommand] = Future()
    messages = decode_messages(request.body or b"", check_crc=False)
    if not messages:
        answered.set_result(_response(request, ResponseCode.SYSTEM_ERROR, remark="no message in the request"))
        return answered
    consumed = consumer.consume_directly(messages[0])
    consumed.add_done_callback(lambda done: answered.set_result(
        _response(request, ResponseCode.SUCCESS, _json(done.result()).encode()) if done.exception() is None
        else _response(request, ResponseCode.SYSTEM_ERROR, remark=str(done.exception()))))
    return answered
