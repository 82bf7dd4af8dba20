"""PULL_MESSAGE 11: a consumer reads one queue from queueOffset on.

The records travel as they lie in the CommitLog (a pull response body is CommitLog records back to back): the
store's ConsumeQueue scan picks the units (filtered by tag hash when the subscription names tags) and
read_records copies them into the body, no message object in between. The answer's code follows RocketMQ: 0 with
messages; PULL_RETRY_IMMEDIATELY (20) when units were read but none matched the tags; PULL_NOT_FOUND (19) at the
end of the queue (and for an empty or unknown queue); PULL_OFFSET_MOVED (21) for an offset out of range, with
nextBeginOffset where to go on. Fields: suggestWhichBrokerId (0), nextBeginOffset, minOffset, maxOffset.

sysFlag COMMIT_OFFSET (1): commitOffset is the group's consumed offset of the queue, committed on the way.
SUSPEND (2): a pull that finds nothing at the end of the queue waits (hold.py) until a message arrives or
suspendTimeoutMillis (at most max_pull_hold_ms) passes, then runs again and is answered. SUBSCRIPTION (4): the
request carries its tag expression in `subscription`; otherwise the group's subscription from its heartbeats
applies (every message when there is none).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from fastmq.broker.offsets import CommittedOffset
from fastmq.broker.rocketmq.remoting import Request, RequestError
from fastmq.rocketmq.protocol import PullSysFlag, ResponseCode
from fastmq.store.config import PERM_READ

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd

MAX_PULL_MESSAGES = 1024               # what one pull returns at most, whatever it asks
MAX_PULL_BYTES = 4 << 20               # and in bytes (the first message always goes)
MAX_INT = 2 ** 31 - 1


def pull(front: RocketMQFrontEnd, request: Request) -> None:
    group = request.text("consumerGroup")
    topic = request.text("topic")
    queue_id = request.integer("queueId", low=0, high=MAX_INT)
    offset = request.integer("queueOffset", low=0)
    max_count = min(request.integer("maxMsgNums", low=1, high=MAX_INT), MAX_PULL_MESSAGES)
    sys_flag = request.integer("sysFlag", 0, 0, MAX_INT)
    max_bytes = min(request.integer("maxMsgBytes", MAX_PULL_BYTES, 1, 2 ** 62), MAX_PULL_BYTES)
    config = front.topic_config(topic)
    if config is None:
        raise RequestError(f"topic[{topic}] not exist, apply first please!", ResponseCode.TOPIC_NOT_EXIST)
    if not config.perm & PERM_READ:
        raise RequestError(f"the topic[{topic}] pulling message is forbidden", 16)
    if sys_flag & PullSysFlag.SUBSCRIPTION:
        expression = request.fields.get("subscription") or "*"
    else:
        subscription = front.clients.subscription(group, topic)
        expression = subscription.sub_string if subscription is not None else "*"
    tags = None if expression.strip() in ("", "*") else expression
    if sys_flag & PullSysFlag.COMMIT_OFFSET:
        committed = request.integer("commitOffset", -1)
        if committed >= 0:
            front.broker.offsets.commit(group, [(topic, queue_id, CommittedOffset(committed))], _ignore)
    request.session.info.fetched.add(topic)
    hold_ms = min(request.integer("suspendTimeoutMillis", 0, 0), front.settings.max_pull_hold_ms) \
        if sys_flag & PullSysFlag.SUSPEND else 0
    answer(front, request, group, topic, queue_id, offset, max_count, max_bytes, tags, hold_ms)


def _ignore(ok: bool) -> None:
    """Offsets committed with a pull are not acknowledged to anyone."""


def answer(front: RocketMQFrontEnd, request: Request, group: str, topic: str, queue_id: int, offset: int,
           max_count: int, max_bytes: int, tags: str | None, hold_ms: int) -> None:
    store = front.broker.store
    min_offset = store.get_min_offset(topic, queue_id)
    max_offset = store.get_max_offset(topic, queue_id)
    body = None
    if offset < min_offset:
        code, next_offset = ResponseCode.PULL_OFFSET_MOVED, min_offset
    elif offset > max_offset:
        code, next_offset = ResponseCode.PULL_OFFSET_MOVED, max_offset
    elif offset == max_offset:
        code, next_offset = ResponseCode.PULL_NOT_FOUND, offset
    else:
        units = store.scan_queue(topic, queue_id, offset, max_count, tags, max_bytes)
        records, count = store.read_records(units) if len(units) else (b"", 0)
        if count:
            code, body = ResponseCode.SUCCESS, bytes(records)
            next_offset = units[count][2] if count < len(units) else units.next_offset
            front.broker.stats.get(topic, request.session.info.client_id, count, len(body))
        elif units.next_offset > offset:
            code, next_offset = ResponseCode.PULL_RETRY_IMMEDIATELY, units.next_offset
        else:
            code, next_offset = ResponseCode.PULL_OFFSET_MOVED, max_offset
    if code == ResponseCode.PULL_NOT_FOUND and hold_ms > 0 and front.hold.hold(
            topic, queue_id, request.conn, offset, hold_ms / 1000.0,
            lambda: answer(front, request, group, topic, queue_id, offset, max_count, max_bytes, tags, 0)):
        return
    request.respond(code, {"suggestWhichBrokerId": 0, "nextBeginOffset": next_offset, "minOffset": min_offset,
                           "maxOffset": max_offset}, body)
