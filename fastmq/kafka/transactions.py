"""Transactions for the producer (kafka-python's init_transactions / begin / commit / abort /
send_offsets_to_transaction).

init_transactions finds the transaction coordinator and takes a producer id and epoch from it
(InitProducerId with the transactional id, which fences older producers of that id). Within a transaction,
the first record for a partition registers that partition with the coordinator (AddPartitionsToTxn) before
the sender may send any batch of it; batches carry the transactional bit. Commit flushes everything and
then asks the coordinator to write the commit markers (EndTxn); abort fails what was not sent yet, waits
for what is in flight, and has the coordinator write abort markers. Offsets of a consume-transform-produce
loop join the transaction through AddOffsetsToTxn and TxnOffsetCommit.

The coordinator calls run on the caller's thread (they are rare and must block anyway); the sender only
asks may_send() whether a partition is registered.
"""
from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any, Callable

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient
from fastmq.kafka.coordinator import GROUP, TRANSACTION, coordinator_entries, find_coordinator_request
from fastmq.kafka.structs import TopicPartition

_log = logging.getLogger(__name__)

# Answers after which the same request is tried again (after a new coordinator lookup for the last two).
_RETRY_CODES = {kerrors.CoordinatorLoadInProgressError.errno, kerrors.ConcurrentTransactionsError.errno,
                kerrors.CoordinatorNotAvailableError.errno, kerrors.NotCoordinatorError.errno}
_MOVED_CODES = {kerrors.CoordinatorNotAvailableError.errno, kerrors.NotCoordinatorError.errno}


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    FATAL = "fatal"


class TransactionManager:
    """The transaction state of one producer."""

    def __init__(self, client: KafkaClient, accumulator: Any, transactional_id: str, *,
                 transaction_timeout_ms: int, retry_backoff_ms: float, flush: Callable[[float | None], None]) -> None:
        self.client = client
        self.accumulator = accumulator
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000.0
        self._flush = flush
        self.state = TxnState.UNINITIALIZED
        self._lock = threading.Lock()
        self._partitions: set[TopicPartition] = set()        # registered in the current transaction
        self._offsets_added = False                           # AddOffsetsToTxn in the current transaction
        self._coordinator: int | None = None
        self._fatal: BaseException | None = None

    # ---- what the producer and the sender ask ---------------------------------------------------------

    def may_send(self, tp: TopicPartition) -> bool:
        """Sender (any thread): whether batches of tp may go out (the partition joined the transaction)."""
        return tp in self._partitions

    def check_can_send(self) -> None:
        if self.state is not TxnState.IN_TRANSACTION:
            raise kerrors.IllegalStateError(
                f"TransactionalId {self.transactional_id}: cannot send in state {self.state.value}; "
                "call begin_transaction() first")

    def register(self, partitions: set[TopicPartition], timeout: float) -> None:
        """Make sure these partitions joined the transaction (AddPartitionsToTxn for the new ones)."""
        new = partitions - self._partitions
        if not new:
            return
        with self._lock:
            new = partitions - self._partitions
            if not new:
                return
            topics: dict[str, list[int]] = {}
            for tp in new:
                topics.setdefault(tp.topic, []).append(tp.partition)
            pid, epoch = self.accumulator.producer_identity
            request = kp.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[kp.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=sorted(p))
                                     for t, p in topics.items()])

            def check(response: kp.AddPartitionsToTxnResponse) -> int:
                for topic in response.results_by_topic_v3_and_below:
                    for result in topic.results_by_partition:
                        if result.partition_error_code:
                            return result.partition_error_code
                return 0

            self._call(request, check, timeout)
            self._partitions |= new
        self.client.loop.wakeup()

    # ---- kafka-python's API ------------------------------------------------------------------------------

    def init_transactions(self, timeout: float) -> None:
        if self.state is not TxnState.UNINITIALIZED:
            raise kerrors.IllegalStateError(f"init_transactions() called in state {self.state.value}")
        request = kp.InitProducerIdRequest(transactional_id=self.transactional_id,
                                           transaction_timeout_ms=self.transaction_timeout_ms)
        response = self._call(request, lambda r: r.error_code, timeout)
        self.accumulator.set_producer_id(response.producer_id, response.producer_epoch, True)
        self.state = TxnState.READY
        _log.info("transactional id %r: producer id %d epoch %d", self.transactional_id, response.producer_id,
                  response.producer_epoch)

    def begin_transaction(self) -> None:
        self._raise_if_fatal()
        if self.state is not TxnState.READY:
            raise kerrors.IllegalStateError(f"begin_transaction() called in state {self.state.value}")
        self.state = TxnState.IN_TRANSACTION

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group_id: str, generation_id: int = -1,
                                    member_id: str = "", group_instance_id: str | None = None,
                                    timeout: float = 60.0) -> None:
        self.check_can_send()
        pid, epoch = self.accumulator.producer_identity
        self._call(kp.AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=pid,
                                             producer_epoch=epoch, group_id=group_id),
                   lambda r: r.error_code, timeout)
        self._offsets_added = True
        topics: dict[str, list[Any]] = {}
        for tp, meta in offsets.items():
            offset = meta.offset if hasattr(meta, "offset") else meta
            metadata = getattr(meta, "metadata", "") or ""
            leader_epoch = getattr(meta, "leader_epoch", -1)
            topics.setdefault(tp.topic, []).append(kp.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset, committed_leader_epoch=leader_epoch,
                committed_metadata=metadata))
        request = kp.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group_id, producer_id=pid, producer_epoch=epoch,
            generation_id=generation_id, member_id=member_id, group_instance_id=group_instance_id,
            topics=[kp.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=p)
                    for t, p in topics.items()])

        def check(response: kp.TxnOffsetCommitResponse) -> int:
            for topic in response.topics:
                for partition in topic.partitions:
                    if partition.error_code:
                        return partition.error_code
            return 0

        self._call(request, check, timeout, key=group_id, key_type=GROUP)

    def commit_transaction(self, timeout: float) -> None:
        self.check_can_send()
        deadline = time.monotonic() + timeout
        self._flush(timeout)
        failed = self.accumulator.transaction_failure()
        if failed is not None:
            # A record of this transaction failed: committing would make a partial transaction visible.
            # The producer must abort (or, fenced, be closed); its error is raised as is.
            if isinstance(failed, (kerrors.ProducerFencedError, kerrors.InvalidProducerEpochError)):
                self.state = TxnState.FATAL
                self._fatal = failed
            raise failed
        self._end(True, max(0.0, deadline - time.monotonic()))

    def abort_transaction(self, timeout: float) -> None:
        if self.state is not TxnState.IN_TRANSACTION:
            raise kerrors.IllegalStateError(f"abort_transaction() called in state {self.state.value}")
        deadline = time.monotonic() + timeout
        self.accumulator.fail_unsent(kerrors.TransactionAbortedError(
            f"TransactionalId {self.transactional_id}: the transaction was aborted before this record was sent"))
        self._flush(timeout)
        self._end(False, max(0.0, deadline - time.monotonic()))

    # ---- internals ----------------------------------------------------------------------------------------

    def _end(self, committed: bool, timeout: float) -> None:
        # A transaction the coordinator knows of (a partition or a group joined it) ends there; an empty one
        # only here.
        if self._partitions or self._offsets_added:
            pid, epoch = self.accumulator.producer_identity
            response = self._call(kp.EndTxnRequest(transactional_id=self.transactional_id, producer_id=pid,
                                                   producer_epoch=epoch, committed=committed),
                                  lambda r: r.error_code, timeout)
            # EndTxn v5 (transactions v2, KIP-890): the coordinator bumped the epoch (or, at its end, gave a
            # new producer id) for the next transaction; the old one is fenced from now on.
            new_pid, new_epoch = response.producer_id, response.producer_epoch
            if new_pid >= 0 and new_epoch >= 0 and (new_pid, new_epoch) != (pid, epoch):
                self.accumulator.set_producer_id(new_pid, new_epoch, True)
        self._partitions = set()
        self._offsets_added = False
        self.accumulator.clear_transaction_failure()
        self.state = TxnState.READY

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def _find(self, key: str, key_type: int, deadline: float) -> int:
        while True:
            response = self.client.request(None, find_coordinator_request([key], key_type),
                                           max(0.001, deadline - time.monotonic()))
            entry = coordinator_entries(response, [key])[0]
            if not entry.error_code:
                if entry.node_id not in self.client.pool.nodes:
                    self.client.loop.run_in_loop(self.client.pool.add_node, entry.node_id, entry.host, entry.port)
                return entry.node_id
            self._retry_or_raise(entry.error_code, f"FindCoordinator for {key!r}", deadline)

    def _call(self, request: Any, error_of: Callable[[Any], int], timeout: float, *, key: str | None = None,
              key_type: int = TRANSACTION) -> Any:
        """Send to the coordinator of key (the transactional id by default), retrying what can be retried
        within the timeout; returns the response or raises the broker's error."""
        deadline = time.monotonic() + timeout
        key = self.transactional_id if key is None else key
        node = self._coordinator if key_type == TRANSACTION and key == self.transactional_id else None
        while True:
            if node is None:
                node = self._find(key, key_type, deadline)
                if key_type == TRANSACTION:
                    self._coordinator = node
            try:
                # A coordinator that died has a successor: look for it rather than wait for this one to return.
                response = self.client.request(node, request, max(0.001, deadline - time.monotonic()),
                                               give_up_when_failing=True)
            except kerrors.KafkaError as exc:
                if not exc.retriable or time.monotonic() >= deadline:
                    raise
                node = None
                time.sleep(self.retry_backoff)
                continue
            code = error_of(response)
            if not code:
                return response
            if code in _MOVED_CODES:
                node = None
            self._retry_or_raise(code, type(request).__name__, deadline)

    def _retry_or_raise(self, code: int, what: str, deadline: float) -> None:
        error = kerrors.for_code(code)(f"TransactionalId {self.transactional_id}: {what}")
        if code in _RETRY_CODES and time.monotonic() + self.retry_backoff < deadline:
            time.sleep(self.retry_backoff)
            return
        if isinstance(error, (kerrors.ProducerFencedError, kerrors.InvalidProducerEpochError,
                              kerrors.TransactionalIdAuthorizationFailedError)):
            self.state = TxnState.FATAL
            self._fatal = error
        raise error
