"""The push consumer: a listener called from a thread pool with the messages the fetcher pulls.

Concurrent mode: each message goes to the pool as it arrives; the listener answers CONSUME_SUCCESS or
RECONSUME_LATER (an exception counts as RECONSUME_LATER). A message to consume later goes back to its broker with
CONSUMER_SEND_MSG_BACK (36, delay level 0: the broker picks 3 + reconsumeTimes) and comes again through the
group's retry topic %RETRY%<group>, which a clustering consumer subscribes to by itself; past max_reconsume_times
the broker moves it to %DLQ%<group>. A send-back that fails is consumed again locally a second later.

Orderly mode: a queue is consumed only while this client holds its lock on the broker (LOCK_BATCH_MQ 41, renewed
at every rebalance, released with UNLOCK_BATCH_MQ 42), one batch at a time in queue order; RECONSUME_LATER
suspends the queue for a second and retries the same messages, up to max_reconsume_times, then sends them back
(to the DLQ).

The committed position of a queue is its lowest message still being consumed (or the fetch position when none
is): a consumer that dies redelivers only what it had not finished.
"""
from __future__ import annotations

import enum
import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from fastmq.errors import CorruptDataError
from fastmq.json_document import json_object
from fastmq.rocketmq._native.messages import MessageExt
from fastmq.rocketmq.client import check_success
from fastmq.rocketmq.consumer import ConsumerBase
from fastmq.rocketmq.protocol import RETRY_GROUP_TOPIC_PREFIX, MessageModel, RequestCode
from fastmq.rocketmq.route import MessageQueue, parse_json_lenient
from fastmq.rocketmq.subscription import Subscription

_log = logging.getLogger(__name__)

RETRY_LOCALLY_AFTER = 1.0


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


Listener = Callable[[list[MessageExt]], "ConsumeStatus | None"]


class _ProcessQueue:
    """The messages of one queue between fetch and consumption."""

    __slots__ = ("epoch", "messages", "next_offset", "lock", "consuming", "locked", "failures")

    def __init__(self, epoch: int, next_offset: int) -> None:
        self.epoch = epoch
        self.messages: dict[int, MessageExt] = {}     # queue offset -> message not consumed yet
        self.next_offset = next_offset
        self.lock = threading.Lock()
        self.consuming = False                        # orderly: a batch of this queue is in the pool
        self.locked = False                           # orderly: the broker lock is ours
        self.failures = 0                             # orderly: retries of the current batch

    def position(self) -> int:
        return min(self.messages) if self.messages else self.next_offset


class PushConsumer(ConsumerBase):
    """Subscribe, then start(); `listener(messages)` runs on a pool of consume_threads threads."""

    consume_type = "CONSUME_PASSIVELY"

    def __init__(self, group: str, namesrv_addr: str | list[str] | None = None, *,
                 listener: Listener | None = None, orderly: bool = False, consume_threads: int = 4,
                 consume_batch_size: int = 1, max_reconsume_times: int = 16, **options: Any) -> None:
        self.listener = listener
        self.orderly = orderly
        self.consume_batch_size = consume_batch_size
        self.max_reconsume_times = max_reconsume_times
        self._pool = ThreadPoolExecutor(consume_threads, thread_name_prefix=f"fastmq-rocketmq-consume-{group}")
        self._queues: dict[MessageQueue, _ProcessQueue] = {}
        self._started = threading.Event()
        super().__init__(group, namesrv_addr, **options)
        if self.message_model == MessageModel.CLUSTERING:
            self._retry_topic: str | None = RETRY_GROUP_TOPIC_PREFIX + group
        else:
            self._retry_topic = None

    def register_listener(self, listener: Listener) -> None:
        self.listener = listener

    def subscribe(self, topic: str, expression: str = "*") -> None:
        super().subscribe(topic, expression)
        if self._retry_topic is not None and self._retry_topic not in self.subscriptions:
            self._subscribe_retry_topic(self._retry_topic)

    def _subscribe_retry_topic(self, retry_topic: str) -> None:
        # The broker creates the retry topic with the first send-back; until then its route lookups fail.
        self.subscriptions[retry_topic] = Subscription(retry_topic, "*")

    def start(self) -> None:
        """Begin consuming (fetching starts once assigned queues are known)."""
        if self.listener is None:
            raise ValueError("register a listener before start()")
        self._started.set()
        self._wake.set()

    # ---- assignment ------------------------------------------------------------------------------------------

    def _rebalance(self) -> bool:
        if not self._started.is_set():
            return True
        done = super()._rebalance()
        if self.orderly:
            self._lock_queues(list(self._queues))
        return done

    def _track(self, queue: MessageQueue, epoch: int, offset: int) -> None:
        # Made after the fetch had started, a pull answered meanwhile found no process queue (or a reset queue's
        # old one) and its messages were dropped while the fetch moved past them.
        self._queues[queue] = _ProcessQueue(epoch, offset)

    def _start(self, queue: MessageQueue, offset: int) -> None:
        super()._start(queue, offset)
        if self.orderly:
            self._lock_queues([queue])

    def _release(self, queues: set[MessageQueue]) -> None:
        with self._lock:
            for queue in queues:
                pq = self._queues.pop(queue, None)
                if pq is not None:
                    self._positions[queue] = pq.position()
        super()._release(queues)
        if self.orderly:
            self._lock_request(RequestCode.UNLOCK_BATCH_MQ, list(queues))

    def _lock_queues(self, queues: list[MessageQueue]) -> None:
        if not queues:
            return
        try:
            locked = self._lock_request(RequestCode.LOCK_BATCH_MQ, queues)
        except Exception as exc:
            _log.warning("locking queues of group %s failed: %s", self.group, exc)
            return
        for queue in queues:
            pq = self._queues.get(queue)
            if pq is not None:
                was = pq.locked
                pq.locked = queue in locked
                if pq.locked and not was:
                    self._schedule_orderly(queue, pq)

    def _lock_request(self, code: int, queues: list[MessageQueue]) -> set[MessageQueue]:
        locked: set[MessageQueue] = set()
        by_broker: dict[str, list[MessageQueue]] = {}
        for queue in queues:
            by_broker.setdefault(queue.broker_name, []).append(queue)
        for broker_name, mine in by_broker.items():
            body = json.dumps({"consumerGroup": self.group, "clientId": self.instance.client_id,
                               "mqSet": [{"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id}
                                         for q in mine]}).encode()
            address = self.instance.master_address(broker_name, mine[0].topic)
            response = check_success(self.instance.remoting.call(address, code, None, body), "locking queues")
            if code == RequestCode.LOCK_BATCH_MQ:
                answer = json_object(response.body or b"{}", "the locked queues", CorruptDataError,
                                     loads=parse_json_lenient)
                for item in answer.get("lockOKMQSet") or []:
                    locked.add(MessageQueue(item["topic"], item["brokerName"], int(item["queueId"])))
        return locked

    # ---- delivery (loop thread) ------------------------------------------------------------------------------

    def _deliver(self, queue: MessageQueue, epoch: int, messages: list[MessageExt], next_offset: int) -> None:
        pq = self._queues.get(queue)
        if pq is None or pq.epoch != epoch:
            return
        with pq.lock:
            for message in messages:
                pq.messages[message.queue_offset] = message
            pq.next_offset = next_offset
            cached = self._cached.get(queue)
            if cached is not None:
                cached[0] += len(messages)
                cached[1] += sum(len(m.body) for m in messages)
            self._positions[queue] = pq.position()
        if not messages:
            return
        if self.orderly:
            self._schedule_orderly(queue, pq)
            return
        for i in range(0, len(messages), self.consume_batch_size):
            self._pool.submit(self._consume_concurrently, queue, pq, messages[i:i + self.consume_batch_size])

    # ---- consuming (pool threads) ----------------------------------------------------------------------------

    def running_info(self) -> dict[str, Any]:
        info = super().running_info()
        info["properties"].update({"PROP_CONSUMEORDERLY": "true" if self.orderly else "false",
                                   "PROP_THREADPOOL_CORE_SIZE": str(self._pool._max_workers)})
        for queue, queue_info in info["mqTable"].items():
            pq = self._queues.get(queue)
            if pq is not None:
                with pq.lock:
                    offsets = list(pq.messages)
                queue_info.update(locked=pq.locked, cachedMsgMinOffset=min(offsets, default=0),
                                  cachedMsgMaxOffset=max(offsets, default=0))
        return info

    def consume_directly(self, message: MessageExt) -> Future[dict[str, Any]]:
        """Run the listener on one message that an administrator picked (CONSUME_MESSAGE_DIRECTLY): a Future of
        ConsumeMessageDirectlyResult's fields. The message is not committed or sent back, whatever the answer."""
        return self._pool.submit(self._consume_directly, message)

    def _consume_directly(self, message: MessageExt) -> dict[str, Any]:
        started = time.monotonic()
        remark = None
        try:
            status = self.listener([message]) if self.listener is not None else None
            result = ("CR_RETURN_NULL" if status is None else
                      "CR_SUCCESS" if ConsumeStatus(status) is ConsumeStatus.CONSUME_SUCCESS else "CR_LATER")
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
        return {"order": self.orderly, "autoCommit": True, "consumeResult": result, "remark": remark,
                "spentTimeMills": int((time.monotonic() - started) * 1000)}

    def _call_listener(self, queue: MessageQueue, messages: list[MessageExt]) -> ConsumeStatus:
        listener = self.listener
        assert listener is not None             # start() refuses to run without one
        started = time.monotonic()
        try:
            answer = listener(messages)
            status = ConsumeStatus.CONSUME_SUCCESS if answer is None else ConsumeStatus(answer)
        except Exception:
            _log.exception("the listener of group %s failed; its messages are consumed again later", self.group)
            status = ConsumeStatus.RECONSUME_LATER
        self.stats.consumed(queue.topic, len(messages), status is ConsumeStatus.CONSUME_SUCCESS,
                            (time.monotonic() - started) * 1000.0)
        return status

    def _done(self, queue: MessageQueue, pq: _ProcessQueue, messages: list[MessageExt]) -> None:
        with pq.lock:
            for message in messages:
                pq.messages.pop(message.queue_offset, None)
            current = self._queues.get(queue) is pq
            if current:
                self._positions[queue] = pq.position()
        if current:     # not a queue restarted since (a reset): its cache counts start anew
            self._taken(queue, messages)

    def _consume_concurrently(self, queue: MessageQueue, pq: _ProcessQueue, messages: list[MessageExt]) -> None:
        if self._closed or self._queues.get(queue) is not pq:
            return
        status = self._call_listener(queue, messages)
        if status is ConsumeStatus.RECONSUME_LATER and self.message_model == MessageModel.CLUSTERING:
            failed = [m for m in messages if not self._send_back(queue, m)]
            if failed:
                self.instance.remoting.loop.call_later(
                    RETRY_LOCALLY_AFTER, self._pool.submit, self._consume_concurrently, queue, pq, failed)
                messages = [m for m in messages if m not in failed]
        self._done(queue, pq, messages)

    def _send_back(self, queue: MessageQueue, message: MessageExt, delay_level: int = 0) -> bool:
        try:
            address = self.instance.master_address(queue.broker_name, queue.topic)
            check_success(self.instance.remoting.call(address, RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": message.commitlog_offset, "group": self.group, "delayLevel": delay_level,
                "originMsgId": message.msg_id, "originTopic": message.real_topic, "unitMode": "false",
                "maxReconsumeTimes": self.max_reconsume_times}), "sending a message back")
        except Exception as exc:
            _log.warning("sending %s back to the broker failed: %s", message, exc)
            return False
        retry = self._retry_topic
        if retry is not None and not any(q.topic == retry for q in self._assigned):
            self._wake.set()        # the retry topic exists now: rebalance to consume it
        return True

    def _schedule_orderly(self, queue: MessageQueue, pq: _ProcessQueue) -> None:
        with pq.lock:
            if pq.consuming or not pq.locked or not pq.messages:
                return
            pq.consuming = True
        self._pool.submit(self._consume_orderly, queue, pq)

    def _consume_orderly(self, queue: MessageQueue, pq: _ProcessQueue) -> None:
        if self._closed or self._queues.get(queue) is not pq or not pq.locked:
            pq.consuming = False
            return
        with pq.lock:
            batch = [pq.messages[o] for o in sorted(pq.messages)[:self.consume_batch_size]]
        status = self._call_listener(queue, batch)
        if status is ConsumeStatus.RECONSUME_LATER:
            pq.failures += 1
            if pq.failures <= self.max_reconsume_times or not all(self._send_back(queue, m, -1) for m in batch):
                time.sleep(RETRY_LOCALLY_AFTER)  # this queue waits: order matters more than throughput
                pq.consuming = False
                self._schedule_orderly(queue, pq)
                return
        pq.failures = 0
        self._done(queue, pq, batch)
        pq.consuming = False
        self._schedule_orderly(queue, pq)

    def close(self) -> None:
        """Let the listener calls under way finish, then commit and leave the group."""
        if self._closed:
            return
        self._started.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
        super().close()
