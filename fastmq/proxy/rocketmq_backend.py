"""The RocketMQ backend (seed 001's case): fastmq.rocketmq's Producer for /produce, and plain PULL_MESSAGE,
GET_MIN_OFFSET / GET_MAX_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP requests on the same client instance for the rest
(the proxy chooses queue and offset itself, as the seed's proxy does: no consumer group rebalancing, no offsets
committed to the broker). A queue is "<brokerName>:<queueId>".

Messages: the key is RocketMQ's KEYS, tags are TAGS, headers are user properties (UTF-8 text: RocketMQ's
properties carry no bytes, nor the separators \\x01 and \\x02). A request's messages go as one batch
(SEND_BATCH_MESSAGE) to one queue, so they keep their order there; one message goes as SEND_MESSAGE_V2. A pulled
message gives its TAGS back as the header "tags" (the Kafka backend's name) and its user properties as headers;
the properties the client and broker set for themselves are left out.
"""
from __future__ import annotations

import asyncio
from typing import Any

import orjson

from fastmq.rocketmq import Message, Producer, RocketMQError, TopicNotFoundError
from fastmq.rocketmq._native.messages import decode_messages
from fastmq.rocketmq.client import ClientInstance
from fastmq.rocketmq.fetcher import pull_fields
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.route import MessageQueue
from fastmq.proxy.backend import Backend, BackendError, OutgoingMessages, PulledMessage, PullResult, SentMessages
from fastmq.proxy.readahead import ReadAhead

TAGS_HEADER = "tags"
PRODUCER_GROUP = "fastmq-proxy"
# The proxy pulls for itself under this group name (the broker wants one; nothing is committed under it).
PULL_GROUP = "fastmq-proxy"
# A pull asks for at least this many messages: the rest waits in the ReadAhead for the next lock of the queue.
READ_AHEAD_MESSAGES = 64
# Properties the client or broker sets for itself: not headers of the message.
SYSTEM_PROPERTIES = frozenset((
    "KEYS", "TAGS", "WAIT", "DELAY", "UNIQ_KEY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "MAX_RECONSUME_TIMES",
    "ORIGIN_MESSAGE_ID", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "CLUSTER", "TRAN_MSG", "PGROUP",
    "MSG_REGION", "TRACE_ON"))
_PULL_EMPTY = (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED)


def _text(value: bytes, what: str) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise BackendError(f"RocketMQ carries {what} as text: {value[:40]!r} is not UTF-8",
                           bad_message=True) from None
    if "\x01" in text or "\x02" in text:
        raise BackendError(f"RocketMQ {what} cannot hold the characters \\x01 or \\x02", bad_message=True)
    return text


def to_message(topic: str, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]], tags: str | None
               ) -> Message:
    properties = {_text(name.encode(), "a header name"): _text(data, f"header {name!r}") for name, data in headers}
    clash = SYSTEM_PROPERTIES.intersection(properties)
    if clash:
        raise BackendError(f"headers {sorted(clash)} are RocketMQ's own properties", bad_message=True)
    keys = _text(key, "a key") if key is not None else None
    return Message(topic, value, tags=tags, keys=keys, properties=properties or None)


def from_message(message: Any) -> PulledMessage:
    properties = message.properties
    keys = properties.get("KEYS")
    headers: list[tuple[str, bytes | None]] = [(name, value.encode()) for name, value in properties.items()
                                               if name not in SYSTEM_PROPERTIES]
    if message.tags is not None:
        headers.append((TAGS_HEADER, message.tags.encode()))
    return PulledMessage(message.queue_offset, message.store_timestamp, keys.encode() if keys else None,
                         bytes(message.body), headers)


class RocketMQBackend(Backend):
    def __init__(self, namesrv_addr: str, *, request_timeout_ms: int = 10000) -> None:
        super().__init__()
        self.namesrv_addr = namesrv_addr
        self.request_timeout = request_timeout_ms / 1000.0
        self._instance: ClientInstance | None = None
        self._producer: Producer | None = None
        self.read_ahead = ReadAhead()

    async def start(self) -> None:
        self._instance = ClientInstance(self.namesrv_addr, instance_name="fastmq-proxy",
                                        request_timeout=self.request_timeout)
        self._producer = Producer(PRODUCER_GROUP, instance=self._instance, send_timeout=self.request_timeout)

    async def stop(self) -> None:
        if self._producer is not None:
            self._producer.close()
        if self._instance is not None:
            await asyncio.to_thread(self._instance.close)

    def _started(self) -> ClientInstance:
        if self._instance is None:
            raise BackendError("the RocketMQ backend is not started")
        return self._instance

    # ---- produce ----------------------------------------------------------------------------------------

    async def produce(self, topic: str, messages: OutgoingMessages) -> SentMessages:
        self._started()
        producer = self._producer
        assert producer is not None                 # made with the instance at start()
        outgoing = [to_message(topic, *messages.message(n)) for n in range(len(messages))]
        try:
            await self._route(topic)
            if len(outgoing) == 1:
                future = producer.send_async(outgoing[0])
            else:
                future = producer.send_batch_async(outgoing)
            result = await asyncio.wrap_future(future)
        except (RocketMQError, ValueError) as exc:
            raise BackendError(f"the broker refused the messages for topic {topic!r}: {exc}",
                               unknown_topic=isinstance(exc, TopicNotFoundError)) from None
        self.broker_requests += 1
        queue = _queue_name(result.message_queue)
        # A batch is stored at consecutive offsets of one queue from the answered one on; a send's answer carries
        # no store time (-1).
        count = len(outgoing)
        self.observed(topic, queue, result.queue_offset + count)
        # The ids are the messages' UNIQ_KEY (what RocketMQ's tools call msgId), a batch's joined by commas.
        results: list[dict[str, Any]] = [{"queue": queue, "offset": result.queue_offset + n, "timestamp": -1}
                                         for n in range(count)]
        for entry, message_id in zip(results, result.msg_id.split(",")):
            entry["id"] = message_id
        return SentMessages(orjson.dumps(results), count)

    # ---- queues and offsets -------------------------------------------------------------------------------

    async def _route(self, topic: str) -> Any:
        instance = self._started()
        route = instance.routes.get(topic)
        if route is not None:
            return route
        try:
            return await asyncio.to_thread(instance.route, topic)
        except TopicNotFoundError:
            raise BackendError(f"no topic {topic!r} on the broker", unknown_topic=True) from None
        except RocketMQError as exc:
            raise BackendError(f"no route for topic {topic!r}: {exc}") from None

    async def _call(self, queue: MessageQueue, code: int, fields: dict[str, Any]) -> Any:
        instance = self._started()
        self.broker_requests += 1
        try:
            address = instance.master_address(queue.broker_name, queue.topic)
            return await asyncio.wrap_future(instance.remoting.invoke(address, code, fields))
        except (RocketMQError, OSError, TimeoutError) as exc:
            instance.request_refresh("a proxy request failed")
            raise BackendError(f"the broker did not answer {RequestCode(code).name} for {queue}: {exc}") from None

    async def _offset(self, queue: MessageQueue, code: int, **extra: Any) -> int:
        response = await self._call(queue, code, {"topic": queue.topic, "queueId": queue.queue_id, **extra})
        if response.code != ResponseCode.SUCCESS:
            raise BackendError(f"{RequestCode(code).name} of {queue}: code {response.code} {response.remark}")
        return int(response.ext_fields["offset"])

    async def _queues(self, topic: str) -> list[MessageQueue]:
        return list((await self._route(topic)).read_queues)

    async def fetch_bounds(self, topic: str) -> dict[str, tuple[int, int]]:
        queues = await self._queues(topic)
        lows = await asyncio.gather(*(self._offset(q, RequestCode.GET_MIN_OFFSET) for q in queues))
        highs = await asyncio.gather(*(self._offset(q, RequestCode.GET_MAX_OFFSET) for q in queues))
        return {_queue_name(q): (low, high) for q, low, high in zip(queues, lows, highs)}

    async def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[str, int]:
        queues = await self._queues(topic)
        found = await asyncio.gather(*(self._offset(q, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=timestamp_ms)
                                       for q in queues))
        return {_queue_name(q): offset for q, offset in zip(queues, found)}

    # ---- pull ----------------------------------------------------------------------------------------------

    async def pull(self, topic: str, queue: str, offset: int, max_messages: int, max_bytes: int) -> PullResult:
        ready = self.read_ahead.take(topic, queue, offset, max_messages)
        if ready is not None:
            return ready
        broker_name, _, queue_id = queue.rpartition(":")
        target = MessageQueue(topic, broker_name, int(queue_id))
        if target not in (await self._route(topic)).read_queues:
            raise BackendError(f"topic {topic!r} has no queue {queue}")
        wanted = max(max_messages, READ_AHEAD_MESSAGES)
        response = await self._call(target, RequestCode.PULL_MESSAGE,
                                    pull_fields(PULL_GROUP, target, offset, wanted, "*", 0, 0))
        fields = response.ext_fields or {}
        if response.code in _PULL_EMPTY:
            high = int(fields.get("maxOffset", offset))
            self.observed(topic, queue, high)
            return PullResult([], int(fields.get("nextBeginOffset", offset)), high)
        if response.code != ResponseCode.SUCCESS:
            self.forget(topic)
            raise BackendError(f"pull of {queue} of {topic!r} at {offset}: code {response.code} {response.remark}")
        try:
            decoded = decode_messages(response.body or b"", True)
        except ValueError as exc:
            raise BackendError(f"pull of {queue} of {topic!r} at {offset}: {exc}") from None
        high = int(fields["maxOffset"])
        self.observed(topic, queue, high)
        messages: list[PulledMessage] = []
        size = 0
        for message in decoded:
            if messages and size + len(message.body) > max_bytes:
                break
            messages.append(from_message(message))
            size += len(message.body)
        next_offset = int(fields["nextBeginOffset"]) if len(messages) == len(decoded) else messages[-1].offset + 1
        self.read_ahead.keep(topic, queue, offset, messages, next_offset, high)
        return self.read_ahead.take(topic, queue, offset, max_messages) or PullResult([], next_offset, high)


def _queue_name(queue: MessageQueue) -> str:
    return f"{queue.broker_name}:{queue.queue_id}"
