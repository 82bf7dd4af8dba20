"""SEND_MESSAGE 10, SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320 and CONSUMER_SEND_MSG_BACK 36.

SEND: the message (body, properties "k\\x01v\\x02...", flag, sysFlag, bornTimestamp) goes to queueId of the topic
(a negative queueId: any queue), the topic created from the template named by defaultTopic when it is new. V2
names the same header fields a..n. A batch's body holds the messages in MessageDecoder.encodeMessages' layout
(decoded by fastmq.rocketmq's codec) and takes consecutive offsets of one queue. The answer says msgId (the
offset message id; comma-separated for a batch), queueId and queueOffset. With the store's SYNC_FLUSH the answer
waits for the fsync (FLUSH_DISK_TIMEOUT if it failed); otherwise it leaves at once. A send to a group's %RETRY%
topic whose reconsumeTimes reached maxReconsumeTimes goes to the group's %DLQ% topic instead (clients send failed
messages that way when CONSUMER_SEND_MSG_BACK fails). A message whose sysFlag says PREPARED is a transaction's half
message (transactions.py). A message's properties text is stored as sent (as Apache RocketMQ stores it), read
into a dict only where the broker acts on them: a delay level, a retry topic's reconsume count, a half message.

CONSUMER_SEND_MSG_BACK: a consumer gives back the message at CommitLog `offset` for a later retry. It is written
to %RETRY%<group> through the delay level `delayLevel` (0: 3 + the times it was consumed already, RocketMQ's
rule), with RETRY_TOPIC = its first topic and ORIGIN_MESSAGE_ID; once it was consumed maxReconsumeTimes times
(16 by default), or with a negative delay level, it goes to %DLQ%<group>.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from fastmq._native import store_codec
from fastmq.broker.rocketmq._native.rocketmq_store import fill_batch, fill_message
from fastmq.broker.rocketmq.remoting import Request, RequestError
from fastmq.broker.rocketmq.schedule import PROPERTY_DELAY
from fastmq.broker.rocketmq.system_topics import RETRY_PREFIX
from fastmq.broker.rocketmq.transactions import is_prepared
from fastmq.errors import FastMQError
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.store import PutMessageResult
from fastmq.store.config import PERM_WRITE
from fastmq.store.errors import MessageIllegalError, StoreError
from fastmq.store.message import PROPERTY_UNIQ_KEY
from fastmq.store.store_config import FlushDiskType

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd


V2_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
             "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
             "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName"}
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DEFAULT_RESEND_LEVEL = 3
MAX_INT = 2 ** 31 - 1
# The header's wire names by their SEND_MESSAGE names: read in place, not copied into a renamed dict per request
# (the copy and the enum lookups were a tenth of a single send's broker time).
V1_KEYS = {name: name for name in V2_FIELDS.values()}
V2_KEYS = {name: key for key, name in V2_FIELDS.items()}
SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
SUCCESS = int(ResponseCode.SUCCESS)
SYNC_FLUSH = FlushDiskType.SYNC_FLUSH
# A properties text holding this may ask for a delay level: such sends take the path that reads the properties
# (a user property merely ending in DELAY takes it too, harmlessly).
DELAY_ENTRY = PROPERTY_DELAY + "\x01"


def _properties(text: str) -> dict[str, str]:
    try:
        return store_codec.decode_properties(text.encode("utf-8"))
    except (ValueError, FastMQError) as exc:
        raise RequestError(f"message properties do not decode: {exc}", ResponseCode.MESSAGE_ILLEGAL) from None


def _stored(front: RocketMQFrontEnd, request: Request, topic: str, queue_id: int, result: PutMessageResult,
            msg_id: str, transaction_id: str | None = None) -> None:
    fields = {"msgId": msg_id, "queueId": queue_id, "queueOffset": result.queue_offset}
    if transaction_id:
        fields["transactionId"] = transaction_id
    request.session.info.produced.add(topic)
    store = front.broker.store
    if store.config.flush_disk_type is SYNC_FLUSH:
        def flushed(ok: bool) -> None:
            request.respond(SUCCESS if ok else ResponseCode.FLUSH_DISK_TIMEOUT, fields)
        store.when_flushed(result.end_offset, flushed)
    else:
        request.respond(SUCCESS, fields)


def send(front: RocketMQFrontEnd, request: Request) -> None:
    code = request.command.code
    keys = V1_KEYS if code == SEND_MESSAGE else V2_KEYS
    fields, number = request.fields, request.integer
    topic = request.text("topic", key=keys["topic"])
    config = front.topic_for_send(topic, fields.get(keys["defaultTopic"]),
                                  number("defaultTopicQueueNums", 4, 1, 1024, keys["defaultTopicQueueNums"]))
    if not config.perm & PERM_WRITE:
        raise RequestError(f"the topic[{topic}] sending is forbidden", ResponseCode.NO_PERMISSION)
    queue_id = number("queueId", -1, -1, MAX_INT, keys["queueId"])
    if queue_id < 0:
        queue_id = front.random_queue(config)
    if queue_id >= config.write_queue_nums:
        raise RequestError(f"queueId {queue_id} out of range 0..{config.write_queue_nums - 1} of topic {topic}")
    sys_flag = number("sysFlag", 0, -2 ** 31, MAX_INT, keys["sysFlag"])
    born = number("bornTimestamp", 0, key=keys["bornTimestamp"])
    flag = number("flag", 0, -2 ** 31, MAX_INT, keys["flag"])
    reconsume_times = number("reconsumeTimes", 0, 0, MAX_INT, keys["reconsumeTimes"])
    text = fields.get(keys["properties"], "")
    host = request.session.born_host
    try:
        if code == SEND_BATCH_MESSAGE:
            batch = front.broker.store.commit_log.new_batch(topic, queue_id, sys_flag)
            try:
                added = fill_batch(batch, request.body, born, host)
            except (ValueError, FastMQError) as exc:
                raise RequestError(f"batch refused: {exc}", ResponseCode.MESSAGE_ILLEGAL) from None
            if not added:
                raise RequestError("an empty batch", ResponseCode.MESSAGE_ILLEGAL)
            result = front.append(batch)
            _stored(front, request, topic, queue_id, result, ",".join(result.msg_ids))
            return
        if not (is_prepared(sys_flag) or topic.startswith(RETRY_PREFIX) or DELAY_ENTRY in text):
            # The common case: stored as sent, with no properties dict made (fill_message).
            batch = front.broker.store.commit_log.new_batch(topic, queue_id, sys_flag, reconsume_times)
            try:
                fill_message(batch, request.body, text, born, flag, host)
            except ValueError as exc:
                raise RequestError(f"message refused: {exc}", ResponseCode.MESSAGE_ILLEGAL) from None
            result = front.append(batch)
            _stored(front, request, topic, queue_id, result, result.msg_id)
            return
        properties = _properties(text)
        if is_prepared(sys_flag):
            result = front.transactions.prepare(topic, queue_id, request.body, properties, flag, born, host,
                                                sys_flag, reconsume_times)
            _stored(front, request, topic, queue_id, result, result.msg_id,
                    transaction_id=properties.get(PROPERTY_UNIQ_KEY))
            return
        if topic.startswith(RETRY_PREFIX) and (
                reconsume_times >= number("maxReconsumeTimes", 16, key=keys["maxReconsumeTimes"])):
            group = topic[len(RETRY_PREFIX):]
            topic, queue_id, delay_level = front.ensure_dlq_topic(group).topic_name, 0, 0
        else:
            delay_level = front.delay_level(properties)
        result = front.put(topic, queue_id, [(request.body, properties, flag)], born, host, sys_flag,
                           reconsume_times, delay_level)
    except MessageIllegalError as exc:
        raise RequestError(str(exc), ResponseCode.MESSAGE_ILLEGAL) from None
    except StoreError as exc:
        raise RequestError(f"the store refused the message: {exc}", ResponseCode.SERVICE_NOT_AVAILABLE) from None
    _stored(front, request, topic, queue_id, result, result.msg_id)


def send_back(front: RocketMQFrontEnd, request: Request) -> None:
    group = request.text("group")
    message = front.broker.store.get_message_by_offset(request.integer("offset", low=0))
    if message is None:
        raise RequestError(f"look message by offset failed, {request.fields.get('offset')}", ResponseCode.SYSTEM_ERROR)
    front.broker.register_subscription_group(group)
    retry = front.ensure_retry_topic(group)
    max_times = request.integer("maxReconsumeTimes", front.settings.max_reconsume_times, 0, MAX_INT)
    delay_level = request.integer("delayLevel", 0, -2 ** 31, MAX_INT)
    properties = dict(message.properties)
    properties.setdefault(PROPERTY_RETRY_TOPIC, message.topic)
    properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, request.fields.get("originMsgId") or "")
    if message.reconsume_times >= max_times or delay_level < 0:
        topic, queue_id, delay_level = front.ensure_dlq_topic(group).topic_name, 0, 0
    else:
        topic, queue_id = retry.topic_name, front.random_queue(retry)
        delay_level = delay_level or DEFAULT_RESEND_LEVEL + message.reconsume_times
    front.put(topic, queue_id, [(message.body, properties, message.flag)], message.born_timestamp,
              message.born_host_bytes, message.sys_flag, message.reconsume_times + 1, delay_level)
    request.respond(ResponseCode.SUCCESS)
