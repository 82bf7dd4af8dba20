"""The producer: sync, async and oneway sends, batches, ordered sends through a queue selector.

The calling thread picks the queue and encodes the whole request (SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE, see
fastmq/rocketmq/_native/messages.pyx); the remoting client's loop writes it (no thread hop per message: a burst
of async sends is handed over with one wakeup). A failed attempt (a broker error a retry may cure, a connection
that failed or timed out) is tried again, up to retry_times more times within the send timeout, on the next queue
of another broker when there is one (Java's DefaultMQProducer without latency fault tolerance). Retries run on
the loop thread from the routes already known, and ask the client to refresh them.

Topics the namesrv does not know are sent through the default topic's route (TBW102), as Java does, so that a
broker with autoCreateTopicEnable creates them.

Each send's first attempt holds its request's bytes in the client's max_pending_bytes until done
(fastmq/rocketmq/pending_bytes.py): a caller whose request finds no room waits, up to its send timeout.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, PENDING, RUNNING
from typing import Any, Callable, Sequence

from fastmq._native.store_codec import java_hash
from fastmq.io.errors import NetworkError
from fastmq.rocketmq._native.messages import DEFAULT_COMPRESS_THRESHOLD, SendEncoder
from fastmq.rocketmq._native.remoting import SERIALIZE_ROCKETMQ, RemotingCommand, decode_command
from fastmq.rocketmq.acl import Credentials
from fastmq.rocketmq.client import ClientInstance
from fastmq.rocketmq.errors import (
    RocketMQError,
    SendBufferFullError,
    SendFailedError,
    TopicNotFoundError,
    broker_error,
)
from fastmq.rocketmq.message import Message, SendResult, SendStatus, message_ids
from fastmq.rocketmq.pending_bytes import DEFAULT_MAX_PENDING_BYTES
from fastmq.rocketmq.protocol import DEFAULT_TOPIC, PROPERTY_TRANSACTION_PREPARED, TransactionType
from fastmq.rocketmq.route import MessageQueue

_log = logging.getLogger(__name__)

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
SEND_STATUSES = {status.value: status for status in SendStatus}
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


def select_by_hash(queues: Sequence[MessageQueue], message: Message, key: Any) -> MessageQueue:
    """The queue of a sharding key: abs(Java hashCode(str(key))) % count, as SelectMessageQueueByHash does."""
    return queues[abs(java_hash(str(key))) % len(queues)]


class SendFuture(Future[SendResult]):
    """The Future of one send. It shares its producer's Condition instead of making one of its own: a
    concurrent.futures.Future makes a Condition (a dozen objects for the cyclic collector) per send, and with
    thousands of sends in flight the collector's passes over them cost more than the rest of a send. result()
    and exception() wait until this future is done (a wakeup may be another future's) or the timeout passes."""

    def __init__(self, condition: threading.Condition) -> None:     # the attributes Future.__init__ sets
        self._condition = condition
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Callable[[Future[SendResult]], object]] = []

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._state == PENDING or self._state == RUNNING:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                self._condition.wait(remaining)

    def result(self, timeout: float | None = None) -> SendResult:
        result = self._result
        if self._state == FINISHED and result is not None:
            return result           # a sync send answered on the calling thread: no lock to take
        self._wait(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return super().exception(0)


class _Send:
    """One send and its attempts; called with the broker's answer to an attempt (or its error)."""

    __slots__ = ("producer", "messages", "batch", "queue", "selector", "arg", "deadline", "attempts", "last_broker",
                 "future", "msg_ids", "last_error", "target", "waited")

    def __init__(self, producer: Producer, messages: list[Message], batch: bool, queue: MessageQueue | None,
                 selector: QueueSelector | None, arg: Any, deadline: float, waited: bool = False) -> None:
        self.waited = waited        # the caller waits for the answer (a synchronous send)
        self.producer = producer
        self.messages = messages
        self.batch = batch
        self.queue = queue
        self.selector = selector
        self.arg = arg
        self.deadline = deadline
        self.attempts = 0
        self.last_broker: str | None = None
        self.future = SendFuture(producer._condition)
        self.msg_ids: list[str] = []
        self.last_error: BaseException | None = None
        self.target: MessageQueue | None = None         # the queue of the attempt in flight

    def __call__(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        assert self.target is not None          # set before the attempt is handed over
        self.producer._answered(self, self.target, response, error)


class Producer:
    """Sends to the topics of one cluster. `group` names the producer group (heartbeats carry it)."""

    def __init__(self, group: str, namesrv_addr: str | list[str] | None = None, *, send_timeout: float = 3.0,
                 retry_times: int = 2, compress_threshold: int = DEFAULT_COMPRESS_THRESHOLD,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, default_topic_queue_nums: int = 4,
                 instance: ClientInstance | None = None, serialize_type: int = SERIALIZE_ROCKETMQ,
                 credentials: Credentials | None = None, max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        """max_pending_bytes bounds the bytes of unfinished sends (the given ClientInstance's own bound instead)."""
        if instance is None and namesrv_addr is None:
            raise ValueError("a Producer needs namesrv_addr (or a ClientInstance)")
        if retry_times < 0 or send_timeout <= 0:
            raise ValueError("retry_times must be >= 0 and send_timeout positive")
        self.group = group
        self.send_timeout = send_timeout
        self.retry_times = retry_times
        self.compress_threshold = compress_threshold
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self._owns_instance = instance is None
        self.instance = instance if instance is not None else ClientInstance(
            namesrv_addr, request_timeout=send_timeout, serialize_type=serialize_type, credentials=credentials,
            max_pending_bytes=max_pending_bytes)
        self.remoting = self.instance.remoting
        self._encoder = SendEncoder(group, message_ids(), default_topic=DEFAULT_TOPIC,
                                    default_topic_queue_nums=default_topic_queue_nums,
                                    compress_threshold=compress_threshold)
        self._round_robin = itertools.count()
        self._from_default: set[str] = set()
        self._condition = threading.Condition()     # shared by the futures of its sends (SendFuture)
        self._closed = False
        self.instance.register(self)

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        return "producer", {"groupName": self.group}

    # ---- the public API ----------------------------------------------------------------------------------

    def send(self, message: Message, *, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
             arg: Any = None, timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer. Raises SendFailedError when every attempt failed."""
        send = self._start([message], False, queue, selector, arg, timeout, waited=True)
        return send.future.result(send.deadline - time.monotonic() + 1.0)

    def send_async(self, message: Message, *, queue: MessageQueue | None = None,
                   selector: QueueSelector | None = None, arg: Any = None, timeout: float | None = None) -> Future[SendResult]:
        """A Future of the SendResult (completed on the client's I/O thread: keep its callbacks short)."""
        return self._start([message], False, queue, selector, arg, timeout).future

    def send_orderly(self, message: Message, sharding_key: Any, *, timeout: float | None = None) -> SendResult:
        """Send to the queue of sharding_key, so that messages of one key keep their order."""
        return self.send(message, selector=select_by_hash, arg=sharding_key, timeout=timeout)

    def send_oneway(self, message: Message, *, queue: MessageQueue | None = None,
                    selector: QueueSelector | None = None, arg: Any = None) -> None:
        """Send without waiting for (or getting) an answer; no retries. A broker may drop it without a word: Apache's
        drops a oneway request that finds its send queue full (sendThreadPoolQueueCapacity, 10000 by default), which
        a burst of oneway sends faster than its send threads store them does (benches/bench_rocketmq.py)."""
        self._check_open()
        self._check_size(message.body)
        send = _Send(self, [message], False, queue, selector, arg, time.monotonic() + self.send_timeout)
        target = self._choose(send, may_block=True)
        frame, opaque, _ = self._encode(send, target, oneway=True)
        self.remoting.invoke_frame(self.instance.master_address(target.broker_name, target.topic), frame, opaque,
                                   None, oneway=True, hold_until=send.deadline)

    def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (stored as separate messages, one queue)."""
        send = self._start_batch(messages, queue, timeout, waited=True)
        return send.future.result(send.deadline - time.monotonic() + 1.0)

    def send_batch_async(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> Future[SendResult]:
        return self._start_batch(messages, queue, timeout, waited=False).future

    def _start_batch(self, messages: Sequence[Message], queue: MessageQueue | None, timeout: float | None,
                     waited: bool) -> _Send:
        messages = list(messages)
        if not messages:
            raise ValueError("a batch needs at least one message")
        topics = {m.topic for m in messages}
        if len(topics) != 1:
            raise ValueError(f"a batch goes to one topic, not {sorted(topics)}")
        if any(m.delay_level > 0 for m in messages):
            raise ValueError("batched messages cannot have a delay level (the broker refuses them)")
        return self._start(messages, True, queue, None, None, timeout, waited)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_instance:
            self.instance.close()
        else:
            self.instance.unregister(self)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- attempts ----------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RocketMQError("the producer is closed")

    def _check_size(self, body: Any) -> None:
        if len(body) > self.max_message_size:
            raise ValueError(f"message body of {len(body)} bytes exceeds max_message_size {self.max_message_size}")

    def _start(self, messages: list[Message], batch: bool, queue: MessageQueue | None,
               selector: QueueSelector | None, arg: Any, timeout: float | None, waited: bool = False) -> _Send:
        self._check_open()
        for message in messages:
            self._check_size(message.body)
        send = _Send(self, messages, batch, queue, selector, arg,
                     time.monotonic() + (self.send_timeout if timeout is None else timeout), waited)
        self._attempt(send, may_block=True)
        return send

    def _queues(self, topic: str, may_block: bool) -> list[MessageQueue]:
        route = self.instance.routes.get(topic)
        if route is None or (topic in self._from_default and may_block):
            if not may_block:
                if topic in self._from_default and DEFAULT_TOPIC in self.instance.routes:
                    return self._queues_from_default(topic)
                raise RocketMQError(f"no route known for topic {topic!r}")
            try:
                route = self.instance.route(topic, refresh=topic in self._from_default)
                self._from_default.discard(topic)
            except TopicNotFoundError:
                return self._queues_from_default(topic)
        if not route.write_queues:
            raise RocketMQError(f"topic {topic!r} has no writable queue")
        return route.write_queues

    def _queues_from_default(self, topic: str) -> list[MessageQueue]:
        default = self.instance.route(DEFAULT_TOPIC)
        self._from_default.add(topic)
        per_broker: dict[str, int] = {}
        queues = []
        for q in default.write_queues:
            if per_broker.get(q.broker_name, 0) < self.default_topic_queue_nums:
                per_broker[q.broker_name] = per_broker.get(q.broker_name, 0) + 1
                queues.append(MessageQueue(topic, q.broker_name, q.queue_id))
        if not queues:
            raise TopicNotFoundError(f"topic {topic!r} has no route and the default topic none to create it from")
        return queues

    def _choose(self, send: _Send, may_block: bool) -> MessageQueue:
        if send.queue is not None:
            return send.queue
        queues = self._queues(send.messages[0].topic, may_block)
        if send.selector is not None:
            return send.selector(queues, send.messages[0], send.arg)
        start = next(self._round_robin)
        count = len(queues)
        for i in range(count):
            candidate = queues[(start + i) % count]
            if candidate.broker_name != send.last_broker:
                return candidate
        return queues[start % count]

    def _encode(self, send: _Send, queue: MessageQueue, oneway: bool = False) -> tuple[bytes, int, list[str]]:
        now_ms = int(time.time() * 1000)
        opaque = self.remoting.next_opaque()
        if send.batch:
            frame, ids = self._encoder.encode_batch(opaque, send.messages, queue.topic, queue.queue_id,
                                                    queue.broker_name, now_ms, oneway)
        else:
            message = send.messages[0]
            # a half message is stored aside until END_TRANSACTION
            prepared = (TransactionType.PREPARED if message.properties
                        and message.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true" else 0)
            frame, uniq = self._encoder.encode_message(opaque, message, queue.topic, queue.queue_id,
                                                       queue.broker_name, prepared, now_ms, oneway)
            ids = [uniq]
        if self.remoting.credentials is not None or self.remoting.serialize_type != SERIALIZE_ROCKETMQ:
            # Signing needs the request's fields, and JSON headers are written from them: such requests are
            # encoded by the remoting client from the decoded frame (a cost only they pay). Asked per request:
            # session credentials are replaced when they expire.
            request = decode_command(frame, with_total=True)
            frame, _ = self.remoting.encode(request.code, request.ext_fields, request.body, oneway=oneway,
                                            opaque=opaque)
        return frame, opaque, ids

    def _attempt(self, send: _Send, may_block: bool) -> None:
        send.attempts += 1
        try:
            queue = self._choose(send, may_block)
            address = self.instance.master_address(queue.broker_name, queue.topic if may_block else None)
            frame, opaque, send.msg_ids = self._encode(send, queue)
        except Exception as exc:
            self._failed(send, exc, retriable=isinstance(exc, RocketMQError) and not may_block)
            return
        remaining = send.deadline - time.monotonic()
        if remaining <= 0:
            self._failed(send, send.last_error or SendFailedError("the send timeout passed"), retriable=False)
            return
        send.target = queue
        try:
            self.remoting.invoke_frame(address, frame, opaque, send, timeout=remaining,
                                       wait=send.waited and may_block, hold_until=send.deadline if may_block else None)
        except SendBufferFullError as exc:
            self._failed(send, exc, retriable=False)

    def _answered(self, send: _Send, queue: MessageQueue, response: RemotingCommand | None,
                  error: BaseException | None) -> None:
        if error is None:
            assert response is not None         # a callback has the response or the error
            status = SEND_STATUSES.get(response.code)
            if status is not None:
                fields = response.ext_fields
                try:
                    queue_id = int(fields.get("queueId", queue.queue_id))
                    result = SendResult(status, ",".join(send.msg_ids), fields.get("msgId", ""),
                                        queue if queue_id == queue.queue_id else
                                        MessageQueue(queue.topic, queue.broker_name, queue_id),
                                        int(fields.get("queueOffset", -1)), fields.get("transactionId"))
                except ValueError as exc:
                    error = RocketMQError(f"the broker's send response is malformed: {exc}")
                else:
                    try:
                        send.future.set_result(result)
                    except InvalidStateError:   # already failed (a late answer): one lock taken per send, not two
                        pass
                    return
            else:
                error = broker_error(response.code, response.remark, f"sending to {queue}")
        send.last_broker = queue.broker_name
        self._failed(send, error, retriable=isinstance(error, NetworkError) or getattr(error, "retriable", False))

    def _failed(self, send: _Send, error: BaseException, retriable: bool) -> None:
        send.last_error = error
        if retriable and send.attempts <= self.retry_times and time.monotonic() < send.deadline:
            self.instance.request_refresh(f"a send failed: {error}")
            self._attempt(send, may_block=False)
            return
        if send.future.done():
            return
        if isinstance(error, RocketMQError) and send.attempts == 1 and not retriable:
            send.future.set_exception(error)
            return
        failure = SendFailedError(f"sending to topic {send.messages[0].topic!r} failed after {send.attempts} "
                                  f"attempt(s): {error}", getattr(error, "code", None))
        failure.__cause__ = error
        send.future.set_exception(failure)
