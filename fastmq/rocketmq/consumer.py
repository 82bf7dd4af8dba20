"""What the pull and the push consumer share, and the pull consumer.

Assignment: explicit (assign) or by subscription. Subscribed queues are shared in CLUSTERING mode by the group's
consumers: each one asks a broker for the group's consumer ids (GET_CONSUMER_LIST_BY_GROUP 38, which knows them
from the heartbeats) and takes its share of the sorted queues (allocate_averagely, or another Allocation); in
BROADCASTING mode every consumer takes every queue and keeps its offsets in a local file. Rebalancing runs on the
consumer's worker thread every 20 s, at once after subscribe() and when a broker says the group changed
(NOTIFY_CONSUMER_IDS_CHANGED). The same thread commits offsets every 5 s (auto_commit) and at close.

A queue without a committed offset starts per consume_from_where: the last offset (GET_MAX_OFFSET 30), the first
(GET_MIN_OFFSET 31) or the one of a timestamp (SEARCH_OFFSET_BY_TIMESTAMP 29). Note that a 5.x broker answers a
group's first offset query for a queue that still holds its first message with 0, as it does for Java clients.
"""
from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import deque
from typing import Any

from fastmq.closeable import Closeable
from fastmq.errors import CorruptDataError
from fastmq.json_document import json_object
from fastmq.rocketmq._native.messages import MessageExt
from fastmq.rocketmq.acl import Credentials
from fastmq.rocketmq.client import ClientInstance, check_success
from fastmq.rocketmq.errors import RocketMQError, TopicNotFoundError
from fastmq.rocketmq.fetcher import Fetcher
from fastmq.rocketmq.offsets import LocalOffsetStore, RemoteOffsetStore
from fastmq.rocketmq.protocol import RETRY_GROUP_TOPIC_PREFIX, ConsumeFromWhere, MessageModel, RequestCode
from fastmq.rocketmq.route import MessageQueue, parse_json_lenient
from fastmq.rocketmq.stats import ConsumeStats
from fastmq.rocketmq.subscription import Allocation, Subscription, allocate_averagely

_log = logging.getLogger(__name__)

REBALANCE_INTERVAL = 20.0
REBALANCE_RETRY = 1.0             # after a rebalance that failed half-way (a queue's offset lookup timed out)
AUTO_COMMIT_INTERVAL = 5.0
_epochs = itertools.count(1)


class ConsumerBase(Closeable):
    """The group membership, assignment, offsets and fetching of one consumer."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, group: str, namesrv_addr: str | list[str] | None = None, *,
                 message_model: str = MessageModel.CLUSTERING,
                 consume_from_where: str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp: int | None = None, pull_batch_size: int = 32, suspend_ms: int = 15000,
                 auto_commit: bool = True, allocation: Allocation = allocate_averagely,
                 offset_store_dir: str | None = None, max_cached_messages: int = 1000,
                 max_cached_bytes: int = 100 * 1024 * 1024, instance: ClientInstance | None = None,
                 request_timeout: float = 3.0, check_crc: bool = True,
                 credentials: Credentials | None = None) -> None:
        if instance is None and namesrv_addr is None:
            raise ValueError(f"a {type(self).__name__} needs namesrv_addr (or a ClientInstance)")
        if message_model not in (MessageModel.CLUSTERING, MessageModel.BROADCASTING):
            raise ValueError(f"message_model must be CLUSTERING or BROADCASTING, not {message_model!r}")
        self.group = group
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp
        self.auto_commit = auto_commit
        self.allocation = allocation
        self.max_cached_messages = max_cached_messages
        self.max_cached_bytes = max_cached_bytes
        self._owns_instance = instance is None
        self.instance = instance if instance is not None else ClientInstance(
            namesrv_addr, request_timeout=request_timeout, credentials=credentials)
        self.subscriptions: dict[str, Subscription] = {}
        self._start_ms = int(time.time() * 1000)
        if message_model == MessageModel.BROADCASTING:
            self.offset_store: LocalOffsetStore | RemoteOffsetStore = LocalOffsetStore(
                offset_store_dir or ".rocketmq_offsets", self.instance.client_id, group)
        else:
            self.offset_store = RemoteOffsetStore(self.instance, group)
        self.stats = ConsumeStats()
        self.fetcher = Fetcher(self.instance, group, self.subscriptions, self._deliver, self._may_pull, self.stats,
                               pull_batch_size=pull_batch_size, suspend_ms=suspend_ms, check_crc=check_crc)
        self._lock = threading.Lock()
        self._assigned: dict[MessageQueue, int] = {}        # queue -> epoch of its current fetch
        self._positions: dict[MessageQueue, int] = {}       # next offset to consume (what commit() writes)
        self._committed: dict[MessageQueue, int] = {}
        self._cached: dict[MessageQueue, list[int]] = {}    # queue -> [messages, bytes] fetched, not consumed
        self._resets: dict[MessageQueue, int] = {}          # offsets a broker said to go on from (worker applies)
        self._manual = False
        self._closed = False
        self._wake = threading.Event()
        self.instance.register(self)
        self._worker = threading.Thread(target=self._work, name=f"fastmq-rocketmq-consumer-{group}", daemon=True)
        self._worker.start()

    # ---- membership -------------------------------------------------------------------------------------------

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        return "consumer", {"groupName": self.group, "consumeType": self.consume_type,
                            "messageModel": self.message_model, "consumeFromWhere": self.consume_from_where,
                            "subscriptionDataSet": [s.heartbeat_data() for s in list(self.subscriptions.values())],
                            "unitMode": False}

    def rebalance_soon(self) -> None:
        """The group's members changed (the broker said so): share the queues again now."""
        self._wake.set()

    def running_info(self) -> dict[str, Any]:
        """ConsumerRunningInfo's parts (what GET_CONSUMER_RUNNING_INFO answers; see fastmq.rocketmq.server_requests):
        properties, subscriptionSet, statusTable (fastmq.rocketmq.stats) and, per assigned queue, its
        ProcessQueueInfo."""
        properties = {"PROP_NAMESERVER_ADDR": ";".join(self.instance.namesrvs), "PROP_CONSUME_TYPE": self.consume_type,
                      "PROP_CLIENT_VERSION": "fastmq", "PROP_CONSUMER_START_TIMESTAMP": str(self._start_ms),
                      "consumerGroup": self.group, "messageModel": self.message_model,
                      "consumeFromWhere": self.consume_from_where}
        queues = {}
        with self._lock:
            for queue in sorted(self._assigned, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
                count, size = self._cached.get(queue, (0, 0))
                # the offset the next commit writes (Java's MEMORY_FIRST_THEN_STORE)
                queues[queue] = {"commitOffset": self._positions.get(queue, self._committed.get(queue, -1)),
                                 "cachedMsgCount": count, "cachedMsgSizeInMiB": size >> 20, "droped": False}
        return {"properties": properties,
                "subscriptionSet": [s.heartbeat_data() for s in list(self.subscriptions.values())],
                "mqTable": queues, "statusTable": self.stats.status_table()}

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume the topic's messages whose tags match `expression` ("*", or "TagA || TagB")."""
        if self._manual:
            raise RocketMQError("this consumer has queues assigned by hand; subscribe() and assign() do not mix")
        self.subscriptions[topic] = Subscription(topic, expression)
        self.instance.route(topic)
        self.instance.send_heartbeats()
        self._wake.set()

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly these queues (no group rebalancing)."""
        if self.subscriptions and not self._manual:
            raise RocketMQError("this consumer subscribes to topics; subscribe() and assign() do not mix")
        self._manual = True
        for queue in queues:
            self.instance.route(queue.topic)
        self._set_assignment(set(queues), topics=None)

    def assignment(self) -> set[MessageQueue]:
        return set(self._assigned)

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues."""
        return list(self.instance.route(topic).read_queues)

    def _rebalance(self) -> bool:
        """Share every subscribed topic's queues again; False when some topic could not be (retried soon)."""
        done = True
        for topic in list(self.subscriptions):
            try:
                route = self.instance.route(topic, refresh=True)
                queues = route.read_queues
                if self.message_model == MessageModel.BROADCASTING:
                    mine = set(queues)
                else:
                    ids = self._consumer_ids(topic)
                    mine = set(self.allocation(self.instance.client_id, ids, queues))
                self._set_assignment(mine, topics={topic})
            except TopicNotFoundError as exc:
                _log.debug("rebalancing %s of group %s: %s", topic, self.group, exc)
            except Exception as exc:
                _log.warning("rebalancing %s of group %s failed: %s", topic, self.group, exc)
                done = False
        return done

    def _consumer_ids(self, topic: str) -> list[str]:
        route = self.instance.route(topic)
        for broker_name in sorted(route.brokers):
            address = route.master(broker_name)
            if address is None:
                continue
            response = check_success(self.instance.remoting.call(
                address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}),
                "listing the group's consumers")
            answer = json_object(response.body or b"{}", "the group's consumer list", CorruptDataError,
                                 loads=parse_json_lenient)
            return list(answer.get("consumerIdList") or [])
        return []

    def _set_assignment(self, mine: set[MessageQueue], topics: set[str] | None) -> None:
        current = {q for q in self._assigned if topics is None or q.topic in topics}
        removed = current - mine
        if removed:
            self._release(removed)
        for queue in sorted(mine - current):
            offset = self._start_offset(queue)
            self._start(queue, offset)

    def _release(self, queues: set[MessageQueue]) -> None:
        with self._lock:
            offsets = {q: self._positions[q] for q in queues if q in self._positions}
            for queue in queues:
                self._assigned.pop(queue, None)
                self._cached.pop(queue, None)
                self.fetcher.revoke(queue)
        self._commit_offsets(offsets)

    def _start(self, queue: MessageQueue, offset: int) -> None:
        with self._lock:
            epoch = next(_epochs)
            self._assigned[queue] = epoch
            self._positions[queue] = offset
            self._cached[queue] = [0, 0]
            self._track(queue, epoch, offset)
        self.fetcher.assign(queue, offset, epoch)

    def _track(self, queue: MessageQueue, epoch: int, offset: int) -> None:
        """What a consumer keeps of a queue's new fetch, made before the fetch starts: the loop thread may
        deliver the first pull's answer before _start() returns."""

    def _start_offset(self, queue: MessageQueue) -> int:
        stored = self.offset_store.read(queue)
        if stored is not None and stored >= 0:
            return stored
        where = self.consume_from_where
        if where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or queue.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # A group's retry topic holds only its own sent-back messages: all of them are wanted.
            return self._queue_offset(queue, RequestCode.GET_MIN_OFFSET, {})
        if where == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            timestamp = self.consume_timestamp if self.consume_timestamp is not None else int(
                time.time() * 1000 - 30 * 60 * 1000)
            return self._queue_offset(queue, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"timestamp": timestamp})
        return self._queue_offset(queue, RequestCode.GET_MAX_OFFSET, {})

    def _queue_offset(self, queue: MessageQueue, code: int, extra: dict[str, Any]) -> int:
        address = self.instance.master_address(queue.broker_name, queue.topic)
        response = check_success(self.instance.remoting.call(
            address, code, {"topic": queue.topic, "queueId": queue.queue_id, **extra}), f"asking {queue}'s offset")
        return int(response.ext_fields["offset"])

    # ---- positions and commits ----------------------------------------------------------------------------------

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """Consume `queue` from `offset` on (messages already fetched from elsewhere in it are dropped)."""
        if queue not in self._assigned:
            raise RocketMQError(f"{queue} is not assigned to this consumer")
        self._start(queue, offset)

    def position(self, queue: MessageQueue) -> int:
        return self._positions[queue]

    def committed(self, queue: MessageQueue) -> int | None:
        """The offset stored for the group (broker or local file)."""
        return self.offset_store.read(queue)

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Store the offsets (default: the positions of every assigned queue) and wait until they are."""
        if offsets is None:
            with self._lock:
                offsets = {q: self._positions[q] for q in self._assigned if q in self._positions}
        self._commit_offsets(offsets)

    def reset_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        """Go on from these offsets (a broker's RESET_CONSUMER_CLIENT_OFFSET, any thread): the queues assigned
        here drop what they fetched and restart there, and the offsets are committed; the others are left to the
        members they are assigned to."""
        with self._lock:
            self._resets.update(offsets)
        self._wake.set()

    def _apply_resets(self) -> None:
        with self._lock:
            resets, self._resets = self._resets, {}
            mine = {queue: offset for queue, offset in resets.items() if queue in self._assigned}
        for queue, offset in mine.items():
            _log.info("group %s goes on from offset %d of %s, as its broker said", self.group, offset, queue)
            self._start(queue, offset)
        try:
            self._commit_offsets(mine)
        except Exception as exc:
            _log.warning("committing the reset offsets of group %s failed: %s", self.group, exc)

    def _commit_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        # Every offset goes, changed or not (as the Java client's persistAll): a broker may have lost one it answered
        # (fastmq.rocketmq.offsets), and the next commit mends it.
        if offsets:
            self.offset_store.commit(offsets)
            self._committed.update(offsets)

    # ---- fetching ------------------------------------------------------------------------------------------------

    def _may_pull(self, queue: MessageQueue) -> bool:
        cached = self._cached.get(queue)
        return cached is None or (cached[0] < self.max_cached_messages and cached[1] < self.max_cached_bytes)

    def _deliver(self, queue: MessageQueue, epoch: int, messages: list[MessageExt], next_offset: int) -> None:
        raise NotImplementedError

    def _taken(self, queue: MessageQueue, messages: list[MessageExt]) -> None:
        """Consumed messages leave the cache; a queue paused by flow control may pull again."""
        cached = self._cached.get(queue)
        if cached is not None:
            cached[0] -= len(messages)
            cached[1] -= sum(len(m.body) for m in messages)
            if cached[0] < self.max_cached_messages and cached[1] < self.max_cached_bytes:
                self.fetcher.resume(queue)

    # ---- the worker thread and closing -----------------------------------------------------------------------------

    def _work(self) -> None:
        next_rebalance = 0.0
        # Without auto_commit the commit deadline never comes: a deadline in the past made every wait 0 s (a spin)
        next_commit = time.monotonic() + AUTO_COMMIT_INTERVAL if self.auto_commit else math.inf
        while not self._closed:
            now = time.monotonic()
            if self._resets:
                self._apply_resets()
            if self._wake.is_set() or now >= next_rebalance:
                self._wake.clear()
                done = True
                if self.subscriptions and not self._manual:
                    done = self._rebalance()
                next_rebalance = now + (REBALANCE_INTERVAL if done else REBALANCE_RETRY)
            if self.auto_commit and now >= next_commit:
                try:
                    self.commit(self._commit_positions())
                except Exception as exc:
                    _log.warning("committing the offsets of group %s failed: %s", self.group, exc)
                next_commit = now + AUTO_COMMIT_INTERVAL
            if self._closed:
                break     # close() set the wake-up this iteration may have cleared: do not wait out the interval
            self._wake.wait(max(0.0, min(next_rebalance, next_commit) - time.monotonic()))

    def _commit_positions(self) -> dict[MessageQueue, int]:
        with self._lock:
            return {q: self._positions[q] for q in self._assigned if q in self._positions}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._worker.join(10.0)
        self.fetcher.close()
        if self.auto_commit:
            try:
                self.commit(self._commit_positions())
            except Exception as exc:
                _log.warning("the final commit of group %s failed: %s", self.group, exc)
        if self._owns_instance:
            self.instance.close()
        else:
            self.instance.unregister(self)


class PullConsumer(ConsumerBase):
    """poll() returns fetched messages; commit() (or auto_commit) stores how far they were consumed."""

    def __init__(self, group: str, namesrv_addr: str | list[str] | None = None, **options: Any) -> None:
        self._ready: deque[tuple[MessageQueue, int, list[MessageExt], int]] = deque()
        self._arrived = threading.Condition()
        super().__init__(group, namesrv_addr, **options)

    def _deliver(self, queue: MessageQueue, epoch: int, messages: list[MessageExt], next_offset: int) -> None:
        with self._arrived:
            if self._assigned.get(queue) != epoch:
                return                  # fetched before a seek or a reassignment
            cached = self._cached.get(queue)
            if cached is not None:
                cached[0] += len(messages)
                cached[1] += sum(len(m.body) for m in messages)
            self._ready.append((queue, epoch, messages, next_offset))
            self._arrived.notify()

    def poll(self, timeout: float = 1.0, max_messages: int = 1000) -> list[MessageExt]:
        """Messages fetched since the last poll (waiting up to `timeout` seconds for some), in queue order per
        queue; the positions move past them."""
        deadline = time.monotonic() + timeout
        result: list[MessageExt] = []
        with self._arrived:
            while True:
                while self._ready and len(result) < max_messages:
                    queue, epoch, messages, next_offset = self._ready.popleft()
                    if self._assigned.get(queue) != epoch:
                        continue            # fetched before a seek or a reassignment
                    result.extend(messages)
                    self._positions[queue] = next_offset
                    self._taken(queue, messages)
                if result or self._closed:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return result
                self._arrived.wait(remaining)
