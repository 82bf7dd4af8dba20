"""The producer: sync, async and oneway sends, batches, ordered sends through a queue selector.

The calling thread picks the queue and encodes the whole request (SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE, see
fastmq/rocketmq/_native/messages.pyx); the remoting client's loop writes it (no thread hop per message: a burst
of async sends is handed over with one wakeup). A failed attempt (a broker error a retry may cure, a connection
that failed or timed out) is tried again, up to retry_times more times within the send timeout, on the next queue
of another broker when there is one (Java's DefaultMQProducer without latency fault tolerance). Retries run on
the loop thread from the routes already known, and ask the client to refresh them.

A sync send's first attempt is the calling thread's own round trip when its broker's connection has nothing else
in flight (RemotingClient.call_frame, Connection.call_blocking): it encodes, writes, waits for and decodes its
answer into the SendResult itself, with no future, no callback and no wake-up of the loop thread. Otherwise (the
connection busy with other senders' requests or not made yet, a failed attempt) it goes on as an async send does
and waits for its future.

Topics the namesrv does not know are sent through the default topic's route (TBW102), as Java does, so that a
broker with autoCreateTopicEnable creates them.

Each send's first attempt handed to the loop holds its request's bytes in the client's max_pending_bytes until done
(fastmq/rocketmq/_native/pending.pyx): a caller whose request finds no room waits, up to its send timeout. A sync
send's own round trip holds none: its request is never queued in the client.

Oneway sends follow the broker's pace (fastmq/rocketmq/oneway_pace.py): every 128th to a broker goes as an answered
send, and a caller waits while 12 of those (fewer for a slow broker) are unanswered, so that a broker's bounded send
queue is not overrun.
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
from fastmq.closeable import Closeable
from fastmq.io.errors import NetworkError
from fastmq.rocketmq._native.messages import DEFAULT_COMPRESS_THRESHOLD, SendEncoder, decode_send_result
from fastmq.rocketmq._native.remoting import SERIALIZE_ROCKETMQ, decode_command
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
from fastmq.rocketmq.oneway_pace import OnewayPace
from fastmq.rocketmq._native.pending import DEFAULT_MAX_PENDING_BYTES
from fastmq.rocketmq.protocol import DEFAULT_TOPIC
from fastmq.rocketmq.route import MessageQueue

_log = logging.getLogger(__name__)

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
SEND_STATUSES = {status.value: status for status in SendStatus}
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


def select_by_hash(queues: Sequence[MessageQueue], message: Message, key: Any) -> MessageQueue:
    """The queue of a sharding key: abs(Java hashCode(str(key))) % count, as SelectMessageQueueByHash does."""
    return queues[abs(java_hash(str(key))) % len(queues)]


def send_outcome(frame: Any, msg_id: str, queue: MessageQueue) -> SendResult | BaseException:
    """The SendResult of a send's response frame to queue, or the error it says (a refusal, a malformed answer).
    The compiled reader takes the usual answer, the rest goes through the general decoder. (An async send's
    answer asks the reader before it calls this: a Python call less a message on the I/O thread.)"""
    result = decode_send_result(frame, msg_id, queue, queue.queue_id, SEND_STATUSES)
    if result is not None:
        return result
    try:
        response = decode_command(frame)
    except Exception as exc:
        return exc
    status = SEND_STATUSES.get(response.code)
    if status is None:
        return broker_error(response.code, response.remark, f"sending to {queue}")
    fields = response.ext_fields
    try:
        queue_id = int(fields.get("queueId", queue.queue_id))
        return SendResult(status, msg_id, fields.get("msgId", ""),
                          queue if queue_id == queue.queue_id else MessageQueue(queue.topic, queue.broker_name, queue_id),
                          int(fields.get("queueOffset", -1)), fields.get("transactionId"))
    except (ValueError, OverflowError) as exc:        # not a number, or not one of 64 bits
        return RocketMQError(f"the broker's send response is malformed: {exc}")


class FutureCondition(threading.Condition):
    """The Condition a producer's SendFutures share. `sleepers` counts the threads waiting in result() or
    exception() (changed under the lock), so that a send's completion notifies only while somebody waits."""

    def __init__(self) -> None:
        super().__init__()
        self.sleepers = 0


class SendFuture(Future[SendResult]):
    """The Future of one send. It shares its producer's Condition instead of making one of its own: a
    concurrent.futures.Future makes a Condition (a dozen objects for the cyclic collector) per send, and with
    thousands of sends in flight the collector's passes over them cost more than the rest of a send. result()
    and exception() wait until this future is done (a wakeup may be another future's) or the timeout passes.

    Completing it and adding a callback take the shared lock through its C methods (Condition's with-block is two
    Python calls), notify the Condition only when a thread sleeps on it, and call the done callbacks in place: the
    I/O thread completes one future a message. Its lists of waiters (concurrent.futures.wait) and of callbacks
    are made when first needed: a future that nobody waits on that way has no list for the collector to track."""

    _condition: FutureCondition
    _waiter_list: list[Any] | None = None
    _done_callbacks: Sequence[Callable[[Future[SendResult]], object]] = ()

    def __init__(self, condition: FutureCondition) -> None:     # the attributes Future.__init__ sets
        self._condition = condition
        self._state = PENDING
        self._result = None
        self._exception = None

    @property
    def _waiters(self) -> list[Any]:       # what concurrent.futures.wait and as_completed add their waiters to
        waiters = self._waiter_list
        if waiters is None:
            waiters = self._waiter_list = []
        return waiters

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        self._waiter_list = waiters

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        condition = self._condition
        with condition:
            condition.sleepers += 1
            try:
                while self._state == PENDING or self._state == RUNNING:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return
                    condition.wait(remaining)
            finally:
                condition.sleepers -= 1

    def result(self, timeout: float | None = None) -> SendResult:
        self._wait(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return super().exception(0)

    def add_done_callback(self, fn: Callable[[Future[SendResult]], object]) -> None:
        condition = self._condition
        condition.acquire()
        try:
            if self._state == PENDING or self._state == RUNNING:
                self._done_callbacks = [*self._done_callbacks, fn]
                return
        finally:
            condition.release()
        self._call(fn)

    def set_result(self, result: SendResult) -> None:
        self._complete(result, None)

    def set_exception(self, exception: BaseException | None) -> None:
        self._complete(None, exception)

    def _complete(self, result: SendResult | None, exception: BaseException | None) -> None:
        condition = self._condition
        condition.acquire()
        try:
            if self._state != PENDING and self._state != RUNNING:
                raise InvalidStateError(f"{self._state}: {self!r}")
            self._result = result
            self._exception = exception
            self._state = FINISHED
            for waiter in self._waiter_list or ():
                if exception is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
            if condition.sleepers:
                condition.notify_all()
        finally:
            condition.release()
        for callback in self._done_callbacks:
            self._call(callback)

    def _call(self, callback: Callable[[Future[SendResult]], object]) -> None:
        try:
            callback(self)
        except Exception:
            _log.exception("exception calling callback for %r", self)


class _Send(SendFuture):
    """One send: the future its caller gets, and its attempts; called with the broker's answer to an attempt (or
    its error). One object a send rather than two: thousands are in flight, each one the collector tracks."""

    # What every send starts with, as class attributes: an instance stores them only when an attempt changes them.
    # (Not for what the I/O thread reads of every send: an attribute an instance lacks is slower to read.)
    attempts = 0
    last_broker: str | None = None
    last_error: BaseException | None = None

    def __init__(self, producer: Producer, messages: list[Message], batch: bool, queue: MessageQueue | None,
                 selector: QueueSelector | None, arg: Any, deadline: float) -> None:
        SendFuture.__init__(self, producer._condition)
        self.producer = producer
        self.messages = messages
        self.batch = batch
        self.queue = queue
        self.selector = selector
        self.arg = arg
        self.deadline = deadline
        self.msg_id = ""                                # the UNIQ_KEY(s) of the attempt in flight
        self.target: MessageQueue | None = None         # the queue of the attempt in flight

    def attempted(self, queue: MessageQueue, msg_id: str) -> _Send:
        """This send after its first attempt, to queue (made by Producer._send_waiting before the _Send was)."""
        self.attempts = 1
        self.target = queue
        self.msg_id = msg_id
        return self

    def __call__(self, frame: Any, error: BaseException | None) -> None:
        """The attempt's response frame (or its error), on the I/O thread."""
        target = self.target
        assert target is not None               # set before the attempt is handed over
        if error is None:
            outcome = (decode_send_result(frame, self.msg_id, target, target.queue_id, SEND_STATUSES)
                       or send_outcome(frame, self.msg_id, target))
            if not isinstance(outcome, BaseException):
                try:
                    self._complete(outcome, None)
                except InvalidStateError:   # already failed (a late answer): one lock taken per send, not two
                    pass
                return
            error = outcome
        self.producer._attempt_failed(self, target, error)


class _ConfirmingOneway(_Send):
    """A oneway send that goes answered, to confirm the oneway pace (fastmq/rocketmq/oneway_pace.py): not retried,
    as no oneway send is."""


class Producer(Closeable):
    """Sends to the topics of one cluster. `group` names the producer group (heartbeats carry it)."""

    def __init__(self, group: str, namesrv_addr: str | list[str] | None = None, *, send_timeout: float = 3.0,
                 retry_times: int = 2, compress_threshold: int = DEFAULT_COMPRESS_THRESHOLD,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, default_topic_queue_nums: int = 4,
                 instance: ClientInstance | None = None, serialize_type: int = SERIALIZE_ROCKETMQ,
                 credentials: Credentials | None = None, max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 oneway_pace: bool = True) -> None:
        """max_pending_bytes bounds the bytes of unfinished sends (the given ClientInstance's own bound instead).
        oneway_pace: oneway sends follow the broker's pace (see send_oneway); False sends them as fast as callers
        offer them, and a broker that cannot keep up drops what does not fit in its queue."""
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
        self._condition = FutureCondition()     # shared by the futures of its sends (SendFuture)
        self._oneway_pace = OnewayPace() if oneway_pace else None
        self._closed = False
        self.instance.register(self)

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        return "producer", {"groupName": self.group}

    # ---- the public API ----------------------------------------------------------------------------------

    def send(self, message: Message, *, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
             arg: Any = None, timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer. Raises SendFailedError when every attempt failed."""
        return self._send_waiting([message], False, queue, selector, arg, timeout)

    def send_async(self, message: Message, *, queue: MessageQueue | None = None,
                   selector: QueueSelector | None = None, arg: Any = None, timeout: float | None = None) -> Future[SendResult]:
        """A Future of the SendResult (completed on the client's I/O thread: keep its callbacks short)."""
        return self._start([message], False, queue, selector, arg, timeout)

    def send_orderly(self, message: Message, sharding_key: Any, *, timeout: float | None = None) -> SendResult:
        """Send to the queue of sharding_key, so that messages of one key keep their order."""
        return self.send(message, selector=select_by_hash, arg=sharding_key, timeout=timeout)

    def send_oneway(self, message: Message, *, queue: MessageQueue | None = None,
                    selector: QueueSelector | None = None, arg: Any = None) -> None:
        """Send without waiting for (or getting) an answer; no retries, no result.

        Paced by the broker (fastmq/rocketmq/oneway_pace.py, on unless the producer was made with oneway_pace=False):
        Apache's broker drops, without a word, a oneway request that finds its send queue full or waits in it too
        long, which a burst of oneway sends faster than its send threads store them does. So every 128th oneway send
        to a broker goes as an answered send, and a call waits (at most the send timeout) while 12 of those are
        unanswered (fewer while the broker answers them slowly): what a healthy broker stores is what was sent. A
        broker that is down or does not answer fails nothing here: those sends are lost, as oneway sends to it always
        were."""
        messages = [message]
        deadline = self._checked_deadline(messages, None)
        target = self._choose(message, queue, selector, arg, None, may_block=True)
        address = self.instance.master_address(target.broker_name, target.topic)
        confirmed = self._oneway_pace.confirmation(address, deadline) if self._oneway_pace else None
        if confirmed is not None:
            # its answer speaks for the connection the earlier oneway sends took: the same queue
            send = _ConfirmingOneway(self, messages, False, target, None, None, deadline)
            send.add_done_callback(confirmed)
            self._attempt(send, may_block=True)
            error = send.exception(0) if send.done() else None
            if isinstance(error, SendBufferFullError):
                raise error             # as a oneway request that finds no room raises
            return
        frame, opaque, _ = self._encode(messages, False, target, oneway=True)
        self.remoting.invoke_frame(address, frame, opaque, None, oneway=True, hold_until=deadline)

    def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (stored as separate messages, one queue)."""
        return self._send_waiting(self._batch(messages), True, queue, None, None, timeout)

    def send_batch_async(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> Future[SendResult]:
        return self._start(self._batch(messages), True, queue, None, None, timeout)

    @staticmethod
    def _batch(messages: Sequence[Message]) -> list[Message]:
        messages = list(messages)
        if not messages:
            raise ValueError("a batch needs at least one message")
        topics = {m.topic for m in messages}
        if len(topics) != 1:
            raise ValueError(f"a batch goes to one topic, not {sorted(topics)}")
        if any(m.delay_level > 0 for m in messages):
            raise ValueError("batched messages cannot have a delay level (the broker refuses them)")
        return messages

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_instance:
            self.instance.close()
        else:
            self.instance.unregister(self)

    # ---- attempts ----------------------------------------------------------------------------------------

    def _start(self, messages: list[Message], batch: bool, queue: MessageQueue | None,
               selector: QueueSelector | None, arg: Any, timeout: float | None) -> _Send:
        send = _Send(self, messages, batch, queue, selector, arg, self._checked_deadline(messages, timeout))
        self._attempt(send, may_block=True)
        return send

    def _checked_deadline(self, messages: list[Message], timeout: float | None) -> float:
        # A send may start (the producer open, every body within max_message_size): its deadline.
        if self._closed:
            raise RocketMQError("the producer is closed")
        for message in messages:
            if len(message.body) > self.max_message_size:
                raise ValueError(f"message body of {len(message.body)} bytes exceeds max_message_size "
                                 f"{self.max_message_size}")
        return time.monotonic() + (self.send_timeout if timeout is None else timeout)

    def _send_waiting(self, messages: list[Message], batch: bool, queue: MessageQueue | None,
                      selector: QueueSelector | None, arg: Any, timeout: float | None) -> SendResult:
        """A sync send. Its first attempt is the calling thread's own round trip when the broker's connection can
        be lent (RemotingClient.call_frame): the answer is read and made a SendResult here, with no _Send, future
        or callback. Anything else (the connection busy or not made yet, an error, the retries) continues as an
        async send does, from the request already encoded, and this thread waits for its future."""
        deadline = self._checked_deadline(messages, timeout)
        try:
            target = self._choose(messages[0], queue, selector, arg, None, True)
            address = self.instance.master_address(target.broker_name, target.topic)
            frame, opaque, msg_id = self._encode(messages, batch, target)
        except Exception:
            send = _Send(self, messages, batch, queue, selector, arg, deadline)
            self._attempt(send, may_block=True)     # fails it as an async send's first attempt fails
            return send.result(deadline - time.monotonic() + 1.0)
        outcome: SendResult | BaseException | None
        try:
            response = self.remoting.call_frame(address, frame, opaque, deadline, decode=False)
        except Exception as exc:
            outcome = exc
        else:
            outcome = None if response is None else send_outcome(response, msg_id, target)
            if isinstance(outcome, SendResult):
                return outcome
        send = _Send(self, messages, batch, queue, selector, arg, deadline).attempted(target, msg_id)
        if outcome is None:
            # The connection could not be lent: the loop carries this attempt.
            self._issue(send, address, frame, opaque, True, wait=True)
        else:
            self._attempt_failed(send, target, outcome)     # the answer's error, or what broke the round trip
        return send.result(deadline - time.monotonic() + 1.0)

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

    def _choose(self, message: Message, queue: MessageQueue | None, selector: QueueSelector | None, arg: Any,
                last_broker: str | None, may_block: bool) -> MessageQueue:
        if queue is not None:
            return queue
        queues = self._queues(message.topic, may_block)
        if selector is not None:
            return selector(queues, message, arg)
        start = next(self._round_robin)
        count = len(queues)
        if last_broker is None:         # a first attempt: the next queue
            return queues[start % count]
        for i in range(count):
            candidate = queues[(start + i) % count]
            if candidate.broker_name != last_broker:
                return candidate
        return queues[start % count]

    def _encode(self, messages: list[Message], batch: bool, queue: MessageQueue,
                oneway: bool = False) -> tuple[bytes, int, str]:
        """(frame, opaque, msg_id): the request to queue and the UNIQ_KEY of its message (a batch's joined by
        commas, as its SendResult gives them)."""
        opaque = self.remoting.next_opaque(oneway)
        frame, msg_id = self._encoder.encode_request(opaque, messages, batch, queue, oneway)
        if self.remoting.credentials is not None or self.remoting.serialize_type != SERIALIZE_ROCKETMQ:
            # Signing needs the request's fields, and JSON headers are written from them: such requests are
            # encoded by the remoting client from the decoded frame (a cost only they pay). Asked per request:
            # session credentials are replaced when they expire.
            request = decode_command(frame, with_total=True)
            frame, _ = self.remoting.encode(request.code, request.ext_fields, request.body, oneway=oneway,
                                            opaque=opaque)
        return frame, opaque, msg_id

    def _attempt(self, send: _Send, may_block: bool) -> None:
        send.attempts += 1
        try:
            queue = self._choose(send.messages[0], send.queue, send.selector, send.arg, send.last_broker, may_block)
            address = self.instance.master_address(queue.broker_name, queue.topic if may_block else None)
            frame, opaque, send.msg_id = self._encode(send.messages, send.batch, queue)
        except Exception as exc:
            self._failed(send, exc, retriable=isinstance(exc, RocketMQError) and not may_block)
            return
        send.target = queue
        self._issue(send, address, frame, opaque, may_block)

    def _issue(self, send: _Send, address: str, frame: bytes, opaque: int, may_block: bool,
               wait: bool = False) -> None:
        """Hand an attempt's encoded request to the remoting client; the loop calls send with its answer. wait: the
        calling thread waits for it (a sync send)."""
        remaining = send.deadline - time.monotonic()
        if remaining <= 0:
            self._failed(send, send.last_error or SendFailedError("the send timeout passed"), retriable=False)
            return
        try:
            self.remoting.invoke_frame(address, frame, opaque, send, timeout=remaining, wait=wait,
                                       hold_until=send.deadline if may_block else None, decode=False)
        except SendBufferFullError as exc:
            self._failed(send, exc, retriable=False)

    def _attempt_failed(self, send: _Send, queue: MessageQueue, error: BaseException) -> None:
        send.last_broker = queue.broker_name
        self._failed(send, error, retriable=isinstance(error, NetworkError) or getattr(error, "retriable", False))

    def _failed(self, send: _Send, error: BaseException, retriable: bool) -> None:
        send.last_error = error
        if (retriable and send.attempts <= self.retry_times and time.monotonic() < send.deadline
                and not isinstance(send, _ConfirmingOneway)):
            self.instance.request_refresh(f"a send failed: {error}")
            self._attempt(send, may_block=False)
            return
        if send.done():
            return
        if isinstance(error, RocketMQError) and send.attempts == 1 and not retriable:
            send.set_exception(error)
            return
        failure = SendFailedError(f"sending to topic {send.messages[0].topic!r} failed after {send.attempts} "
                                  f"attempt(s): {error}", getattr(error, "code", None))
        failure.__cause__ = error
        send.set_exception(failure)
