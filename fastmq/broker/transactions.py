"""The transaction coordinator (Kafka's, KIP-98) as a state machine that knows no wire format. Front ends call it
with plain values on the broker's I/O thread and get their answers through callbacks, once what the answer
promises is on disk.

A transactional id has a producer id and epoch and a state (Kafka's): Empty -> Ongoing (a partition or a group
joined) -> PrepareCommit / PrepareAbort (EndTxn decided) -> CompleteCommit / CompleteAbort -> Ongoing ...
- InitProducerId: a new id gets a producer id; a known one has its epoch bumped, which fences every older
  producer of that id, after its open transaction (if any) is aborted. KIP-360 callers name the producer id and
  epoch they had: anything else than the current ones is fenced.
- AddPartitionsToTxn / AddOffsetsToTxn open the transaction on partitions (their PartitionTransactions entry) and
  groups; TxnOffsetCommit keeps the group's offsets pending until the end.
- EndTxn writes a commit or abort marker to every partition of the transaction, applies (or drops) the pending
  offsets, and answers once the markers are flushed, the offsets committed and the state file written.
- A transaction open for longer than its timeout is aborted, and its epoch bumped (the producer is a zombie).
- Ids idle for transactional_id_expiration_ms are forgotten.
Every state change is written to config/kafkaTransactions.json (through the ConfigWriter, so that changes in
flight share fsyncs) before it is acknowledged. A crash between the decision and the markers leaves a Prepare
state, which start-up completes; a marker written twice is harmless.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from fastmq.broker.errors import CoreError
from fastmq.broker.offsets import CommittedOffset, OffsetStore
from fastmq.broker.partition_transactions import PartitionTransactions
from fastmq.broker.periodic import PeriodicWork
from fastmq.broker.persist import ConfigWriter
from fastmq.store.config import ConfigManager, _require_dict

log = logging.getLogger(__name__)



class TxnState(enum.Enum):
    """Where a transactional id stands (Kafka's transaction states, named here without Kafka's spelling: the state
    file stores the member's name)."""

    EMPTY = enum.auto()
    ONGOING = enum.auto()
    PREPARE_COMMIT = enum.auto()
    PREPARE_ABORT = enum.auto()
    COMPLETE_COMMIT = enum.auto()
    COMPLETE_ABORT = enum.auto()

    @classmethod
    def stored(cls, name: object) -> TxnState:
        """The state a state file names: a member's name, or Kafka's spelling of it (as files written before the
        states had their own names hold: "PrepareCommit")."""
        if isinstance(name, str):
            for state in cls:
                if name.replace("_", "").casefold() == state.name.replace("_", "").casefold():
                    return state
        raise ValueError(f"no such transaction state: {name!r}")


MAX_EPOCH = 32767
TopicPartition = tuple[str, int]
ErrorCallback = Callable[[CoreError | None], None]      # None: done


class Scheduler(Protocol):
    """What the coordinator needs of the I/O loop (fastmq.io.IOLoop is one)."""

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Any: ...

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any) -> Any: ...


class PartitionLog(Protocol):
    """What the coordinator needs of the partitions (a front end's partition logs, such as Kafka's PartitionLogs)."""

    transactions: PartitionTransactions

    def high_watermark(self, topic: str, partition: int) -> int: ...

    def write_marker(self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool) -> int:
        """Append the marker and close the transaction on the partition; the CommitLog position to flush."""

    def when_flushed(self, position: int, callback: Callable[[bool], None]) -> None: ...


@dataclasses.dataclass
class TransactionSettings:
    max_timeout_ms: int = 900_000                     # Kafka's transaction.max.timeout.ms
    abort_check_interval_ms: int = 10_000             # ...abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000      # transactional.id.expiration.ms


@dataclasses.dataclass
class Transaction:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = dataclasses.field(default_factory=set)
    groups: set[str] = dataclasses.field(default_factory=set)
    pending_offsets: dict[str, dict[TopicPartition, CommittedOffset]] = dataclasses.field(default_factory=dict)
    started: float = 0.0            # wall-clock seconds when it became Ongoing
    updated: float = 0.0
    previous_epoch: int = -1        # the epoch before the last bump (a KIP-360 caller retrying its bump)
    busy: bool = False              # a change is being completed: other requests get TRANSACTION_BUSY

    def encode(self) -> dict[str, Any]:
        return {"producerId": self.producer_id, "epoch": self.epoch, "timeoutMs": self.timeout_ms,
                "state": self.state.name, "partitions": sorted([t, p] for t, p in self.partitions),
                "groups": sorted(self.groups), "started": self.started, "updated": self.updated,
                "previousEpoch": self.previous_epoch,
                "pendingOffsets": {group: [[t, p, c.offset, *c.extra] for (t, p), c in offsets.items()]
                                   for group, offsets in self.pending_offsets.items()}}

    @classmethod
    def decode(cls, transactional_id: str, obj: dict[str, Any]) -> Transaction:
        try:
            state = TxnState.stored(obj.get("state"))
        except ValueError:
            raise ValueError(f"transaction {transactional_id!r} has no valid state: {obj.get('state')!r}") from None
        txn = cls(transactional_id, int(obj["producerId"]), int(obj["epoch"]), int(obj["timeoutMs"]), state, {(str(t), int(p)) for t, p in obj.get("partitions", [])},
                  {str(g) for g in obj.get("groups", [])}, {}, float(obj.get("started", 0)),
                  float(obj.get("updated", 0)), int(obj.get("previousEpoch", -1)))
        for group, entries in _require_dict(obj.get("pendingOffsets", {}), "pendingOffsets").items():
            txn.pending_offsets[group] = {(str(t), int(p)): CommittedOffset(int(o), tuple(extra))
                                          for t, p, o, *extra in entries}
        return txn


class TransactionStateFile(ConfigManager):
    """config/kafkaTransactions.json: the transactions and the partitions' transaction state."""

    file_name = "kafkaTransactions.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.transactions: dict[str, Transaction] = {}
        self.partitions: dict[str, Any] = {}     # PartitionTransactions.snapshot() as read
        self.snapshot: dict[str, Any] = {}       # taken on the I/O thread, written by the config writer

    def encode(self) -> dict[Any, Any]:
        return self.snapshot

    def decode(self, obj: Any) -> None:
        # Everything is parsed here, so that a damaged file is the load's clear error (or its backup is used).
        obj = _require_dict(obj, self.file_name)
        self.transactions = {str(tid): Transaction.decode(str(tid), _require_dict(value, str(tid)))
                             for tid, value in _require_dict(obj.get("transactions", {}), "transactions").items()}
        self.partitions = _require_dict(obj.get("partitions", {}), "partitions")
        PartitionTransactions().restore(self.partitions, lambda tp: 2 ** 63 - 1)


class TransactionCoordinator:
    def __init__(self, scheduler: Scheduler, logs: PartitionLog, offsets: OffsetStore, writer: ConfigWriter,
                 allocate_producer_id: Callable[[], int], known_partition: Callable[[str, int], bool],
                 config_dir: Path, settings: TransactionSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.logs = logs
        self.partitions: PartitionTransactions = logs.transactions
        self.offsets = offsets
        self.writer = writer
        self.allocate_producer_id = allocate_producer_id
        self.known_partition = known_partition
        self.settings = settings or TransactionSettings()
        self.transactions: dict[str, Transaction] = {}
        self._periodic = PeriodicWork(scheduler)
        self._file = TransactionStateFile(config_dir)
        self._file.load()
        self.transactions.update(self._file.transactions)
        self.partitions.restore(self._file.partitions, lambda tp: logs.high_watermark(*tp))

    def start(self) -> None:
        """Finish what a crash interrupted and start the timeout checks (on the I/O thread)."""
        for txn in list(self.transactions.values()):
            if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info("transaction %r: completing %s after a restart", txn.transactional_id, txn.state.name)
                self._seal(txn)
                self._complete(txn, txn.state == TxnState.PREPARE_COMMIT, lambda error: None)
        self._periodic.every("transaction timeout check", self.settings.abort_check_interval_ms / 1000.0,
                             self.check_timeouts)

    # -- InitProducerId ---------------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int, epoch: int,
                         callback: Callable[[CoreError | None, int, int], None]) -> None:
        """callback(error, producer id, epoch)."""
        if not transactional_id:
            callback(CoreError.INVALID_TRANSACTIONAL_ID, -1, -1)
            return
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            callback(CoreError.INVALID_TRANSACTION_TIMEOUT, -1, -1)
            return
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = Transaction(transactional_id, self.allocate_producer_id(), 0, timeout_ms,
                              updated=self.clock())
            self.transactions[transactional_id] = txn
            self._persist(txn, lambda error: callback(error, txn.producer_id, txn.epoch))
            return
        if txn.busy:
            callback(CoreError.TRANSACTION_BUSY, -1, -1)
            return
        if producer_id >= 0 and producer_id == txn.producer_id and epoch == txn.previous_epoch and (
                txn.state == TxnState.EMPTY):
            callback(None, txn.producer_id, txn.epoch)     # the answer to this bump was lost: the same again
            return
        if producer_id >= 0 and (producer_id, epoch) != (txn.producer_id, txn.epoch):
            callback(CoreError.PRODUCER_FENCED, -1, -1)
            return

        def bump(error: CoreError | None = None) -> None:
            if error:
                callback(error, -1, -1)
                return
            if txn.epoch >= MAX_EPOCH - 1:
                txn.producer_id, txn.epoch, txn.previous_epoch = self.allocate_producer_id(), 0, -1
            else:
                txn.previous_epoch = txn.epoch
                txn.epoch += 1
            txn.timeout_ms = timeout_ms
            txn.state = TxnState.EMPTY
            txn.updated = self.clock()
            self._persist(txn, lambda error: callback(error, txn.producer_id, txn.epoch))

        if txn.state == TxnState.ONGOING:
            # The old producer's transaction is aborted under the new epoch, which fences it on every partition.
            self._fence_and_abort(txn, bump)
        elif txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._complete(txn, txn.state == TxnState.PREPARE_COMMIT, bump)
        else:
            bump()

    # -- joining a transaction --------------------------------------------------------------------------------

    def _validate(self, transactional_id: str, producer_id: int,
                  epoch: int) -> tuple[Transaction | None, CoreError | None]:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return None, CoreError.PRODUCER_ID_MISMATCH
        if epoch != txn.epoch:
            return None, CoreError.PRODUCER_FENCED
        if txn.busy or txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return None, CoreError.TRANSACTION_BUSY
        return txn, None

    def _begin(self, txn: Transaction) -> None:
        now = self.clock()
        if txn.state != TxnState.ONGOING:
            txn.state = TxnState.ONGOING
            txn.started = now
        txn.updated = now

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition],
                       callback: Callable[[dict[TopicPartition, CoreError | None]], None]) -> None:
        """callback({partition: error})."""
        wanted = list(dict.fromkeys(partitions))
        txn, error = self._validate(transactional_id, producer_id, epoch)
        if txn is None:
            callback({tp: error for tp in wanted})
            return
        unknown = [tp for tp in wanted if not self.known_partition(*tp)]
        if unknown:
            callback({tp: CoreError.UNKNOWN_PARTITION if tp in unknown else CoreError.NOT_ATTEMPTED
                      for tp in wanted})
            return
        new = [tp for tp in wanted if tp not in txn.partitions]
        if not new and txn.state == TxnState.ONGOING:
            callback({tp: None for tp in wanted})
            return
        self._begin(txn)
        for tp in new:
            txn.partitions.add(tp)
            self.partitions.open(tp, txn.producer_id, txn.epoch, self.logs.high_watermark(*tp))
        self._persist(txn, lambda error: callback({tp: error for tp in wanted}))

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str,
                    callback: ErrorCallback) -> None:
        txn, error = self._validate(transactional_id, producer_id, epoch)
        if txn is None:
            callback(error)
            return
        if group in txn.groups and txn.state == TxnState.ONGOING:
            callback(None)
            return
        self._begin(txn)
        txn.groups.add(group)
        self._persist(txn, callback)

    def commit_offsets(self, transactional_id: str, group: str, producer_id: int, epoch: int,
                       offsets: list[tuple[str, int, CommittedOffset]], callback: ErrorCallback) -> None:
        """TxnOffsetCommit: the offsets wait for the transaction's end. One error for all of them."""
        txn, error = self._validate(transactional_id, producer_id, epoch)
        if txn is None:
            callback(error)
            return
        if txn.state != TxnState.ONGOING or group not in txn.groups:
            callback(CoreError.INVALID_TRANSACTION_STATE)       # AddOffsetsToTxn first
            return
        pending = txn.pending_offsets.setdefault(group, {})
        for topic, partition, committed in offsets:
            pending[(topic, partition)] = committed
        txn.updated = self.clock()
        self._persist(txn, callback)

    def has_pending_offset(self, group: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of the group for this partition (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        return any((topic, partition) in txn.pending_offsets.get(group, {}) for txn in self.transactions.values())

    # -- EndTxn -----------------------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        callback: ErrorCallback) -> None:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            callback(CoreError.PRODUCER_ID_MISMATCH)
            return
        if epoch != txn.epoch:
            callback(CoreError.PRODUCER_FENCED)
            return
        if txn.busy:
            callback(CoreError.TRANSACTION_BUSY)
            return
        decided = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if txn.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            callback(None)                    # a retry of an EndTxn that completed
            return
        if txn.state == decided:              # a retry after a failure to complete
            self._complete(txn, commit, callback)
            return
        if txn.state != TxnState.ONGOING:
            callback(CoreError.INVALID_TRANSACTION_STATE)
            return
        txn.state = decided
        txn.updated = self.clock()
        self._seal(txn)

        def decided_durably(error: CoreError | None) -> None:
            if error:
                callback(error)
                return
            self._complete(txn, commit, callback)

        self._persist(txn, decided_durably)

    def _seal(self, txn: Transaction) -> None:
        for tp in txn.partitions:
            self.partitions.seal(tp, txn.producer_id, txn.epoch)

    def _complete(self, txn: Transaction, commit: bool, callback: ErrorCallback) -> None:
        """Write the markers and apply the offsets; once both are durable, the Complete state; callback once
        that is. Complete is never on disk before the markers are: a crash in between leaves the Prepare state,
        and start() writes the markers again."""
        txn.busy = True
        position = 0
        try:
            for tp in sorted(txn.partitions):
                if self.known_partition(*tp):          # else deleted meanwhile
                    position = max(position, self.logs.write_marker(tp[0], tp[1], txn.producer_id, txn.epoch,
                                                                    commit))
        except Exception:
            log.exception("transaction %r: writing its markers failed", txn.transactional_id)
            txn.busy = False
            callback(CoreError.NOT_AVAILABLE)
            return
        waits = 1                    # what must still finish; one for this function itself
        failed = False

        def markers_and_offsets_done(ok: bool) -> None:
            nonlocal waits, failed
            failed = failed or not ok
            waits -= 1
            if waits:
                return
            if failed:
                # The decision stands (its Prepare state is on disk): a retry, or the next start, completes it.
                txn.busy = False
                callback(CoreError.NOT_AVAILABLE)
                return
            txn.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            txn.partitions, txn.groups, txn.pending_offsets = set(), set(), {}
            txn.updated = self.clock()
            self._persist(txn, callback)

        if position:
            waits += 1
            self.logs.when_flushed(position, self._on_loop(markers_and_offsets_done))
        for group, offsets in txn.pending_offsets.items() if commit else ():
            waits += 1
            self.offsets.commit(group, [(t, p, c) for (t, p), c in offsets.items()],
                                self._on_loop(markers_and_offsets_done))
        markers_and_offsets_done(True)

    def _fence_and_abort(self, txn: Transaction, then: ErrorCallback) -> None:
        """Abort an open transaction under a bumped epoch, which fences its producer."""
        if txn.epoch < MAX_EPOCH - 1:
            txn.previous_epoch = txn.epoch
            txn.epoch += 1
        txn.state = TxnState.PREPARE_ABORT
        txn.updated = self.clock()
        self._seal(txn)
        self._persist(txn, lambda error: then(error) if error else self._complete(txn, False, then))

    # -- timeouts and expiry ----------------------------------------------------------------------------------

    def check_timeouts(self) -> None:
        """Abort timed-out transactions, finish ones whose completion failed, forget idle ids."""
        now = self.clock()
        for txn in list(self.transactions.values()):
            if txn.busy:
                continue
            if txn.state == TxnState.ONGOING and now - txn.started > txn.timeout_ms / 1000.0:
                log.info("transaction %r (producer %d epoch %d) timed out after %d ms: aborting",
                         txn.transactional_id, txn.producer_id, txn.epoch, txn.timeout_ms)
                self._fence_and_abort(txn, lambda error: None)
            elif txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                # Its completion failed (a disk error): try again rather than wait for the producer.
                self._complete(txn, txn.state == TxnState.PREPARE_COMMIT, lambda error: None)
            elif (txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                  and now - txn.updated > self.settings.id_expiration_ms / 1000.0):
                del self.transactions[txn.transactional_id]
                self._write()

    def forget_topic(self, topic: str) -> None:
        for txn in self.transactions.values():
            txn.partitions = {tp for tp in txn.partitions if tp[0] != topic}
            for offsets in txn.pending_offsets.values():
                for tp in [tp for tp in offsets if tp[0] == topic]:
                    del offsets[tp]
        self._write()

    def trim(self, log_start_offset: Callable[[str, int], int]) -> None:
        """Drop aborted ranges below each partition's log start."""
        for tp in self.partitions.partitions():
            self.partitions.trim(tp, log_start_offset(*tp))

    # -- persistence ------------------------------------------------------------------------------------------

    def _persist(self, txn: Transaction, callback: ErrorCallback) -> None:
        """Write the state; callback(None) once durable, else a retriable error. txn is busy meanwhile."""
        txn.busy = True

        def written(ok: bool) -> None:
            txn.busy = False
            callback(None if ok else CoreError.NOT_AVAILABLE)

        self._write(written)

    def _write(self, callback: Callable[[bool], None] | None = None) -> None:
        self._file.snapshot = {"transactions": {tid: txn.encode() for tid, txn in self.transactions.items()},
                               "partitions": self.partitions.snapshot()}
        self.writer.write(self._file, self._on_loop(callback) if callback is not None else None)

    def _on_loop(self, callback: Callable[[bool], None]) -> Callable[[bool], None]:
        # The writer and the flush thread call back on their own threads; the state is the I/O thread's.
        return lambda ok: self.scheduler.call_soon_threadsafe(callback, ok)

    def close(self) -> None:
        self._periodic.stop()
