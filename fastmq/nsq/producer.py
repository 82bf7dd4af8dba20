"""The NSQ producer: PUB / MPUB / DPUB (and Youzan's PUB_TRACE, PUB_EXT), batched on the io loop.

publish() adds the message to the chunk that waits on the queue of its target (an nsqd, and a partition on Youzan's
NSQ) and returns the chunk's future; the loop drains the queues: a chunk leaves as one MPUB (one PUB when alone), up
to max_batch_messages / max_batch_bytes, pipelined up to requests_in_flight commands per connection (no command
waits for the answer of the one before), and while those are all in flight the next chunk grows. With
connections_per_nsqd > 1 a queue without a partition drains through that many connections to its nsqd (nsqd
reads each connection on a goroutine of its own; chunks may then be taken out of order, which vanilla NSQ does not
promise anyway); a partition's queue keeps to one connection, so Youzan's ordered topics keep their order. nsqd
answers each command with OK (PUB_TRACE: its trace reply), which completes the one future the chunk's messages
share (all or none are taken); an error answer fails it.

Where a message goes: a partition the caller names; else, given a sharding id, the partition it maps to, always the
same one for the same id while the topic keeps its partition count (a CRC-32 of the id modulo the partition count:
ordered producers depend on it). When that partition's nsqd is unreachable, the send fails at once and the topic is
looked up again, rather than moving the message to another partition. Without either, the target with the fewest
queued messages takes it. Errors that mean the topic moved (E_FAILED_ON_NOT_LEADER, E_FAILED_ON_NOT_WRITABLE,
E_TOPIC_NOT_EXIST) close that connection and trigger a new lookup.
"""
from __future__ import annotations

import json
import logging
import threading
import zlib
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Iterable

from fastmq.closeable import Closeable
from fastmq.io.pool import ConnectionPool
from fastmq.nsq._native import codec
from fastmq.nsq.client import NSQClient, partition_arg
from fastmq.nsq.connection import NSQSettings, frame_error
from fastmq.nsq.errors import NSQConfigurationError, NSQNoConnectionsError, NSQServerError
from fastmq.nsq.lookup import NO_PARTITION, NSQDAddress, TopicLookup

_log = logging.getLogger(__name__)

# Kinds of queued items; PLAIN ones merge into MPUB.
_PLAIN, _DEFERRED, _TRACED, _EXT = range(4)


@dataclass(frozen=True)
class TraceReply:
    """What nsqd answers to PUB_TRACE (and to PUB_EXT with a ##trace_id): where the message went."""

    message_id: int
    trace_id: int
    disk_offset: int
    raw_size: int


class _Target:
    """The queue of one (nsqd, partition, topic), and the connections that drain it."""

    __slots__ = ("node_ids", "topic", "partition", "items", "sent")

    def __init__(self, node_ids: list[Any], topic: str, partition: int | None) -> None:
        self.node_ids = node_ids
        self.topic = topic
        self.partition = partition
        # [kind, payload, future, bytes]: a plain entry is a chunk of messages (a list) that grows until it leaves
        self.items: deque[list[Any]] = deque()
        self.sent: set[Future[Any]] = set()         # sent and not answered yet (loop thread)


class Producer(Closeable):
    """Publishes to nsqd; thread-safe. publish*() return concurrent.futures.Future objects."""

    def __init__(self, nsqd_tcp_addresses: str | list[str] | None = None,
                 lookupd_http_addresses: str | list[str] | None = None, *, settings: NSQSettings | None = None,
                 max_batch_messages: int = 1000, max_batch_bytes: int = 1 << 20, requests_in_flight: int = 64,
                 connections_per_nsqd: int = 1, lookupd_poll_interval_s: float = 60.0,
                 **settings_options: Any) -> None:
        if settings is None:
            settings = NSQSettings(**settings_options)
        elif settings_options:
            raise NSQConfigurationError("give settings or settings options, not both")
        if max_batch_messages < 1 or max_batch_bytes < 1:
            raise NSQConfigurationError("max_batch_messages and max_batch_bytes must be positive")
        if connections_per_nsqd < 1:
            raise NSQConfigurationError(f"connections_per_nsqd must be at least 1, got {connections_per_nsqd}")
        self.connections_per_nsqd = connections_per_nsqd
        self.max_batch_messages = max_batch_messages
        self.max_batch_bytes = max_batch_bytes
        self.client = NSQClient(settings, nsqd_tcp_addresses=nsqd_tcp_addresses,
                                lookupd_http_addresses=lookupd_http_addresses, requests_in_flight=requests_in_flight,
                                lookupd_poll_interval_s=lookupd_poll_interval_s, name="fastmq-nsq-producer",
                                lookup_access="w")
        self.loop = self.client.loop
        self.pool: ConnectionPool = self.client.pool
        self.pool.add_listener(self._node_state)
        self._targets: dict[tuple[Any, str, int | None], _Target] = {}
        # topic -> (the lookup answer it was chosen from, the target): publishing without a partition or a
        # sharding id to a topic served by one nsqd skips the routing while that answer stands.
        self._routes: dict[str, tuple[TopicLookup, _Target]] = {}
        self._lock = threading.Lock()
        self._drain_scheduled = False
        self._round_robin = 0
        self._ready_nodes: set[Any] = set()     # loop thread
        self._closed = False

    # ---- publishing ----------------------------------------------------------------------------------

    def publish(self, topic: str, body: bytes, *, partition: int | None = None, sharding_id: Any = None,
                defer_ms: int | None = None) -> Future[Any]:
        """PUB (DPUB with defer_ms); the future's result is None once nsqd took it."""
        if defer_ms is not None:
            return self._submit(topic, partition, sharding_id, _DEFERRED,
                                codec.dpub(topic, defer_ms, body))
        return self._submit(topic, partition, sharding_id, _PLAIN, [body])

    def publish_many(self, topic: str, bodies: Iterable[bytes], *, partition: int | None = None,
                     sharding_id: Any = None) -> Future[Any]:
        """MPUB of these messages (with others waiting to leave for the same target, up to the batch limits): all
        or none are taken."""
        bodies = list(bodies)
        if not bodies:
            raise NSQConfigurationError("publish_many needs at least one message")
        return self._submit(topic, partition, sharding_id, _PLAIN, bodies)

    def publish_trace(self, topic: str, body: bytes, trace_id: int, *, partition: int | None = None,
                      sharding_id: Any = None) -> Future[Any]:
        """PUB_TRACE (Youzan): the future's result is a TraceReply."""
        return self._submit(topic, partition, sharding_id, _TRACED, (trace_id, body))

    def publish_ext(self, topic: str, body: bytes, headers: dict[str, Any] | bytes, *, partition: int | None = None,
                    sharding_id: Any = None) -> Future[Any]:
        """PUB_EXT (Youzan) with a JSON header (a dict, or JSON already encoded); a "##trace_id" header makes the
        result a TraceReply."""
        header = headers if isinstance(headers, bytes) else json.dumps(headers).encode()
        return self._submit(topic, partition, sharding_id, _EXT, (header, body))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything published so far was answered (after close(), nothing is left to wait for)."""
        if self._closed:
            return

        def unanswered() -> list[Future[Any]]:
            with self._lock:
                return [future for target in self._targets.values()
                        for future in [*target.sent, *(item[2] for item in target.items)]]

        for future in self.loop.run_in_loop(unanswered, timeout=timeout):
            future.exception(timeout)

    def close(self, timeout: float = 10.0) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            self.client.close()

    # ---- routing (user thread) -----------------------------------------------------------------------

    def _choose(self, topic: str, answer: TopicLookup, partition: int | None, sharding_id: Any) -> NSQDAddress:
        addresses = answer.addresses
        if not addresses:
            self.client.refresh(topic)
            raise NSQNoConnectionsError(f"no nsqd has topic {topic!r} yet (create it, or publish to nsqd directly)")
        if not answer.partitioned:
            if partition is not None and partition != -1:
                # Direct Youzan nsqd: the partition argument goes with the command.
                return NSQDAddress(addresses[0].host, addresses[0].tcp_port, partition)
            self._round_robin += 1
            return addresses[self._round_robin % len(addresses)]
        by_partition = {address.partition: address for address in addresses}
        if partition is None and sharding_id is not None:
            count = int(answer.meta.get("partition_num") or len(by_partition))
            partition = zlib.crc32(str(sharding_id).encode()) % count
        if partition is not None:
            address = by_partition.get(partition)
            if address is None or self.pool.last_error(address.node_id) is not None and \
                    self.pool.is_disconnected(address.node_id):
                self.client.refresh(topic)
                raise NSQNoConnectionsError(f"partition {partition} of topic {topic!r} has no reachable nsqd now; "
                                            "it is being looked up again")
            return address
        if answer.ordered:
            raise NSQConfigurationError(f"topic {topic!r} is ordered: give a partition or a sharding_id")
        return min(addresses, key=lambda address: self._queued(topic, address))

    def _queued(self, topic: str, address: NSQDAddress) -> int:
        target = self._targets.get((address.node_id, topic, partition_arg(address)))
        return 0 if target is None else len(target.items)

    def _target(self, topic: str, partition: int | None, sharding_id: Any) -> _Target:
        answer = self.client.topics.get(topic)
        unrouted = partition is None and sharding_id is None
        if unrouted:
            route = self._routes.get(topic)
            if route is not None and route[0] is answer:
                return route[1]
        if not codec.is_valid_name(topic):
            raise NSQConfigurationError(f"invalid topic name {topic!r}")
        if answer is None:
            answer = self.client.watch(topic)
        address = self._choose(topic, answer, partition, sharding_id)
        key = (address.node_id, topic, partition_arg(address))
        with self._lock:
            target = self._targets.get(key)
            if target is None:
                # Several connections take turns only where order is not promised anyway: a partition's messages
                # (Youzan's ordered topics, sharding ids) keep to one connection.
                extra = self.connections_per_nsqd - 1 if address.partition == NO_PARTITION else 0
                node_ids = [address.node_id, *(address.node_id + (index,) for index in range(1, extra + 1))]
                target = self._targets[key] = _Target(node_ids, topic, partition_arg(address))
        if unrouted and len(answer.addresses) == 1 and not answer.partitioned:
            self._routes[topic] = (answer, target)
        return target

    def _submit(self, topic: str, partition: int | None, sharding_id: Any, kind: int, payload: Any) -> Future[Any]:
        if self._closed:
            raise NSQNoConnectionsError("the producer is closed")
        target = self._target(topic, partition, sharding_id)
        size = codec.bodies_size(payload) if kind == _PLAIN else 0
        if size < 0:
            # nsqd refuses an empty message (E_BAD_MESSAGE), and with it every message of its MPUB: fail it alone.
            refused: Future[Any] = Future()
            refused.set_exception(NSQConfigurationError("nsqd refuses empty messages (E_BAD_MESSAGE)"))
            return refused
        with self._lock:
            items = target.items
            if kind == _PLAIN and items:
                last = items[-1]
                if (last[0] == _PLAIN and len(last[1]) + len(payload) <= self.max_batch_messages
                        and last[3] + size <= self.max_batch_bytes):
                    # Joins the chunk that waits to leave: one MPUB, one future for all of its messages.
                    last[1].extend(payload)
                    last[3] += size
                    joined: Future[Any] = last[2]
                    return joined
            future: Future[Any] = Future()
            items.append([kind, payload, future, size])
            if not self._drain_scheduled:
                self._drain_scheduled = True
                self.loop.call_soon_threadsafe(self._drain)
        return future

    # ---- sending (loop thread) -----------------------------------------------------------------------

    def _drain(self) -> None:
        with self._lock:
            self._drain_scheduled = False
            targets = [target for target in self._targets.values() if target.items]
        for target in targets:
            for node_id in target.node_ids:
                conn = self.pool.connection(node_id)
                if conn is None:
                    if node_id not in self.pool.nodes:
                        self.pool.add_node(node_id, node_id[0], node_id[1])
                    if not self.pool.maybe_connect(node_id):
                        # In its reconnect backoff: look again once that has passed.
                        self.loop.call_later(self.pool.connection_delay(node_id), self._drain)
                    continue
                while target.items and conn.can_send():
                    self._send_one(conn, target)

    def _send_one(self, conn: Any, target: _Target) -> None:
        with self._lock:
            kind, payload, future, _ = target.items.popleft()
        topic, partition = target.topic, target.partition
        try:
            if kind == _PLAIN:
                data = codec.pub(topic, payload[0], partition) if len(payload) == 1 else codec.mpub(
                    topic, payload, partition)
            elif kind == _DEFERRED:
                data = payload
            elif kind == _TRACED:
                data = codec.pub_trace(topic, partition or 0, payload[0], payload[1])
            else:
                data = codec.pub_ext(topic, partition or 0, payload[0], payload[1])
        except Exception as exc:
            future.set_exception(exc)
            return
        traced = kind == _TRACED or (kind == _EXT and b'"##trace_id"' in payload[0])
        target.sent.add(future)
        node_id = conn.node_id
        conn.request(data, lambda frame, error: self._answered(target, node_id, future, traced, frame, error))

    def _answered(self, target: _Target, node_id: Any, future: Future[Any], traced: bool, frame: Any,
                  error: BaseException | None) -> None:
        target.sent.discard(future)
        if error is None:
            error = frame_error(frame)
        if error is not None:
            if isinstance(error, NSQServerError) and error.lookup_again:
                self.pool.close(node_id)
                self.client.refresh(target.topic)
            future.set_exception(error)
            return
        result = None
        if traced and len(frame[1]) == 30:
            result = TraceReply(*codec.decode_trace_reply(frame[1]))
        future.set_result(result)
        if target.items:
            self._drain()

    def _node_state(self, node_id: Any, ready: bool, error: BaseException | None) -> None:
        if ready:
            self._ready_nodes.add(node_id)
            self._drain()
            return
        if node_id in self._ready_nodes:
            # A working connection closed (its requests failed with it): what is still queued goes through the
            # next one.
            self._ready_nodes.discard(node_id)
            self._drain()
            return
        if error is None or self._closed:
            return
        # The nsqd cannot be reached: what was queued for it fails, so that callers hear of it at once (they may
        # publish again; their topic is being looked up again).
        with self._lock:
            failed: list[Future[Any]] = []
            for target in self._targets.values():
                if node_id in target.node_ids:
                    failed.extend(item[2] for item in target.items)
                    target.items.clear()
        for future in failed:
            future.set_exception(NSQNoConnectionsError(f"nsqd {node_id[0]}:{node_id[1]} is unreachable: {error}"))
            self.client.refresh()
