"""The consumer's fetcher: Fetch requests per leader node, prefetch buffers, offset lookups.

On the I/O loop thread (a poll hook of the client's loop):
- every assigned, positioned, unpaused partition whose buffer has room is fetched from its leader, one
  Fetch in flight per node. The next Fetch to a node leaves as soon as the previous response is handled,
  while the user's thread hands out what is buffered (prefetching, PREFETCH_DEPTH responses per partition);
- the buffers of all partitions together hold about fetch_max_bytes of fetched record sets, whatever the
  number of partitions: each Fetch asks for a share of it (REQUESTS_PER_BUDGET shares), and leaves only
  when that share is free (budget minus what is buffered and what the fetches in flight may still bring).
  So the user hands out one response while the next is fetched and decoded, however many partitions
  there are: one Fetch for the whole budget would have the broker answer 50 MiB at once, every partition
  waiting for it to be received and decoded, and the next leaving only once that was handed out; and a
  Fetch for a sliver of room would cost a round trip for a few records. A broker answers with at least
  one batch however small the request, so the buffers may exceed the budget by one batch per node;
- a loop turn looks only at the partitions with something new (a fetch answered, a buffered fetch handed
  out, a node free again); the whole assignment only after a change of it, of a position or of the metadata
  (see _to_visit), so that a turn costs what changed, not the number of assigned partitions;
- responses are decoded there, by the compiled RecordDecoder (many record sets per call), straight into
  ConsumerRecords, so that poll() only slices lists; as the user hands them out: no more record sets are
  decoded while DECODE_AHEAD_BYTES of them wait decoded (the rest of a response waits as it came). A Fetch
  over thousands of partitions brings a quarter of the budget, 12.5 MiB or 110k records of 100 B, and
  decoded at once those were 40 MB of new objects each time, most of the consumer's page faults at 4096
  partitions;
- a partition's next Fetch does not wait for its record set to be decoded: the set's batch headers say where it
  ends, the next turn sends the Fetch from there, and the set is decoded after that Fetch is written, while the
  broker reads the answer (1 KiB records against Apache Kafka: a Fetch every 1.0-1.2 ms instead of every
  1.5-1.9, decoding a 1 MiB set taking 0.4-0.5 ms). When a set decodes short of where its headers said (a batch
  that cannot be read), what was fetched after it is dropped and the partition waits for each decode until one
  agrees again, so the error reaches the user at its offset; legacy message sets always wait;
- what a turn, a request or a response does per partition (sorting the partitions to visit, marking them in
  flight, matching a response's partitions to what was sent, queueing the decoded fetches) is compiled, in
  fastmq/kafka/_native/fetch_state.pyx with the partition's state: a Fetch lists every fetchable partition of
  its node, so over thousands of partitions that work comes back for a few records each;
- with Fetch v7+ a fetch session (KIP-227) per node: after a full request the broker remembers the
  partitions and offsets, and later requests carry only what changed (and forget what is no longer fetched);
  brokers that create no session (Tansu) get full requests every time;
- partitions waiting for an offset lookup (auto_offset_reset, seek_to_beginning / end) get one ListOffsets
  per node;
- pull-frequency control (TubeMQ's): after a response with no records, the node is not fetched again for
  empty_fetch_backoff_ms;
- partitions that cannot be fetched (no such topic or partition, no leader, an unreachable leader) are
  logged once per reason and listed in `unavailable`; they wait for the next metadata, which the client
  refreshes with a backoff, without waking the loop meanwhile.

On the user's thread: drain() hands out buffered records (dropping those of partitions that were sought,
paused or revoked meanwhile, by their epoch) and list_offsets() looks offsets up for offsets_for_times,
beginning_offsets and end_offsets.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Collection

from fastmq.kafka._native.fetch import RecordDecoder
from fastmq.kafka._native.fetch_state import (
    CompletedFetch, changed_partitions, complete_fetches, end_fetch, sort_response, sort_visits, start_fetch,
    take_touched,
)
from fastmq.errors import ProtocolError
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient, kafka_error
from fastmq.kafka.protocol.schema import ZERO_UUID
from fastmq.kafka.structs import ConsumerRecord, TopicPartition
from fastmq.kafka.subscription import PartitionState, SubscriptionState

_log = logging.getLogger(__name__)

PREFETCH_DEPTH = 2              # completed fetches buffered per partition before it is fetched no more
DECODE_CHUNK_RECORDS = 20000   # records decoded per call of the compiled decoder (one GC run, one GIL hold)
DECODE_AHEAD_BYTES = 4 << 20    # record sets decoded and not handed out yet, at most, before more are decoded
REQUESTS_PER_BUDGET = 4         # a Fetch asks for this share of the buffer budget (fetch_max_bytes)
FETCH_SESSION_MIN_VERSION = 7
TOPIC_ID_MIN_VERSION = 13
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_NEVER = float("inf")
SESSION_ERRORS = (kerrors.FetchSessionIdNotFoundError.errno, kerrors.InvalidFetchSessionEpochError.errno,
                  kerrors.FetchSessionTopicIdError.errno)


@dataclass
class FetchConfig:
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    fetch_max_wait_ms: int = 500
    isolation_level: str = "read_uncommitted"
    check_crcs: bool = True
    enable_incremental_fetch_sessions: bool = True
    retry_backoff_ms: float = 100
    client_rack: str = ""
    empty_fetch_backoff_ms: float = 0          # pull-frequency control: pause a node after an empty response

    @property
    def isolation(self) -> int:
        if self.isolation_level == "read_committed":
            return READ_COMMITTED
        if self.isolation_level == "read_uncommitted":
            return READ_UNCOMMITTED
        raise kerrors.KafkaConfigurationError(
            f"isolation_level must be 'read_uncommitted' or 'read_committed', not {self.isolation_level!r}")


@dataclass
class FetchSession:
    """A node's fetch session (KIP-227), as the client sees it."""

    session_id: int = 0
    epoch: int = 0                              # 0: the next request is full (and asks for a session)
    # What the broker has: tp -> (fetch offset, leader epoch): a partition is sent again when either changed.
    partitions: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self.partitions = {}

    def build(self, wanted: dict[TopicPartition, tuple[int, int]], use_sessions: bool
              ) -> tuple[int, int, list[TopicPartition], list[TopicPartition]]:
        """(session_id, session_epoch, partitions to send, partitions to forget) for the wanted (offset, leader
        epoch) pairs."""
        if not use_sessions:
            return 0, -1, list(wanted), []
        if self.session_id == 0 or self.epoch == 0:
            return self.session_id, 0, list(wanted), []
        send = changed_partitions(wanted, self.partitions)
        forget = [tp for tp in self.partitions if tp not in wanted]
        return self.session_id, self.epoch, send, forget

    def on_response(self, session_id: int, sent_epoch: int, wanted: dict[TopicPartition, tuple[int, int]]) -> None:
        if sent_epoch < 0:
            return
        if sent_epoch == 0:
            # A full request: the broker created a session (non-zero id) or declined to (id 0).
            self.session_id = session_id
            self.epoch = 1 if session_id else 0
        else:
            self.epoch = self.epoch + 1 if self.epoch < 0x7FFFFFFF else 1
        self.partitions = dict(wanted) if self.session_id else {}


class Fetcher:
    """Fetching for one consumer; see the module docstring for which thread does what."""

    def __init__(self, client: KafkaClient, subscriptions: SubscriptionState, config: FetchConfig,
                 decoder: RecordDecoder, wakeup: threading.Condition) -> None:
        self.client = client
        self.subscriptions = subscriptions
        self.config = config
        self.decoder = decoder
        self.isolation = config.isolation
        self.wakeup = wakeup
        self.completed: deque[CompletedFetch] = deque()
        self.errors: deque[BaseException] = deque()     # fetch-level errors for the user (loop appends)
        self._current: CompletedFetch | None = None     # user thread: the fetch being handed out
        self._sessions: dict[Any, FetchSession] = {}
        self._fetching_nodes: set[Any] = set()
        self._node_retry_at: dict[Any, float] = {}
        self._resetting_nodes: set[Any] = set()
        self._topic_names: dict[Any, str] = {}
        self._topic_names_version = -1
        self._closed = False
        # Which partitions a loop turn looks at (loop thread, but _touched, which drain() appends to):
        self._seen_changes = -1                             # subscriptions.changes at the last full scan
        self._seen_version = -1                             # the metadata version then
        self._rescan = True                                 # the next turn looks at every partition
        self._retry_due = _NEVER                            # the earliest retry_at of a partition in a backoff
        self._touched: deque[PartitionState] = deque()      # fetch answered or buffered fetch handed out
        self._leaderless: list[PartitionState] = []         # looked at every turn until the metadata has them
        self._parked: dict[Any, set[PartitionState]] = {}  # node -> fetchable partitions waiting for it
        self._parked_resets: dict[Any, set[PartitionState]] = {}
        # The buffer budget: bytes of record sets buffered = bytes_buffered - bytes_released, each counter with
        # one writer (the loop thread adds, the user's thread releases); _reserved is what the fetches in
        # flight may still bring (loop thread).
        self.bytes_buffered = 0
        self.bytes_released = 0
        # Responses' record sets not decoded yet, in order: [decode_many()'s parts, their targets, next index].
        self._undecoded: deque[list[Any]] = deque()
        self._undecoded_bytes = 0
        self.max_bytes_buffered = 0     # the most ever buffered at once, for metrics and tests
        self.request_bytes = max(config.fetch_max_bytes // REQUESTS_PER_BUDGET, 1)   # a Fetch's max_bytes
        self._reserved: dict[Any, int] = {}
        # Partitions that cannot be fetched now -> why; replaced whole by the loop thread, read by any.
        self.unavailable: dict[TopicPartition, str] = {}
        # Counters for metrics and tests.
        self.fetch_requests = 0
        self.partitions_requested = 0   # partitions listed in Fetch requests (incremental ones list only changes)
        self.records_fetched = 0
        self.partitions_visited = 0     # partitions looked at by loop turns (what a turn costs)
        self._decode_scheduled = False  # a loop callback will decode the waiting record sets
        client.loop.add_poll_hook(self._maintain)

    # ---- the loop thread: sending -----------------------------------------------------------------------

    def _maintain(self) -> float | None:
        if self._closed:
            return None
        if self._undecoded and not self._decode_scheduled:
            # Record sets wait (a response came, or drain() woke the loop: the user handed records out). They are
            # decoded at the end of this turn, after the Fetches it sends have been written: the broker reads the
            # next answer meanwhile (sort_response lets a partition be fetched again before its set is decoded).
            self._decode_scheduled = True
            self.client.loop.call_soon(self._decode_ahead)
        assignment = self.subscriptions.assignment
        if not assignment:
            self.unavailable = {}
            return None
        now = time.monotonic()
        wait: float | None = None
        cluster = self.client.cluster
        room = self.config.fetch_max_bytes - self.buffered_bytes() - sum(self._reserved.values())
        unavailable: dict[TopicPartition, str] = {}
        visit, wait = self._to_visit(assignment, now, room, wait, unavailable)
        self.partitions_visited += len(visit)
        with self.subscriptions.lock:
            fetches, resets, leaderless, retry_due = sort_visits(visit, assignment, now, cluster, PREFETCH_DEPTH)
        self._retry_due = min(self._retry_due, retry_due)
        self._leaderless = leaderless
        if leaderless:
            self._no_leader([state.tp for state in leaderless], unavailable)
        for node, lookups in resets.items():
            if node not in self._resetting_nodes and self.client.ready(node):
                self._send_reset(node, lookups)
            else:
                self._parked_resets.setdefault(node, set()).update(state for state, _ in lookups)
        for node, items in fetches.items():
            if room >= self.request_bytes and self._node_can_fetch(node, now):
                room -= self._send_fetch(node, items, room)
            else:
                self._parked.setdefault(node, set()).update(state for state, _, _ in items)
        if self._retry_due != _NEVER:
            wait = _earlier(wait, max(self._retry_due - now, 0.0))
        self._note_unavailable(assignment, unavailable, [*fetches, *resets])
        return wait

    def _to_visit(self, assignment: dict[TopicPartition, PartitionState], now: float, room: int,
                  wait: float | None, unavailable: dict[TopicPartition, str]
                  ) -> tuple[Collection[PartitionState], float | None]:
        """(the partitions that may have something to do, the wait so far). All of them after a change of the
        subscription state (seek, reset, pause, assignment), of the metadata, after an offset lookup's answer
        or when a retry backoff ends; else only those whose fetch came back or whose buffered fetch was handed
        out since (`_touched`), those without a leader, and those parked behind a node that can take a
        request now. So a loop turn costs what changed, not the number of assigned partitions."""
        changes, version = self.subscriptions.changes, self.client.cluster.version
        if (self._rescan or changes != self._seen_changes or version != self._seen_version
                or now >= self._retry_due):
            self._rescan = False
            self._seen_changes, self._seen_version = changes, version
            self._retry_due = _NEVER
            self._parked.clear()
            self._parked_resets.clear()
            self._touched.clear()       # drain() appends after changing the state: the scan below sees it
            return list(assignment.values()), wait
        # Partitions parked behind a node come first: the budget goes to nodes in the order of their partitions,
        # and a node whose answer came back (touched) must not take, turn after turn, the room that a node refused
        # for want of it waits for (a held Fetch of an empty partition comes back every fetch_max_wait_ms).
        visit: dict[PartitionState, None] = {}
        for node in list(self._parked):
            if room >= self.request_bytes and self._node_can_fetch(node, now):
                visit.update(dict.fromkeys(self._parked.pop(node)))
            elif node not in self._fetching_nodes:
                wait = self._blocked_wait(node, now, wait, self._parked[node], unavailable)
        visit.update(dict.fromkeys(self._leaderless))
        take_touched(self._touched, visit)
        for node in list(self._parked_resets):
            if node not in self._resetting_nodes and self.client.ready(node):
                visit.update(dict.fromkeys(self._parked_resets.pop(node)))
            elif node not in self._resetting_nodes:
                wait = self._blocked_wait(node, now, wait, self._parked_resets[node], unavailable)
        return visit, wait

    def _node_can_fetch(self, node: Any, now: float) -> bool:
        return (node not in self._fetching_nodes and now >= self._node_retry_at.get(node, 0.0)
                and self.client.ready(node))

    def _blocked_wait(self, node: Any, now: float, wait: float | None, parked: set[PartitionState],
                      unavailable: dict[TopicPartition, str]) -> float | None:
        """The wait for a node that cannot take a request now (a backoff after an error or an empty answer,
        or no connection yet)."""
        retry_at = self._node_retry_at.get(node, 0.0)
        if now < retry_at:
            return _earlier(wait, retry_at - now)
        if self.client.ready(node):
            return wait                     # only the buffers are full: drain() wakes the loop
        return self._reconnect_wait(node, wait, [state.tp for state in parked], unavailable)

    def _reconnect_wait(self, node: Any, wait: float | None, partitions: list[TopicPartition],
                        unavailable: dict[TopicPartition, str]) -> float | None:
        if self.client.is_failing(node):
            why = f"its leader, broker {node}, is unreachable ({self.client.pool.last_error(node)})"
            for tp in partitions:
                unavailable[tp] = why
        # While connecting, the connection's events wake the loop; in a reconnect backoff nothing would:
        # come back when it ends.
        delay = self.client.connection_delay(node)
        return wait if delay == float("inf") else _earlier(wait, max(delay, 0.001))

    def _no_leader(self, partitions: list[TopicPartition], unavailable: dict[TopicPartition, str]) -> None:
        """Partitions without a known leader wait for metadata (a metadata update wakes the loop); says why
        in `unavailable` once the metadata or the connection errors tell. One metadata request and one look
        at the connections for all of them: a consumer of thousands of partitions starts with none known."""
        more = f" and {len(partitions) - 1} more" if len(partitions) > 1 else ""
        self.client.request_update(f"no leader known for {partitions[0]}{more}")
        cluster = self.client.cluster
        if cluster.version == 0:
            trouble = self.client.connection_trouble()
            if trouble:
                for tp in partitions:
                    unavailable[tp] = f"no broker answered yet{trouble}"
            return
        for tp in partitions:
            info = cluster.topics.get(tp.topic)
            if info is None:
                code = cluster.topic_errors.get(tp.topic)
                if code:
                    unavailable[tp] = f"topic {tp.topic!r} is {kerrors.for_code(code).message}"
            elif tp.partition >= len(info.partitions):
                unavailable[tp] = f"topic {tp.topic!r} has {len(info.partitions)} partitions"
            else:
                unavailable[tp] = "the partition has no leader"

    def _note_unavailable(self, assignment: dict[TopicPartition, PartitionState],
                          found: dict[TopicPartition, str], leaders: list[Any]) -> None:
        """Log and publish what changed: partitions found unavailable now, and those that were but whose
        leader is known and reachable now (partitions not looked at this time keep their entry)."""
        cluster = self.client.cluster
        unavailable = dict(found)
        for tp, why in self.unavailable.items():
            leader = cluster.leader_for(tp)
            if tp in assignment and tp not in found and (leader not in leaders or self.client.is_failing(leader)):
                unavailable[tp] = why
        if unavailable == self.unavailable:
            return
        for tp, why in unavailable.items():
            if self.unavailable.get(tp) != why:
                _log.warning("%s-%d cannot be fetched: %s", tp.topic, tp.partition, why)
        for tp in self.unavailable.keys() - unavailable.keys():
            _log.info("%s-%d can be fetched again", tp.topic, tp.partition)
        self.unavailable = unavailable

    def _topic_ids(self) -> None:
        cluster = self.client.cluster
        if self._topic_names_version != cluster.version:
            self._topic_names = {info.topic_id: name for name, info in cluster.topics.items()
                                 if info.topic_id is not None}
            self._topic_names_version = cluster.version

    def _send_fetch(self, node: Any, items: list[tuple[PartitionState, int, int]], room: int) -> int:
        """Sends a Fetch that may bring up to `room` bytes; returns the bytes it reserved."""
        config = self.config
        max_bytes = min(room, self.request_bytes)
        version = self.client.api_version(node, kp.ApiKey.FETCH)
        session = self._sessions.setdefault(node, FetchSession())
        cluster = self.client.cluster
        # The leader epoch the metadata names goes with each partition (KIP-320): a leader that moved on since
        # answers FENCED_LEADER_EPOCH (the metadata is stale: refreshed, then fetched again) instead of serving
        # from a log that a newer leader may have truncated.
        wanted, sent = start_fetch(items, cluster)
        use_sessions = config.enable_incremental_fetch_sessions and version >= FETCH_SESSION_MIN_VERSION
        session_id, session_epoch, send, forget = session.build(wanted, use_sessions)
        F = kp.FetchRequest
        topics: dict[str, list[Any]] = {}
        for tp in send:
            fetch_offset, leader_epoch = wanted[tp]
            topics.setdefault(tp.topic, []).append(F.FetchPartition(
                partition=tp.partition, current_leader_epoch=leader_epoch, fetch_offset=fetch_offset,
                partition_max_bytes=config.max_partition_fetch_bytes))
        forgotten: dict[str, list[int]] = {}
        for tp in forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)

        def topic_id(name: str) -> Any:
            info = cluster.topics.get(name)
            return info.topic_id if info is not None and info.topic_id is not None else ZERO_UUID

        request = F(
            max_wait_ms=config.fetch_max_wait_ms, min_bytes=min(config.fetch_min_bytes, max_bytes), max_bytes=max_bytes,
            isolation_level=self.isolation, session_id=session_id, session_epoch=session_epoch,
            topics=[F.FetchTopic(topic=name, topic_id=topic_id(name), partitions=parts) for name, parts in topics.items()],
            forgotten_topics_data=[F.ForgottenTopic(topic=name, topic_id=topic_id(name), partitions=parts)
                                   for name, parts in forgotten.items()],
            rack_id=config.client_rack)
        self._fetching_nodes.add(node)
        self._reserved[node] = max_bytes
        # The broker may hold the request for max_wait_ms before answering: allow for that on top.
        timeout = self.client.config.request_timeout_ms / 1000.0 + config.fetch_max_wait_ms / 1000.0
        try:
            self.client.send(node, request, lambda response, error: self._on_fetch(
                node, version, session, session_epoch, wanted, sent, response, error), timeout=timeout)
        except Exception as exc:
            self._fetch_done(node, sent)
            session.reset()
            _log.debug("fetch to node %r not sent: %s", node, exc)
            return 0
        self.fetch_requests += 1
        self.partitions_requested += len(send)
        return max_bytes

    def _fetch_done(self, node: Any, sent: dict[TopicPartition, tuple[PartitionState, int, int]]) -> None:
        self._fetching_nodes.discard(node)
        self._reserved.pop(node, None)
        end_fetch(sent, self._touched)

    # ---- the loop thread: responses ----------------------------------------------------------------------

    def _on_fetch(self, node: Any, version: int, session: FetchSession, session_epoch: int,
                  wanted: dict[TopicPartition, tuple[int, int]], sent: dict[TopicPartition, tuple[PartitionState, int, int]],
                  response: Any, error: BaseException | None) -> None:
        self._fetch_done(node, sent)
        now = time.monotonic()
        backoff = self.config.retry_backoff_ms / 1000.0
        if self._closed:
            return
        if error is not None:
            session.reset()
            self._node_retry_at[node] = now + backoff
            if isinstance(error, ProtocolError) and not isinstance(error, kerrors.KafkaError):
                # A response that cannot be read (the connection is closed already): tell the user once per
                # response; fetching goes on over a new connection.
                self.errors.append(kerrors.KafkaProtocolError(
                    f"a fetch response from node {node} could not be read: {error}"))
                with self.wakeup:
                    self.wakeup.notify_all()
            elif isinstance(error, kerrors.KafkaError) and error.invalid_metadata:
                self.client.request_update()
            _log.debug("fetch from node %r failed: %s", node, error)
            return
        if response.error_code:
            session.reset()
            self._node_retry_at[node] = now + backoff
            if response.error_code not in SESSION_ERRORS:
                _log.warning("fetch from node %r failed: %s", node, kerrors.for_code(response.error_code).__name__)
            return
        session.on_response(response.session_id, session_epoch, wanted)
        if version >= TOPIC_ID_MIN_VERSION:
            self._topic_ids()
        completed = 0
        parts, targets, errors, unlearned, nbytes = sort_response(
            response.responses, version >= TOPIC_ID_MIN_VERSION, self._topic_names, sent,
            self.subscriptions.assignment)
        for state, epoch, fetch_offset, code in errors:
            completed += self._partition_error(state, epoch, fetch_offset, code, now)
        if parts:                                   # decoded at the end of the next turn (see _maintain)
            self._undecoded.append([parts, targets, 0])
            self._undecoded_bytes += nbytes
        if session.session_id and unlearned:
            # An incremental answer leaves out partitions without news, but this one's high watermark was
            # never learned (its first answer was an error, e.g. an offset out of range, then reset): ask
            # in full next time, which answers every partition, so that "at the end" becomes known.
            session.reset()
        if not parts and self.config.empty_fetch_backoff_ms > 0:
            self._node_retry_at[node] = now + self.config.empty_fetch_backoff_ms / 1000.0
        buffered = self.buffered_bytes()
        if buffered > self.max_bytes_buffered:
            self.max_bytes_buffered = buffered
        if completed:
            with self.wakeup:
                self.wakeup.notify_all()

    def _decode_ahead(self) -> None:
        """Loop callback (see _maintain): decodes waiting record sets, DECODE_CHUNK_RECORDS records per call of the
        decoder (which lets the collector run once per call, not once per 700 records), while less than
        DECODE_AHEAD_BYTES of them wait decoded, and wakes the user for what it queued."""
        self._decode_scheduled = False
        if self._closed:
            return
        retry_at = time.monotonic() + self.config.retry_backoff_ms / 1000.0
        while self._undecoded and self.bytes_buffered - self.bytes_released < DECODE_AHEAD_BYTES:
            pending = self._undecoded[0]
            parts, targets, index = pending
            results, end = self.decoder.decode_many(parts, index, DECODE_CHUNK_RECORDS)
            queued, records, nbytes, decoded_bytes, disagreed = complete_fetches(
                targets, index, results, self.completed, self._touched, retry_at)
            if disagreed:
                self._refetch(disagreed)
            self.records_fetched += records
            self.bytes_buffered += nbytes
            self._undecoded_bytes -= decoded_bytes
            if end < len(parts):
                pending[2] = end
            else:
                self._undecoded.popleft()
            if queued:
                with self.wakeup:                   # the user may hand these out meanwhile
                    self.wakeup.notify_all()

    def _refetch(self, disagreed: list[tuple[PartitionState, int]]) -> None:
        """Partitions whose record set did not decode to where its batch headers said it ends (a batch that cannot be
        read): the fetches that left from there bring what does not follow. Everything fetched for them is stale,
        and they are fetched again from the user's position, waiting for each decode (scan_ahead is off), so that
        the error reaches the user where it is."""
        with self.subscriptions.lock:
            for state, epoch in disagreed:
                if state.epoch == epoch:
                    state.epoch += 1
                    self.subscriptions.changes += 1

    def _partition_error(self, state: PartitionState, epoch: int, fetch_offset: int, code: int, now: float) -> int:
        """Handle a partition's error code; returns 1 when an error was queued for the user."""
        error_class = kerrors.for_code(code)
        backoff = self.config.retry_backoff_ms / 1000.0
        if error_class is kerrors.OffsetOutOfRangeError:
            if self.subscriptions.default_reset is not None:
                _log.info("fetch offset %d of %s is out of range; resetting", fetch_offset, state.tp)
                with self.subscriptions.lock:
                    if state.epoch == epoch:
                        state.position = None
                        state.reset_to = self.subscriptions.default_reset
                        state.epoch += 1
                        self.subscriptions.changes += 1
                return 0
            error: BaseException = kerrors.OffsetOutOfRangeError(
                f"fetch offset {fetch_offset} of {state.tp} is out of range and auto_offset_reset is 'none'",
                {state.tp: fetch_offset})
        elif error_class.invalid_metadata or error_class.retriable:
            _log.debug("fetch of %s: %s; refreshing metadata", state.tp, error_class.__name__)
            self.client.request_update()
            state.retry_at = now + backoff
            return 0
        else:
            error = error_class(f"fetch of {state.tp} at offset {fetch_offset}")
        state.retry_at = now + backoff
        self.completed.append(CompletedFetch(state, epoch, fetch_offset, [], fetch_offset, error))
        state.queued += 1
        return 1

    # ---- the loop thread: offset resets ------------------------------------------------------------------

    def _send_reset(self, node: Any, items: list[tuple[PartitionState, int]]) -> None:
        L = kp.ListOffsetsRequest
        cluster = self.client.cluster
        topics: dict[str, list[Any]] = {}
        for state, epoch in items:
            assert state.reset_to is not None   # only partitions awaiting a reset are sent one
            state.reset_epoch = epoch
            topics.setdefault(state.tp.topic, []).append(L.ListOffsetsPartition(
                partition_index=state.tp.partition, current_leader_epoch=cluster.leader_epoch_for(state.tp),
                timestamp=state.reset_to))
        request = L(replica_id=-1, isolation_level=self.isolation,
                    topics=[L.ListOffsetsTopic(name=name, partitions=parts) for name, parts in topics.items()])
        pending = {state.tp: (state, epoch) for state, epoch in items}
        self._resetting_nodes.add(node)
        try:
            self.client.send(node, request, lambda response, error: self._on_reset(node, pending, response, error))
        except Exception as exc:
            self._on_reset(node, pending, None, exc)

    def _on_reset(self, node: Any, pending: dict[TopicPartition, tuple[PartitionState, int]], response: Any,
                  error: BaseException | None) -> None:
        self._resetting_nodes.discard(node)
        self._rescan = True                     # lookups are rare: look at every partition after one
        now = time.monotonic()
        backoff = self.config.retry_backoff_ms / 1000.0
        done = False
        if error is None:
            for topic in response.topics:
                for part in topic.partitions:
                    entry = pending.pop(TopicPartition(topic.name, part.partition_index), None)
                    if entry is None:
                        continue
                    state, epoch = entry
                    state.reset_epoch = -1
                    if part.error_code:
                        error_class = kerrors.for_code(part.error_code)
                        if error_class.invalid_metadata:
                            self.client.request_update()
                        _log.debug("offset lookup of %s failed: %s", state.tp, error_class.__name__)
                        state.retry_at = now + backoff
                        continue
                    offset = part.old_style_offsets[0] if part.old_style_offsets else part.offset
                    if self.subscriptions.complete_reset(state, epoch, offset, part.leader_epoch):
                        done = True
        else:
            _log.debug("offset lookup on node %r failed: %s", node, error)
        for state, _ in pending.values():               # not answered: try again after a backoff
            state.reset_epoch = -1
            state.retry_at = now + backoff
        if done:
            with self.wakeup:
                self.wakeup.notify_all()

    # ---- the user's thread --------------------------------------------------------------------------------

    def buffered_bytes(self) -> int:
        """Bytes of fetched record sets waiting in the buffers, decoded or not (any thread; a moment's snapshot)."""
        return self.bytes_buffered - self.bytes_released + self._undecoded_bytes

    def has_buffered(self) -> bool:
        return self._current is not None or bool(self.completed) or bool(self.errors)

    def drain(self, max_records: int, result: dict[TopicPartition, list[Any]],
              max_bytes: float = float("inf")) -> tuple[int, float]:
        """Move up to max_records buffered records (and about max_bytes of them) into result, appending per
        partition; returns (records, estimated bytes). Raises the error of a failed partition fetch when it is
        next in line and nothing was handed out yet; the position then stays where the error is."""
        if self.errors:
            raise self.errors.popleft()
        taken = 0
        nbytes = 0.0
        assignment = self.subscriptions.assignment
        freed = False
        while taken < max_records:
            completed = self._current
            if completed is None:
                if not self.completed:
                    break
                completed = self._current = self.completed.popleft()
            state = completed.state
            if (assignment.get(state.tp) is not state or state.epoch != completed.epoch
                    or state.position != completed.position or state.paused):
                self._finish(completed)
                freed = True
                continue
            records = completed.records
            if completed.index < len(records):
                start = completed.index
                want = max_records - taken
                if completed.bytes_per_record and max_bytes != float("inf"):
                    want = min(want, max(1 if not taken else 0, int((max_bytes - nbytes) / completed.bytes_per_record)))
                    if want <= 0:
                        break
                end = min(len(records), start + want)
                chunk = records if start == 0 and end == len(records) else records[start:end]
                taken += end - start
                nbytes += (end - start) * completed.bytes_per_record
                completed.index = end
                last = chunk[-1]
                completed.position = state.position = last.offset + 1
                state.leader_epoch = last.leader_epoch
                existing = result.get(state.tp)
                if existing is None:
                    result[state.tp] = chunk
                else:
                    existing.extend(chunk)
                if completed.index < len(records):
                    break
            if completed.error is not None:
                if taken:
                    break                           # hand out the good records first; raise next time
                self._finish(completed)
                state.position = completed.next_offset
                raise completed.error
            if completed.next_offset > state.position:
                state.position = completed.next_offset
            self._finish(completed)
            freed = True
        if freed:
            self.client.loop.wakeup()               # buffers have room: the loop may fetch again
        return taken, nbytes

    def _finish(self, completed: CompletedFetch) -> None:
        self._current = None
        self.bytes_released += completed.size
        completed.state.drained += 1
        self._touched.append(completed.state)       # after the change: the loop may fetch it again

    # ---- offset lookups (user's thread) ------------------------------------------------------------------

    def list_offsets(self, timestamps: dict[TopicPartition, int], timeout: float) -> dict[TopicPartition, tuple[Any, ...]]:
        """tp -> (offset, timestamp, leader_epoch) for ListOffsets timestamps (EARLIEST, LATEST or a time in
        ms); offset -1 when the partition has no record at or after that time. Retries while within timeout."""
        deadline = time.monotonic() + timeout
        remaining = dict(timestamps)
        results: dict[TopicPartition, tuple[Any, ...]] = {}
        last_error: BaseException | None = None
        attempts = 0

        def timed_out() -> kerrors.KafkaTimeoutError:
            return kerrors.KafkaTimeoutError(
                f"offset lookup of {sorted(remaining)} did not finish within {timeout:.1f} s"
                + (f" (last error: {last_error})" if last_error else ""))

        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out()
            attempts += 1
            by_node: dict[Any, dict[TopicPartition, int]] = {}
            for tp, ts in remaining.items():
                info = self.client.topic_metadata(tp.topic, left)
                if tp.partition >= len(info.partitions):
                    raise kerrors.UnknownTopicOrPartitionError(f"{tp}: the topic has {len(info.partitions)} partitions")
                leader = info.partitions[tp.partition].leader
                if leader < 0:
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            L = kp.ListOffsetsRequest
            futures = []
            for node, wanted in by_node.items():
                topics: dict[str, list[Any]] = {}
                for tp, ts in wanted.items():
                    topics.setdefault(tp.topic, []).append(L.ListOffsetsPartition(
                        partition_index=tp.partition, timestamp=ts))
                request = L(replica_id=-1, isolation_level=self.isolation,
                            topics=[L.ListOffsetsTopic(name=n, partitions=p) for n, p in topics.items()])
                futures.append(self.client.call(node, request, timeout=max(0.001, deadline - time.monotonic())))
            retry = False
            for future in futures:
                try:
                    response = future.result(max(0.001, deadline - time.monotonic()) + 1.0)
                except Exception as exc:
                    last_error = kafka_error(exc)
                    retry = True
                    continue
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        if tp not in remaining:
                            continue
                        if part.error_code:
                            error_class = kerrors.for_code(part.error_code)
                            if error_class.retriable or error_class.invalid_metadata:
                                last_error = error_class(f"offset lookup of {tp}")
                                retry = True
                                continue
                            raise error_class(f"offset lookup of {tp}")
                        offset = part.old_style_offsets[0] if part.old_style_offsets else part.offset
                        results[tp] = (offset, part.timestamp, part.leader_epoch)
                        del remaining[tp]
            if remaining and (retry or not futures):
                self.client.request_update("an offset lookup failed")
                delay = self.client.retry.next_delay(
                    last_error or kerrors.LeaderNotAvailableError("no leader"), attempts, time.monotonic(), deadline)
                if delay is None:
                    raise timed_out()
                time.sleep(delay)
        return results

    def close(self) -> None:
        self._closed = True
        self.client.loop.remove_poll_hook(self._maintain)
        self.completed.clear()
        self._current = None
        self.bytes_released = self.bytes_buffered
        self._undecoded.clear()
        self._undecoded_bytes = 0


def _earlier(current: float | None, candidate: float) -> float:
    return candidate if current is None or candidate < current else current


def make_decoder(*, check_crcs: bool, read_committed: bool, key_deserializer: Callable[..., Any] | None,
                 value_deserializer: Callable[..., Any] | None, with_context: bool = False,
                 deserialize_null: bool = False, tuple_headers: bool = True) -> RecordDecoder:
    return RecordDecoder(ConsumerRecord, check_crcs=check_crcs, read_committed=read_committed,
                         key_deserializer=key_deserializer, value_deserializer=value_deserializer,
                         with_context=with_context, deserialize_null=deserialize_null, tuple_headers=tuple_headers)
