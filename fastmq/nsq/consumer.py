"""The NSQ consumer: one connection per nsqd (per topic partition on Youzan's NSQ), max_in_flight spread as RDY.

Subscribing: every connection sends SUB (SUB_ORDERED for ordered consumption, SUB_ADVANCED when a start offset is
given; Youzan's take a partition), then RDY. nsqd's RDY is a connection's in-flight limit, so it is sent again only
when the spread changes: max_in_flight // connections each (the remainder to the first ones); with more connections
than max_in_flight, max_in_flight of them get RDY 1 and the turn passes to the others every
rdy_redistribute_interval_s, so that no connection starves. Ordered consumption is RDY 1 per partition.

Messages go to a queue that poll() / iteration read in the user's thread. finish(), requeue() and touch() of a
message are queued for its connection and leave in the loop's next iteration, many in one write (a finish queues
just the message id; codec.encode_answers writes the FIN lines). A message whose
connection closed meanwhile is not answered (nsqd redelivers it after its timeout). requeue() without a delay waits
attempts x requeue_delay_ms (capped at max_requeue_delay_ms). A message delivered more than max_attempts times is
handed to on_give_up and finished, not returned.

Backoff: a requeue with backoff=True (the default) sets every connection's RDY to 0 for backoff_ms x 2**(level-1)
(capped at max_backoff_ms); after that one connection gets RDY 1 to test the water; each finish lowers the level,
each backoff requeue raises it, and at level 0 the full spread returns.

Connections that close reconnect with the pool's backoff; with lookupd, new nsqd (partitions) are picked up at each
poll and at once after a connection failed.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from typing import Any, Callable, Iterator

from fastmq.closeable import Closeable
from fastmq.io import Connection
from fastmq.nsq._native import codec
from fastmq.nsq._native.codec import Message
from fastmq.nsq.client import NSQClient, partition_arg
from fastmq.nsq.connection import NSQSettings, frame_error
from fastmq.nsq.errors import NSQConfigurationError
from fastmq.nsq.lookup import NSQDAddress, TopicLookup

_log = logging.getLogger(__name__)


class _Subscription:
    """One connection's consumer state (loop thread, except the answer queue that user threads append to)."""

    __slots__ = ("consumer", "node_id", "address", "conn", "subscribed", "rdy", "outbox", "flags", "flush_wanted")

    def __init__(self, consumer: Consumer, address: NSQDAddress) -> None:
        self.consumer = consumer
        self.node_id = address.node_id
        self.address = address
        self.conn: Connection | None = None
        self.subscribed = False
        self.rdy = 0
        self.outbox: list[bytes] = []        # ids to FIN, REQ / TOUCH commands: waiting for the loop
        self.flags = 0
        self.flush_wanted = False

    # Message.responder: called from the user's thread.
    def finish(self, message: Message) -> None:
        # The hot path (one call per message): _queue inlined; the backoff only hears of it while backing off.
        self.outbox.append(message.id)
        if not self.flush_wanted:
            self.flush_wanted = True
            self.consumer.loop.call_soon_threadsafe(self.flush)
        if self.consumer._backoff_level:
            self.consumer._answered(True)

    def requeue(self, message: Message, delay_ms: int | None, backoff: bool) -> None:
        consumer = self.consumer
        if delay_ms is None:
            delay_ms = min(message.attempts * consumer.requeue_delay_ms, consumer.max_requeue_delay_ms)
        self._queue(codec.req(message.id, int(delay_ms)))
        if backoff:
            consumer._answered(False)

    def touch(self, message: Message) -> None:
        self._queue(codec.touch(message.id))

    def _queue(self, command: bytes) -> None:
        self.outbox.append(command)
        if not self.flush_wanted:
            self.flush_wanted = True
            self.consumer.loop.call_soon_threadsafe(self.flush)

    def flush(self) -> None:
        self.flush_wanted = False
        commands, self.outbox = self.outbox, []
        conn = self.conn
        if commands and conn is not None and conn.ready:
            conn.send_frame(codec.encode_answers(commands))

    def set_rdy(self, count: int) -> None:
        conn = self.conn
        if conn is not None and conn.ready and self.subscribed and count != self.rdy:
            self.rdy = count
            conn.send_frame(codec.rdy(count))


class Consumer(Closeable):
    """Reads one topic's channel from nsqd; poll() / iteration from one thread, answers from any."""

    def __init__(self, topic: str, channel: str, *, nsqd_tcp_addresses: str | list[str] | None = None,
                 lookupd_http_addresses: str | list[str] | None = None, settings: NSQSettings | None = None,
                 max_in_flight: int = 1, max_attempts: int = 0, on_give_up: Callable[[Message], Any] | None = None,
                 requeue_delay_ms: int = 90000, max_requeue_delay_ms: int = 15 * 60 * 1000,
                 backoff_ms: int = 1000, max_backoff_ms: int = 128000, rdy_redistribute_interval_s: float = 5.0,
                 partition: int | None = None, ordered: bool = False, start_offset: str | None = None,
                 lookupd_poll_interval_s: float = 60.0, **settings_options: Any) -> None:
        if settings is None:
            settings = NSQSettings(**settings_options)
        elif settings_options:
            raise NSQConfigurationError("give settings or settings options, not both")
        codec.sub(topic, channel)       # checks both names
        if max_in_flight < 1:
            raise NSQConfigurationError(f"max_in_flight must be at least 1, got {max_in_flight}")
        if ordered and partition is None and lookupd_http_addresses is None:
            raise NSQConfigurationError("ordered consumption of a direct nsqd needs a partition")
        self.topic = topic
        self.channel = channel
        self.max_in_flight = max_in_flight
        self.max_attempts = max_attempts
        self.on_give_up = on_give_up
        self.requeue_delay_ms = requeue_delay_ms
        self.max_requeue_delay_ms = max_requeue_delay_ms
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.redistribute_interval = rdy_redistribute_interval_s
        self.partition = partition
        self.ordered = ordered
        self.start_offset = start_offset
        # Delivered messages: the loop appends, poll() pops (deque operations are atomic); the event wakes a
        # poll() that found it empty, and is set only while one may be waiting, so a busy stream costs no lock.
        self._messages: deque[Message] = deque()
        self._arrived = threading.Event()
        self._poll_waiting = False      # a poll() may be waiting on _arrived (a plain flag: the hot path reads it)
        self._subs: dict[Any, _Subscription] = {}
        self._backoff_level = 0
        self._backoff_timer: Any = None
        self._rotation = 0
        self._next_rotation = 0.0       # loop time of the next pass of RDY to other connections
        self._closed = False
        self.client = NSQClient(settings, nsqd_tcp_addresses=nsqd_tcp_addresses,
                                lookupd_http_addresses=lookupd_http_addresses, requests_in_flight=8,
                                lookupd_poll_interval_s=lookupd_poll_interval_s, name="fastmq-nsq-consumer",
                                on_push=self._on_message, on_topology=self._on_topology, lookup_access="r")
        self.loop = self.client.loop
        self.pool = self.client.pool
        self.pool.add_listener(self._node_state)
        answer = self.client.watch(topic)
        self.loop.call_soon_threadsafe(self._on_topology, topic, answer)
        self.loop.call_soon_threadsafe(self._maintain)

    # ---- the user's side -----------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message, or None after timeout seconds without one."""
        messages = self._messages
        deadline = None
        while True:
            try:
                message = messages.popleft()
            except IndexError:
                if deadline is None:
                    deadline = float("inf") if timeout is None else time.monotonic() + timeout
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._poll_waiting = True
                self._arrived.clear()
                if not messages:           # checked after clear(): an append in between sets the event again
                    self._arrived.wait(None if remaining == float("inf") else remaining)
                self._poll_waiting = False
                continue
            if self.max_attempts and message.attempts > self.max_attempts:
                self._give_up(message)
                continue
            return message

    def __iter__(self) -> Iterator[Message]:
        while not self._closed:
            message = self.poll(0.5)
            if message is not None:
                yield message

    def _give_up(self, message: Message) -> None:
        if self.on_give_up is not None:
            try:
                self.on_give_up(message)
            except Exception:
                _log.exception("on_give_up failed for %r", message)
        else:
            _log.warning("giving up on %r after %d attempts", message, message.attempts)
        if not message.responded:
            message.finish()

    @property
    def connections(self) -> int:
        """Subscribed connections now."""
        return sum(1 for sub in list(self._subs.values()) if sub.subscribed)

    def close(self, timeout: float = 5.0) -> None:
        """Send the answers given so far, then CLS on every connection, and close once nsqd confirmed
        (CLOSE_WAIT) or after timeout seconds. Unanswered messages go back to nsqd after their timeout."""
        if self._closed:
            return
        self._closed = True
        # Undelivered messages go back to nsqd after their timeout; dropping them here also frees them (Messages
        # are not tracked by the cycle collector, see fastmq.nsq._native.codec.Message).
        self._messages.clear()
        done = threading.Event()
        try:
            pending = self.loop.run_in_loop(self._send_cls, done.set, timeout=timeout)
            if pending:
                done.wait(timeout)
        except (TimeoutError, RuntimeError):
            pass
        finally:
            self.client.close()

    def _send_cls(self, all_closed: Callable[[], Any]) -> int:
        waiting = [sub for sub in self._subs.values() if sub.conn is not None and sub.conn.ready]
        remaining = [len(waiting)]

        def closed(frame: Any, error: BaseException | None) -> None:
            remaining[0] -= 1
            if not remaining[0]:
                all_closed()

        for sub in waiting:
            sub.flush()
            assert sub.conn is not None         # waiting holds subscriptions with a ready connection
            sub.conn.request(codec.CLS, closed)
        return len(waiting)

    # ---- connections (loop thread) -------------------------------------------------------------------

    def _wanted(self, answer: TopicLookup) -> list[NSQDAddress]:
        addresses = answer.addresses
        if self.partition is not None:
            if answer.partitioned:
                return [address for address in addresses if address.partition == self.partition]
            return [NSQDAddress(address.host, address.tcp_port, self.partition) for address in addresses]
        return addresses

    def _on_topology(self, topic: str, answer: TopicLookup) -> None:
        if self._closed:
            return
        # Youzan's nsqd takes on an ext topic only subscribers that IDENTIFY with extend_support, and on other
        # topics only the others: the lookup's meta says which this topic is (a direct nsqd gives no meta: then
        # the setting alone decides). New connections IDENTIFY so.
        settings = self.client.settings
        ext_topic = bool(answer.meta.get("extend_support", settings.extend_support))
        if ext_topic != settings.extend_support:
            self.client.settings = dataclasses.replace(settings, extend_support=ext_topic)
        for address in self._wanted(answer):
            if address.node_id not in self._subs:
                sub = self._subs[address.node_id] = _Subscription(self, address)
                sub.flags = codec.WITH_EXT if self.client.settings.extend_support else 0
                if self.ordered or self.start_offset is not None:
                    sub.flags |= codec.WITH_OFFSET
                self.client.add_address(address)
                self.pool.maybe_connect(address.node_id)

    def _maintain(self) -> None:
        # Reconnects (the pool keeps each node's backoff) and passes RDY around when connections outnumber it.
        if self._closed:
            return
        for node_id in list(self._subs):
            self.pool.maybe_connect(node_id)
        subscribed = [sub for sub in self._subs.values() if sub.subscribed]
        now = self.loop.time()
        if len(subscribed) > self.max_in_flight and not self._backoff_level and now >= self._next_rotation:
            self._next_rotation = now + self.redistribute_interval
            self._rotation += self.max_in_flight
            self._spread()
        self.loop.call_later(min(1.0, self.redistribute_interval), self._maintain)

    def _node_state(self, node_id: Any, ready: bool, error: BaseException | None) -> None:
        sub = self._subs.get(node_id)
        if sub is None:
            return
        if not ready:
            sub.conn = None
            sub.subscribed = False
            sub.rdy = 0
            sub.outbox.clear()
            self._spread()
            if error is not None:
                self.client.refresh(self.topic)
            return
        conn = self.pool.connection(node_id)
        sub.conn = conn
        address = sub.address
        partition = partition_arg(address)
        if self.ordered:
            command = codec.sub_ordered(self.topic, self.channel, partition or 0)
        elif self.start_offset is not None:
            command = codec.sub_advanced(self.topic, self.channel, partition or 0, self.start_offset)
        else:
            command = codec.sub(self.topic, self.channel, partition)

        def subscribed(frame: Any, failure: BaseException | None) -> None:
            failure = failure or frame_error(frame)
            if failure is not None:
                _log.warning("subscribing to %s/%s on %s:%d failed: %s", self.topic, self.channel, address.host,
                             address.tcp_port, failure)
                if conn is not None:
                    conn.close(failure)
                return
            if sub.conn is conn:
                sub.subscribed = True
                self._spread()

        assert conn is not None
        conn.request(command, subscribed)

    def _spread(self) -> None:
        subscribed = [sub for sub in self._subs.values() if sub.subscribed]
        if not subscribed:
            return
        if self._backoff_level:
            return
        if self.ordered:
            for sub in subscribed:
                sub.set_rdy(1)
            return
        count = len(subscribed)
        if count <= self.max_in_flight:
            share, extra = divmod(self.max_in_flight, count)
            for index, sub in enumerate(subscribed):
                sub.set_rdy(share + (1 if index < extra else 0))
            return
        start = self._rotation % count
        turn = {(start + offset) % count for offset in range(self.max_in_flight)}
        for index, sub in enumerate(subscribed):
            sub.set_rdy(1 if index in turn else 0)

    def _on_message(self, conn: Connection, frame: tuple[int, list[bytes]]) -> None:
        sub = self._subs.get(conn.node_id)
        if sub is None or sub.conn is not conn:
            return
        self._messages.extend(codec.decode_messages(frame[1], sub.flags, sub))
        if self._poll_waiting:
            self._arrived.set()

    # ---- backoff -------------------------------------------------------------------------------------

    def _answered(self, success: bool) -> None:
        # User thread: a finish (success) or a backoff requeue (failure) moves the backoff level.
        if success and not self._backoff_level:
            return
        self.loop.call_soon_threadsafe(self._backoff_step, success)

    def _backoff_step(self, success: bool) -> None:
        if success:
            if not self._backoff_level:
                return
            self._backoff_level -= 1
            if not self._backoff_level:
                if self._backoff_timer is not None:
                    self._backoff_timer.cancel()
                    self._backoff_timer = None
                self._spread()
                return
        else:
            self._backoff_level += 1
        for sub in self._subs.values():
            sub.set_rdy(0)
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        delay = min(self.backoff_ms * 2 ** (self._backoff_level - 1), self.max_backoff_ms) / 1000.0
        self._backoff_timer = self.loop.call_later(delay, self._test_the_water)

    def _test_the_water(self) -> None:
        self._backoff_timer = None
        subscribed = [sub for sub in self._subs.values() if sub.subscribed]
        if subscribed:
            subscribed[self._rotation % len(subscribed)].set_rdy(1)
            self._rotation += 1

