"""The producer's sender: runs on the client's I/O loop thread as a poll hook.

Each iteration: make sure an idempotent producer has its producer id; fail batches past delivery_timeout;
ask the accumulator which leaders have ready batches; for every leader that can take a request, drain one
batch per partition into a ProduceRequest and send it, again while that sends something (up to max in-flight);
return how long the loop may sleep (the next linger or backoff expiry). Responses come back on the same thread:
batches are completed, retried (keeping their sequence numbers, so the broker drops duplicates), split when too
large, or failed. When the broker has forgotten an idempotent producer (UNKNOWN_PRODUCER_ID), the sender waits
for what is in flight, takes a new producer id and sends everything unacknowledged again, in order, under it.

A broker that keeps failing is avoided for a while by records without key or partition (TubeMQ's "bad
node blocking"): its partitions leave the sticky partitioner's choice until the penalty expires; records
with a key or an explicit partition still go where they must.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from fastmq.client import NodeHealth
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka._native.produce import ProduceBatches
from fastmq.kafka.client import KafkaClient

_log = logging.getLogger(__name__)

# Batches from this size on go out from where they are (one more part of the vectored write); smaller ones are copied
# into the request. A batch is sent long after its records were written, out of the cache, and copying it into a
# fresh request buffer cost a pass over it (and that buffer's page faults) on top of the kernel's own copy: over
# 1024 partitions a batch holds what came between two requests, ~20 KiB, below SPLICE_MIN's 32 KiB. Measured
# (cold 20 KB batches, 37 a request, to a loopback socket, loaded machine): 158 against 210 us of CPU a request.
PAYLOAD_SPLICE_MIN = 4096
_TOO_LARGE_CODES = (kerrors.MessageSizeTooLargeError.errno, kerrors.RecordListTooLargeError.errno)
_NO_RESULTS: dict[int, Any] = {}


@dataclass
class SenderMetrics:
    """Counters the producer reports through metrics()."""

    started: float = field(default_factory=time.monotonic)
    requests: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0                    # sent batch bytes (after compression)
    retries: int = 0                  # batch retries
    errors: int = 0                   # records that failed
    latency_total: float = 0.0        # seconds, over responses
    latency_max: float = 0.0
    responses: int = 0


class Sender:
    """Moves batches from the accumulator to the brokers (see the module docstring)."""

    def __init__(self, client: KafkaClient, accumulator: Any, *, acks: int, max_request_size: int,
                 request_timeout_ms: float, retries: float, idempotent: bool, retry_backoff_ms: float,
                 transaction_timeout_ms: int = 60000, node_health: NodeHealth[int] | None = None,
                 transactions: Any = None) -> None:
        self.client = client
        self.accumulator = accumulator
        self.acks = acks
        self.max_request_size = max_request_size
        self.request_timeout_ms = int(request_timeout_ms)
        self.retries = retries
        self.idempotent = idempotent
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.transaction_timeout_ms = transaction_timeout_ms
        self.health = node_health if node_health is not None else NodeHealth()
        self.transactions = transactions     # a TransactionManager for transactional producers
        self.metrics = SenderMetrics()
        self._metadata_version = -1
        self._avoided: set[int] = set()
        self._producer_id_pending = False
        self._producer_id_retry_at = 0.0
        self._producer_id_lost = False   # UNKNOWN_PRODUCER_ID: get a new id once nothing is in flight
        self._fatal: BaseException | None = None
        self._topic_names: dict[bytes, str] = {}   # topic id (16 bytes) -> name, for answers naming topics by id
        self.closing = False            # set by the producer's close(): failures end batches, not retry them

    # ---- the poll hook ------------------------------------------------------------------------------

    def poll(self) -> float | None:
        now = time.monotonic()
        try:
            return self._poll(now)
        except Exception:  # never let one bad batch stop the loop: log and look again shortly
            _log.exception("producer sender iteration failed")
            return 0.1

    def _poll(self, now: float) -> float | None:
        acc = self.accumulator
        self._apply_metadata(now)
        if self._producer_id_lost:
            if acc.has_in_flight():
                return None         # their responses wake the loop
            acc.reset_producer_id()
            self._producer_id_lost = False
        if self.idempotent and acc.producer_identity[0] < 0:
            if self.transactions is not None:
                return None         # init_transactions() brings the producer id
            return self._ensure_producer_id(now)
        acc.expire(now)
        while True:
            if self._every_broker_full():
                return None         # an answer frees a slot, and the loop runs this hook again
            # Rounds until nothing more goes out: a partition with several full batches sends one a request, and
            # the next round's requests join this one's in the iteration's single write. The loop's next
            # iteration comes after a system call, and the GIL back after it only once a busy user thread lets go.
            nodes, next_check, unknown = acc.ready(now)
            if unknown:
                self.client.add_topics(unknown)
                self.client.request_update()
            sleep: float | None = next_check
            sent = False
            for node_id, queues in nodes.items():
                if self.transactions is not None:
                    # A partition's batches wait until it has joined the transaction.
                    queues = [q for q in queues if self.transactions.may_send(q.topic_partition)]
                    if not queues:
                        continue
                if not self.client.ready(node_id):
                    delay = self.client.connection_delay(node_id)
                    if delay != float("inf"):
                        sleep = delay if sleep is None else min(sleep, delay)
                    continue
                batches = acc.drain(queues, self.max_request_size, now)
                if batches:
                    self._send_produce(node_id, batches, now)
                    sent = True
            if not sent:
                return sleep

    def _every_broker_full(self) -> bool:
        """Whether every broker's connection is up with its max of requests in flight: then nothing can be sent,
        and ready() is not asked. It visits every partition that could send, and those stay so until sent: over
        thousands of partitions (1000 topics x 4), visiting them again at each turn of the loop while the
        connections were full took a quarter of the I/O thread."""
        brokers = self.client.cluster.brokers
        if not brokers:
            return False
        pool = self.client.pool
        for node_id in brokers:
            conn = pool.connection(node_id)
            if conn is None or conn.can_send():
                return False
        return True

    def _apply_metadata(self, now: float) -> None:
        """Hand the leaders from fresh metadata (and the avoided brokers) to the accumulator."""
        avoided = self.health.avoided(now)
        cluster = self.client.cluster
        if cluster.version == self._metadata_version and avoided == self._avoided:
            return
        self._metadata_version = cluster.version
        self._avoided = avoided
        for name, info in cluster.topics.items():
            self.accumulator.update_topic(name, info.leaders, avoided)
            if info.topic_id is not None:
                self._topic_names[info.topic_id.bytes] = name

    # ---- producer id (idempotence) ---------------------------------------------------------------------

    def _ensure_producer_id(self, now: float) -> float | None:
        if self._producer_id_pending or now < self._producer_id_retry_at:
            return max(0.0, self._producer_id_retry_at - now) if not self._producer_id_pending else None
        node_id = self.client.least_loaded_node()
        if node_id is None or not self.client.ready(node_id):
            return 0.05
        request = kp.InitProducerIdRequest(transactional_id=None,
                                           transaction_timeout_ms=self.transaction_timeout_ms)
        self._producer_id_pending = True

        def done(response: Any, error: BaseException | None) -> None:
            self._producer_id_pending = False
            if error is None and response.error_code:
                error = kerrors.for_code(response.error_code)("InitProducerId failed")
            if error is not None:
                _log.warning("InitProducerId failed (%s); retrying", error)
                self._producer_id_retry_at = time.monotonic() + self.retry_backoff
                if not getattr(error, "retriable", False) and isinstance(error, kerrors.BrokerResponseError):
                    self._fail_everything(error)
                return
            self.accumulator.set_producer_id(response.producer_id, response.producer_epoch)
            _log.debug("producer id %d epoch %d", response.producer_id, response.producer_epoch)

        try:
            self.client.send(node_id, request, done)
        except kerrors.KafkaError as exc:
            self._producer_id_pending = False
            self._producer_id_retry_at = now + self.retry_backoff
            _log.debug("InitProducerId not sent: %s", exc)
        return None

    def _fail_everything(self, error: BaseException) -> None:
        self._fatal = error
        self.accumulator.abort(error)

    # ---- produce requests ---------------------------------------------------------------------------------

    def _send_produce(self, node_id: int, batches: list[Any], now: float) -> None:
        # A request to a broker leading thousands of partitions carries a batch for each: it is written and its
        # answer read by compiled code (fastmq/kafka/_native/produce.pyx), with no Python object per batch.
        sent = ProduceBatches(batches)
        # Brokers authorize transactional records by the request's transactional id (and refuse them without).
        transactional_id = self.transactions.transactional_id if self.transactions is not None else None
        topics = self.client.cluster.topics
        metrics = self.metrics
        metrics.requests += 1
        metrics.batches += len(batches)
        metrics.records += sent.records
        metrics.bytes += sent.payload_bytes

        def encode(version: int, correlation_id: int, client_id: str | None) -> Any:
            # Batches are referenced, not copied (PAYLOAD_SPLICE_MIN): they stay unchanged until completed.
            return sent.encode(kp.WriteBuffer(splice_min=PAYLOAD_SPLICE_MIN), version, correlation_id, client_id,
                               transactional_id, self.acks, self.request_timeout_ms, topics)

        def decode(version: int, frame: Any) -> Any:
            # The generic decode, for the error path's details, only when some partition answered an error.
            if sent.read_response(frame, version, self._topic_names):
                return kp.decode_response(kp.ApiKey.PRODUCE, version, frame)[1]
            return None

        def done(response: Any, error: BaseException | None) -> None:
            self._on_produce_response(node_id, sent, response, error, now)

        try:
            self.client.send_with(node_id, kp.ApiKey.PRODUCE, encode, decode, done, expect_response=self.acks != 0)
        except Exception as exc:
            self._on_produce_response(node_id, sent, None, exc, now)

    def _on_produce_response(self, node_id: int, sent: ProduceBatches, response: Any, error: BaseException | None,
                             sent_at: float) -> None:
        """response: None when every partition the response mentioned succeeded (sent.read_response has the
        answers), else the generic decode of the whole response."""
        now = time.monotonic()
        acc = self.accumulator
        if error is not None:
            # The whole request failed (connection lost, timeout, a response that could not be read): every
            # batch may be retried.
            if not self.closing and self.health.failed(node_id, now):
                self._apply_metadata(now)
            self.client.request_update()
            for batch in sent.batches:
                self._retry_or_fail(batch, kafka_retriable(error), now)
            return
        self.health.succeeded(node_id)
        latency = now - sent_at
        self.metrics.responses += 1
        self.metrics.latency_total += latency
        self.metrics.latency_max = max(self.metrics.latency_max, latency)
        if self.acks == 0:                      # written is all there is to know
            for batch in sent.batches:
                acc.complete(batch, -1, -1)
            return
        others = sent.complete(acc.complete)
        if not others:
            return
        results: dict[str, dict[int, Any]] = {}     # topic -> partition -> result: no tuple per partition
        for topic in response.responses if response is not None else ():
            name = topic.name if topic.name else self._topic_names.get(topic.topic_id.bytes, topic.name)
            results.setdefault(name, {}).update((partition.index, partition) for partition in topic.partition_responses)
        for batch in others:
            tp = batch.topic_partition
            result = results.get(tp[0], _NO_RESULTS).get(tp[1])
            if result is None:
                self._retry_or_fail(batch, kerrors.KafkaConnectionError(
                    f"the produce response from node {node_id} did not mention {tp}"), now)
            else:
                self._handle_error(batch, result, now)

    def _handle_error(self, batch: Any, result: Any, now: float) -> None:
        code = result.error_code
        if code == kerrors.InvalidProducerEpochError.errno and self.transactions is not None:
            # A newer producer of the transactional id bumped the epoch: this one is a zombie (the Java and
            # kafka-python producers end up with the same fatal error).
            code = kerrors.ProducerFencedError.errno
        error_class = kerrors.for_code(code)
        detail = result.error_message or ""
        if result.record_errors:
            detail += " " + "; ".join(f"record {e.batch_index}: {e.batch_index_error_message}"
                                      for e in result.record_errors)
        error = error_class(f"{batch.topic_partition}: {detail.strip()}" if detail.strip() else
                            str(batch.topic_partition))
        if self.idempotent and self.transactions is None and (
                code == kerrors.UnknownProducerIdError.errno
                or code == kerrors.OutOfOrderSequenceNumberError.errno and self.accumulator.is_oldest(batch)):
            # The broker dropped this producer's state (its records or its idle time expired): as the Java
            # producer does (KIP-360), take a new producer id once nothing is in flight, and send again what was
            # not acknowledged, in order, with sequences under the new id. Nothing of the refused batch was written.
            # The same when the partition's oldest unfinished batch is OUT_OF_ORDER: nothing before it is pending,
            # so no retry closes the gap (an earlier batch failed for good, or the broker's state for the
            # producer began at a later batch).
            _log.warning("%s: %s for producer id %d; resetting it and retrying", batch.topic_partition,
                         error_class.__name__, self.accumulator.producer_identity[0])
            self._producer_id_lost = True
            self._retry_or_fail(batch, error, now, True)
            return
        if code in _TOO_LARGE_CODES and batch.record_count > 1:
            _log.info("%s was refused as too large (%d records): splitting", batch.topic_partition,
                      batch.record_count)
            self.accumulator.split(batch, now)
            return
        if getattr(error, "invalid_metadata", False):
            self.client.request_update()
        # An out-of-order sequence follows an earlier batch of the partition that is being retried: once
        # that one is in, this one is accepted, so it is retried too.
        retriable = error.retriable or code == kerrors.OutOfOrderSequenceNumberError.errno
        self._retry_or_fail(batch, error, now, retriable)

    def _retry_or_fail(self, batch: Any, error: BaseException, now: float, retriable: bool | None = None) -> None:
        if retriable is None:
            retriable = getattr(error, "retriable", False)
        if retriable and batch.attempts <= self.retries and self._fatal is None and not self.closing:
            self.metrics.retries += 1
            _log.debug("retrying %s (attempt %d): %s", batch.topic_partition, batch.attempts, error)
            self.accumulator.retry(batch, now)
        else:
            self.metrics.errors += batch.record_count
            self.accumulator.fail(batch, error)


def kafka_retriable(error: BaseException) -> BaseException:
    """Network failures of a whole request are retriable (the broker may or may not have the data; the
    sequence numbers of an idempotent producer make the retry safe)."""
    if isinstance(error, kerrors.KafkaError):
        return error
    wrapped = kerrors.KafkaConnectionError(str(error))
    wrapped.__cause__ = error
    return wrapped
