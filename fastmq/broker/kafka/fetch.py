"""Fetch, with the pull Hold of seed 003 (broker chapter 4.7) as Kafka's long poll.

A Fetch that finds fewer than min_bytes is not answered at once: it is parked on the partitions it reads until a
produce brings data to one of them (the store's arrival listener) or max_wait_ms passes, then it is run again and
answered. So a consumer at the end of a partition costs one request per max_wait or per arrival, never a busy
loop, and a new record reaches it as soon as it is stored.

Per partition: OFFSET_OUT_OF_RANGE outside [log start, high watermark], nothing at the high watermark, else record
batches of at most partition_max_bytes; the response stops growing at max_bytes, and at the broker's own
fetch_max_bytes whatever a client asks (the first partition with data always gets its first record, as KIP-74
asks), and once what is left of it does not hold a partition's next batch. Which partitions a Fetch reads, and
which of them an incremental fetch session's answer holds, is fetch_sessions.py's. isolation_level read_committed
reads up to the last stable offset instead of the high watermark, and gets the aborted transactions that overlap
what it read (partition_transactions.py).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from fastmq.broker.kafka.fetch_sessions import (FetchPlan, FetchSession, SessionPartition, Target, plan_fetch,
                                                rotate_served)
from fastmq.broker.kafka import topic_rules
from fastmq.broker.kafka.front import Request
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.io import IOLoop, ServerConnection

log = logging.getLogger(__name__)

NONE = 0
OFFSET_OUT_OF_RANGE = kerrors.OffsetOutOfRangeError.errno
UNKNOWN_TOPIC_OR_PARTITION = kerrors.UnknownTopicOrPartitionError.errno
UNKNOWN_TOPIC_ID = kerrors.UnknownTopicIdError.errno
TOPIC_ID_VERSION = 13
MAX_WAIT_CAP_MS = 300_000        # a client asking to be held longer is held this long

PartitionData = kp.FetchResponse.PartitionData
AbortedTransaction = kp.FetchResponse.AbortedTransaction
TopicResponse = kp.FetchResponse.FetchableTopicResponse


@dataclasses.dataclass
class FetchResult:
    response: Any
    total: int                                   # record bytes in it
    errors: bool                                 # whether a partition has an error
    keys: list[tuple[str, int]]                  # the partitions read (where a parked fetch waits)
    told: list[tuple[SessionPartition, tuple[int, int, int]]]   # what the session learns (start, end, stable)
    session: FetchSession | None                 # an incremental fetch's session
    served: list[tuple[str, int]]                # the partitions whose records the response holds

    def send(self, request: Request) -> None:
        for entry, values in self.told:
            entry.told = values
        if self.session is not None:
            rotate_served(self.session, self.served)
        request.respond(self.response)


def run_fetch(request: Request, body: Any, plan: FetchPlan) -> FetchResult:
    broker = request.broker
    logs = request.front.logs
    by_id = request.version >= TOPIC_ID_VERSION
    remaining = min(body.max_bytes if request.version >= 3 else 0x7FFFFFFF, broker.config.fetch_max_bytes)
    read_committed = body.isolation_level == 1
    total = 0
    errors = False
    keys = []
    told = []
    served: list[tuple[str, int]] = []
    topics: list[Any] = []
    fetched = request.session.info.fetched
    for target in plan.targets:
        topic, index = target.topic, target.partition
        if topic is None or not 0 <= index < topic.partitions:
            code = UNKNOWN_TOPIC_ID if by_id and topic is None else UNKNOWN_TOPIC_OR_PARTITION
            _add(topics, target, PartitionData(partition_index=index, error_code=code, high_watermark=-1,
                                               last_stable_offset=-1, log_start_offset=-1, records=b""))
            errors = True
            continue
        name = topic.name
        key = (name, index)
        keys.append(key)
        values = logs.offsets(name, index)
        start, end, stable = values
        offset = target.fetch_offset
        entry = target.entry
        if plan.incremental and entry is not None and offset == end and entry.told == values:
            continue                             # nothing new: an incremental answer leaves it out
        records = b""
        code = NONE
        aborted = None
        if offset < start or offset > end:
            code = OFFSET_OUT_OF_RANGE
            errors = True
        elif remaining > 0:
            # The first partition with data gets at least one record, however large (KIP-74), so that a consumer
            # never stalls behind a limit; the others only what fits.
            readable_end = stable if read_committed else end
            limit = min(target.max_bytes, remaining)
            records, next_offset = logs.read(name, index, offset, readable_end, limit, request.client_id,
                                             take_first=total == 0, log_append_time=topic_rules.log_append_time(topic))
            total += len(records)
            remaining -= len(records)
            if records:
                fetched.add(name)
                served.append(key)
                if read_committed:
                    aborted = [AbortedTransaction(producer_id=producer_id, first_offset=first)
                               for producer_id, first in logs.transactions.aborted_transactions(
                                   key, offset, next_offset)]
            elif limit == remaining and offset < readable_end:
                # The response is full: what is left of it did not hold this partition's next batch. The other
                # partitions are not read for the few bytes left (at 4096 partitions that was most of the reads,
                # each finding nothing); an incremental session puts the partitions that were read at its end,
                # so that those not read come first in the next Fetch (rotate_served), as Kafka's broker does.
                remaining = 0
        if entry is not None:
            if plan.incremental and not records and code == NONE and entry.told == values:
                continue
            told.append((entry, values))
        _add(topics, target, PartitionData(
            partition_index=index, error_code=code, high_watermark=end, last_stable_offset=stable,
            log_start_offset=start, aborted_transactions=(aborted or []) if read_committed else None,
            preferred_read_replica=-1, records=records))
    response = kp.FetchResponse(throttle_time_ms=0, error_code=NONE, session_id=plan.session_id, responses=topics)
    return FetchResult(response, total, errors, keys, told, plan.session if plan.incremental else None, served)


def _add(topics: list[Any], target: Target, data: Any) -> None:
    # Consecutive partitions of one topic share its entry.
    topic = target.topic
    # "" for a topic named by id alone (versions 13+, which carry no name).
    name = (topic.name if topic is not None else target.wire_name) or ""
    if topics and topics[-1].topic == name and (topic is not None or topics[-1].topic_id == target.wire_id):
        topics[-1].partitions.append(data)
        return
    topics.append(TopicResponse(topic=name, topic_id=topic.topic_id if topic is not None else target.wire_id,
                                partitions=[data]))


def handle_fetch(request: Request, body: Any) -> None:
    broker = request.broker
    plan = plan_fetch(broker, request.front.fetch_sessions, request.version, body)
    if isinstance(plan, int):
        request.respond(kp.FetchResponse(throttle_time_ms=0, error_code=plan, session_id=0, responses=[]))
        return
    result = run_fetch(request, body, plan)
    if result.total >= body.min_bytes or body.max_wait_ms <= 0 or result.errors or not result.keys:
        result.send(request)
        return
    request.front.fetch_hold.park(request, body, plan, result.keys)


class ParkedFetch:
    __slots__ = ("request", "body", "plan", "keys", "timer", "done")

    def __init__(self, request: Request, body: Any, plan: FetchPlan, keys: list[tuple[str, int]]) -> None:
        self.request = request
        self.body = body
        self.plan = plan
        self.keys = keys
        self.timer: Any = None
        self.done = False


class FetchHold:
    """Fetches waiting for data, by (topic, partition). Lives on the broker's I/O thread."""

    def __init__(self, loop: IOLoop) -> None:
        self.loop = loop
        self._by_key: dict[tuple[str, int], set[ParkedFetch]] = {}
        self._by_conn: dict[int, set[ParkedFetch]] = {}
        self._arrived: set[tuple[str, int]] = set()
        self._wake_scheduled = False

    @property
    def parked(self) -> int:
        return sum(len(fetches) for fetches in self._by_conn.values())

    def park(self, request: Request, body: Any, plan: FetchPlan, keys: list[tuple[str, int]]) -> None:
        parked = ParkedFetch(request, body, plan, keys)
        wait = min(body.max_wait_ms, MAX_WAIT_CAP_MS) / 1000.0
        parked.timer = self.loop.call_later(wait, self._expired, parked)
        for key in keys:
            self._by_key.setdefault(key, set()).add(parked)
        self._by_conn.setdefault(id(request.conn), set()).add(parked)

    def _unpark(self, parked: ParkedFetch) -> None:
        parked.done = True
        if parked.timer is not None:
            parked.timer.cancel()
        for key in parked.keys:
            waiting = self._by_key.get(key)
            if waiting is not None:
                waiting.discard(parked)
                if not waiting:
                    del self._by_key[key]
        waiting = self._by_conn.get(id(parked.request.conn))
        if waiting is not None:
            waiting.discard(parked)
            if not waiting:
                del self._by_conn[id(parked.request.conn)]

    def _expired(self, parked: ParkedFetch) -> None:
        parked.timer = None
        if parked.done:
            return
        self._unpark(parked)
        self._answer(parked)

    def _answer(self, parked: ParkedFetch) -> None:
        if parked.request.conn.closed:
            return
        run_fetch(parked.request, parked.body, parked.plan).send(parked.request)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store's arrival listener: runs in the appending thread, so the work moves to the I/O thread."""
        if self.loop.in_loop_thread():
            if self._by_key:                     # the common case, in a producer's every append: nobody waits
                self._note((topic, queue_id))
        else:
            self.loop.call_soon_threadsafe(self._note, (topic, queue_id))

    def _note(self, key: tuple[str, int]) -> None:
        if key not in self._by_key:
            return
        self._arrived.add(key)
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self.loop.call_soon(self._wake)

    def _wake(self) -> None:
        # One run per parked fetch per loop iteration, however many appends arrived in it.
        self._wake_scheduled = False
        arrived, self._arrived = self._arrived, set()
        candidates: set[ParkedFetch] = set()
        for key in arrived:
            candidates |= self._by_key.get(key, set())
        for parked in candidates:
            if parked.done:
                continue
            if parked.request.conn.closed:
                self._unpark(parked)
                continue
            result = run_fetch(parked.request, parked.body, parked.plan)
            if result.total >= parked.body.min_bytes or result.errors:
                self._unpark(parked)
                result.send(parked.request)

    def connection_lost(self, conn: ServerConnection) -> None:
        for parked in list(self._by_conn.get(id(conn), ())):
            self._unpark(parked)

    def close(self) -> None:
        for fetches in list(self._by_conn.values()):
            for parked in list(fetches):
                self._unpark(parked)


HANDLERS = {ApiKey.FETCH: handle_fetch}
