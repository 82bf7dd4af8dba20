"""Transactions on the embedded broker over the wire (fastmq/broker/transactions.py, partition_transactions.py,
kafka/txn.py): the coordinator's answers, markers, the last stable offset, aborted ranges, fencing, timeouts,
transactional offsets, and what survives a restart. DeleteRecords too (log start offsets)."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker.partition_transactions import PartitionTransactions
from fastmq.broker.transactions import Transaction, TransactionStateFile, TxnState
from fastmq.store.errors import CorruptStoreError

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey
from fastmq.kafka.record.default_records import DefaultRecordBatchBuilder

from tests.support.waiting import WAIT, wait_for
from .conftest import Wire, fetch, produce, record_batch, records_of, small_broker

READ_COMMITTED = 1


def names() -> tuple[str, str]:
    return f"t-{uuid.uuid4().hex[:8]}", f"tid-{uuid.uuid4().hex[:8]}"


def create_topic(wire: Wire, name: str, partitions: int = 1) -> None:
    request = kp.CreateTopicsRequest(topics=[kp.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False)
    assert wire.request(ApiKey.CREATE_TOPICS, 5, request).topics[0].error_code == 0


def init(wire: Wire, tid: str | None, timeout_ms: int = 60000, producer: tuple[int, int] = (-1, -1),
         version: int = 4) -> Any:
    return wire.request(ApiKey.INIT_PRODUCER_ID, version, kp.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=producer[0],
        producer_epoch=producer[1]))


def add_partitions(wire: Wire, tid: str, pid: int, epoch: int, partitions: dict[str, list[int]],
                   version: int = 3) -> dict[tuple[str, int], int]:
    topic = kp.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    response = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, kp.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[topic(name=name, partitions=ps) for name, ps in partitions.items()]))
    return {(t.name, r.partition_index): r.partition_error_code for t in response.results_by_topic_v3_and_below
            for r in t.results_by_partition}


def end(wire: Wire, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return wire.request(ApiKey.END_TXN, version, kp.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code


def txn_batch(values: list[bytes], pid: int, epoch: int, sequence: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, sequence, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000 + i, None, value, [])
    return bytes(builder.build())


def produce_txn(wire: Wire, tid: str, topic: str, values: list[bytes], pid: int, epoch: int, sequence: int,
                partition: int = 0) -> Any:
    return produce(wire, topic, partition, txn_batch(values, pid, epoch, sequence), transactional_id=tid)


def list_latest(wire: Wire, topic: str, isolation_level: int) -> int:
    request = kp.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        kp.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            kp.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return wire.request(ApiKey.LIST_OFFSETS, 5, request).topics[0].partitions[0].offset


def committed_values(wire: Wire, topic: str) -> tuple[list[bytes], Any]:
    """What a read_committed consumer of partition 0 keeps, applying the aborted ranges as clients do."""
    data = fetch(wire, topic, 0, 0, isolation_level=READ_COMMITTED)
    aborted = {(a.producer_id, a.first_offset) for a in data.aborted_transactions}
    values = []
    from fastmq.kafka.record.memory_records import MemoryRecords
    records = MemoryRecords(bytes(data.records or b""))
    skipping: set[int] = set()
    while records.has_next():
        batch = records.next_batch()
        for pid, first in list(aborted):
            if batch.base_offset >= first and pid == batch.producer_id:
                skipping.add(pid)
                aborted.discard((pid, first))
        if batch.is_control_batch:
            skipping.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in skipping:
            continue
        values.extend(r.value for r in batch)
    return values, data


# -- the coordinator's answers ------------------------------------------------------------------------------------

def test_init_producer_id_bumps_the_epoch_and_fences_stale_callers(wire):
    _topic, tid = names()
    first = init(wire, tid)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    for epoch in (1, 2):
        again = init(wire, tid)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, epoch)
    # KIP-360: a caller naming an epoch that is neither the current one nor the one just bumped from is fenced;
    # with an old request version the error is the one that version knows.
    assert init(wire, tid, producer=(first.producer_id, 0), version=4).error_code == \
        kerrors.ProducerFencedError.errno
    assert init(wire, tid, producer=(first.producer_id, 0), version=3).error_code == \
        kerrors.InvalidProducerEpochError.errno
    bumped = init(wire, tid, producer=(first.producer_id, 2))
    assert (bumped.error_code, bumped.producer_epoch) == (0, 3)
    # Its answer lost, the same caller asks again: the same answer, not another bump.
    retried = init(wire, tid, producer=(first.producer_id, 2))
    assert (retried.error_code, retried.producer_epoch) == (0, 3)
    assert init(wire, tid, timeout_ms=0).error_code == kerrors.InvalidTransactionTimeoutError.errno
    assert init(wire, tid, timeout_ms=10 ** 9).error_code == kerrors.InvalidTransactionTimeoutError.errno
    assert init(wire, "").error_code == kerrors.InvalidRequestError.errno
    # Idempotent producers (no transactional id) still get fresh ids.
    assert init(wire, None).producer_id not in (-1, first.producer_id)


def test_joining_a_transaction_checks_the_producer_and_the_partitions(wire):
    topic, tid = names()
    create_topic(wire, topic, 2)
    producer = init(wire, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add_partitions(wire, "unknown-id", pid, epoch, {topic: [0]}) == {
        (topic, 0): kerrors.InvalidProducerIdMappingError.errno}
    assert add_partitions(wire, tid, pid + 1000, epoch, {topic: [0]}) == {
        (topic, 0): kerrors.InvalidProducerIdMappingError.errno}
    assert add_partitions(wire, tid, pid, epoch + 1, {topic: [0]}) == {(topic, 0): kerrors.ProducerFencedError.errno}
    assert add_partitions(wire, tid, pid, epoch + 1, {topic: [0]}, version=1) == {
        (topic, 0): kerrors.InvalidProducerEpochError.errno}
    assert add_partitions(wire, tid, pid, epoch, {topic: [0, 7], "no-such-topic": [0]}) == {
        (topic, 0): kerrors.OperationNotAttemptedError.errno,
        (topic, 7): kerrors.UnknownTopicOrPartitionError.errno,
        ("no-such-topic", 0): kerrors.UnknownTopicOrPartitionError.errno}
    assert add_partitions(wire, tid, pid, epoch, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
    assert add_partitions(wire, tid, pid, epoch, {topic: [1]}) == {(topic, 1): 0}       # again: no change
    # A partition outside the transaction takes no transactional records of it.
    other, _ = names()
    create_topic(wire, other)
    assert produce_txn(wire, tid, other, [b"x"], pid, epoch, 0).error_code == kerrors.InvalidTxnStateError.errno
    assert produce_txn(wire, tid, topic, [b"x"], pid, epoch, 0).error_code == 0


def test_end_txn_states(wire):
    topic, tid = names()
    create_topic(wire, topic)
    producer = init(wire, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert end(wire, tid, pid, epoch, True) == kerrors.InvalidTxnStateError.errno      # nothing begun
    assert add_partitions(wire, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert end(wire, tid, pid, epoch + 1, True) == kerrors.ProducerFencedError.errno
    assert end(wire, tid, pid, epoch + 1, True, version=1) == kerrors.InvalidProducerEpochError.errno
    assert end(wire, tid, pid, epoch, True) == 0
    assert end(wire, tid, pid, epoch, True) == 0                                         # a retry
    assert end(wire, tid, pid, epoch, False) == kerrors.InvalidTxnStateError.errno
    # The (empty) transaction still wrote its marker.
    (marker,) = records_of(fetch(wire, topic, 0, 0))
    assert marker.key == b"\x00\x00\x00\x01"


# -- markers, the last stable offset and aborted ranges ----------------------------------------------------------

def test_read_committed_stops_at_open_transactions_and_skips_aborted_ones(wire):
    topic, tid = names()
    create_topic(wire, topic)
    producer = init(wire, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert produce(wire, topic, 0, record_batch([b"before"])).error_code == 0          # offset 0
    assert add_partitions(wire, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(wire, tid, topic, [b"aborted-1", b"aborted-2"], pid, epoch, 0).error_code == 0  # 1, 2
    assert produce(wire, topic, 0, record_batch([b"plain"])).error_code == 0           # 3
    # Open: read_committed sees up to the transaction's first record; read_uncommitted sees everything.
    data = fetch(wire, topic, 0, 0, isolation_level=READ_COMMITTED)
    assert (data.high_watermark, data.last_stable_offset) == (4, 1)
    assert [r.value for r in records_of(data)] == [b"before"]
    assert [r.value for r in records_of(fetch(wire, topic, 0, 0))] == [b"before", b"aborted-1", b"aborted-2",
                                                                        b"plain"]
    assert (list_latest(wire, topic, READ_COMMITTED), list_latest(wire, topic, 0)) == (1, 4)
    assert end(wire, tid, pid, epoch, False) == 0                                      # marker at 4
    values, data = committed_values(wire, topic)
    assert values == [b"before", b"plain"]
    assert (data.last_stable_offset, data.high_watermark) == (5, 5)
    assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(pid, 1)]
    # A fetch past the aborted range does not hear of it.
    assert fetch(wire, topic, 0, 5, isolation_level=READ_COMMITTED).aborted_transactions == []
    # The next transaction of the same producer commits.
    assert add_partitions(wire, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(wire, tid, topic, [b"kept"], pid, epoch, 2).error_code == 0
    assert end(wire, tid, pid, epoch, True) == 0
    values, data = committed_values(wire, topic)
    assert values == [b"before", b"plain", b"kept"] and data.last_stable_offset == 7


def test_a_held_read_committed_fetch_is_answered_by_the_commit(broker):
    topic, tid = names()
    wire, consumer = Wire(broker.bootstrap_servers), Wire(broker.bootstrap_servers)
    create_topic(wire, topic)
    producer = init(wire, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add_partitions(wire, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(wire, tid, topic, [b"v"], pid, epoch, 0).error_code == 0
    started = time.monotonic()
    correlation_id = consumer.send(ApiKey.FETCH, 11, kp.FetchRequest(
        max_wait_ms=int(WAIT * 1000), min_bytes=1, max_bytes=1 << 20, isolation_level=READ_COMMITTED,
        session_id=0, session_epoch=-1, topics=[kp.FetchRequest.FetchTopic(topic=topic, partitions=[
            kp.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        rack_id=""))
    time.sleep(0.3)  # the fetch is parked behind the open transaction when it ends
    assert end(wire, tid, pid, epoch, True) == 0
    data = consumer.receive(ApiKey.FETCH, 11, correlation_id).responses[0].partitions[0]
    assert time.monotonic() - started < WAIT / 2
    assert [r.value for r in records_of(data) if r.key != b"\x00\x00\x00\x01"] == [b"v"]
    wire.close()
    consumer.close()


def test_a_new_producer_of_the_id_aborts_and_fences_the_old_one(wire):
    topic, tid = names()
    create_topic(wire, topic)
    old = init(wire, tid)
    pid = old.producer_id
    assert add_partitions(wire, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(wire, tid, topic, [b"zombie"], pid, 0, 0).error_code == 0
    new = init(wire, tid)
    assert (new.producer_id, new.producer_epoch) == (pid, 2)       # one bump fences and aborts, one is the new's
    assert produce_txn(wire, tid, topic, [b"late"], pid, 0, 1).error_code == kerrors.InvalidProducerEpochError.errno
    assert end(wire, tid, pid, 0, True) == kerrors.ProducerFencedError.errno
    values, data = committed_values(wire, topic)
    assert values == [] and data.last_stable_offset == data.high_watermark == 2


def test_open_transactions_time_out(tmp_path):
    with small_broker(tmp_path / "data", transaction_abort_check_interval_ms=50) as broker:
        wire = Wire(broker.bootstrap_servers)
        topic, tid = names()
        create_topic(wire, topic)
        producer = init(wire, tid, timeout_ms=200)
        pid, epoch = producer.producer_id, producer.producer_epoch
        assert add_partitions(wire, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert produce_txn(wire, tid, topic, [b"slow"], pid, epoch, 0).error_code == 0
        assert wait_for(lambda: fetch(wire, topic, 0, 0, isolation_level=READ_COMMITTED).last_stable_offset == 2)
        assert committed_values(wire, topic)[0] == []
        # The producer was fenced by the abort.
        assert end(wire, tid, pid, epoch, True) == kerrors.ProducerFencedError.errno
        wire.close()


def test_idle_transactional_ids_are_forgotten(tmp_path):
    with small_broker(tmp_path / "data", transaction_abort_check_interval_ms=50,
                      transactional_id_expiration_ms=300) as broker:
        wire = Wire(broker.bootstrap_servers)
        _topic, tid = names()
        first = init(wire, tid).producer_id
        coordinator = broker.broker.front_end("kafka").transactions
        assert wait_for(lambda: tid not in coordinator.transactions)
        assert init(wire, tid).producer_id != first          # a new id: the old one is gone
        wire.close()


# -- offsets in transactions ---------------------------------------------------------------------------------------

def txn_offset_commit(wire: Wire, tid: str, group: str, pid: int, epoch: int, topic: str, offset: int) -> int:
    request = kp.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
        topics=[kp.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
            kp.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                      committed_metadata="m")])])
    return wire.request(ApiKey.TXN_OFFSET_COMMIT, 3, request).topics[0].partitions[0].error_code


def offset_fetch(wire: Wire, group: str, topic: str, require_stable: bool) -> Any:
    request = kp.OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        kp.OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
    return wire.request(ApiKey.OFFSET_FETCH, 7, request).topics[0].partitions[0]


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_offsets_apply_only_on_commit(wire, commit):
    topic, tid = names()
    group = f"g-{uuid.uuid4().hex[:6]}"
    create_topic(wire, topic)
    producer = init(wire, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert txn_offset_commit(wire, tid, group, pid, epoch, topic, 5) == kerrors.InvalidTxnStateError.errno
    add_offsets = kp.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            group_id=group)
    assert wire.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets).error_code == 0
    assert txn_offset_commit(wire, tid, group, pid, epoch, topic, 5) == 0
    assert offset_fetch(wire, group, topic, True).error_code == kerrors.UnstableOffsetCommitError.errno
    assert offset_fetch(wire, group, topic, False).committed_offset == -1
    assert end(wire, tid, pid, epoch, commit) == 0
    stable = offset_fetch(wire, group, topic, True)
    assert (stable.error_code, stable.committed_offset) == (0, 5 if commit else -1)


# -- restarts ------------------------------------------------------------------------------------------------------

def test_transactions_survive_a_restart(tmp_path):
    embedded = small_broker(tmp_path / "data").start()
    try:
        wire = Wire(embedded.bootstrap_servers)
        topic, tid = names()
        create_topic(wire, topic)
        producer = init(wire, tid)
        pid, epoch = producer.producer_id, producer.producer_epoch
        aborted_tid = tid + "-aborted"
        other = init(wire, aborted_tid)
        assert add_partitions(wire, aborted_tid, other.producer_id, 0, {topic: [0]}) == {(topic, 0): 0}
        assert produce_txn(wire, aborted_tid, topic, [b"gone"], other.producer_id, 0, 0).error_code == 0
        assert end(wire, aborted_tid, other.producer_id, 0, False) == 0
        assert add_partitions(wire, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert produce_txn(wire, tid, topic, [b"open"], pid, epoch, 0).error_code == 0
        wire.close()
        embedded.restart()
        wire = Wire(embedded.bootstrap_servers)
        # Still open: the last stable offset holds at it; the aborted range is still known.
        data = fetch(wire, topic, 0, 0, isolation_level=READ_COMMITTED)
        assert data.last_stable_offset == 2
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(other.producer_id, 0)]
        assert end(wire, tid, pid, epoch, True) == 0
        assert committed_values(wire, topic)[0] == [b"open"]
        wire.close()
    finally:
        embedded.close()


# -- DeleteRecords ---------------------------------------------------------------------------------------------------

def delete_records(wire: Wire, topic: str, offsets: dict[int, int]) -> dict[int, tuple[int, int]]:
    request = kp.DeleteRecordsRequest(timeout_ms=5000, topics=[kp.DeleteRecordsRequest.DeleteRecordsTopic(
        name=topic, partitions=[kp.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o)
                                for p, o in offsets.items()])])
    return {r.partition_index: (r.error_code, r.low_watermark)
            for r in wire.request(ApiKey.DELETE_RECORDS, 2, request).topics[0].partitions}


def test_delete_records_moves_the_log_start_durably(tmp_path):
    embedded = small_broker(tmp_path / "data").start()
    try:
        wire = Wire(embedded.bootstrap_servers)
        topic, _ = names()
        create_topic(wire, topic, 2)
        assert produce(wire, topic, 0, record_batch([b"a", b"b", b"c", b"d"])).error_code == 0
        assert delete_records(wire, topic, {0: 2, 1: -1, 5: 0}) == {
            0: (0, 2), 1: (0, 0), 5: (kerrors.UnknownTopicOrPartitionError.errno, -1)}
        assert delete_records(wire, topic, {0: 9})[0][0] == kerrors.OffsetOutOfRangeError.errno
        assert delete_records(wire, topic, {0: 1}) == {0: (0, 2)}          # never backwards
        assert fetch(wire, topic, 0, 1).error_code == kerrors.OffsetOutOfRangeError.errno
        data = fetch(wire, topic, 0, 2)
        assert data.log_start_offset == 2 and [r.value for r in records_of(data)] == [b"c", b"d"]
        wire.close()
        embedded.restart()
        wire = Wire(embedded.bootstrap_servers)
        assert fetch(wire, topic, 0, 2).log_start_offset == 2
        assert delete_records(wire, topic, {0: -1}) == {0: (0, 4)}
        wire.close()
    finally:
        embedded.close()


# -- the state file -------------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 2 ** 40), st.text(max_size=8),
              st.sampled_from(["Ongoing", "Empty", "PrepareCommit", "1@t"])),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(["transactions", "partitions", "open", "aborted",
                                                                "producerId", "epoch", "timeoutMs", "state",
                                                                "partitions", "pendingOffsets", "tid", "0@t"]),
                                               children, max_size=5)),
    max_leaves=20)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(json_values)
def test_a_damaged_state_file_is_a_clear_error(tmp_path_factory, content):
    config_dir = tmp_path_factory.mktemp("txn-state")
    (config_dir / TransactionStateFile.file_name).write_text(json.dumps(content))
    state = TransactionStateFile(config_dir)
    try:
        state.load()
    except CorruptStoreError:
        return
    # Loaded: then it restores without surprises.
    PartitionTransactions().restore(state.partitions, lambda tp: 0)


def test_the_broker_refuses_to_start_on_a_damaged_state_file(tmp_path):
    data = tmp_path / "data"
    small_broker(data).start().close()
    (data / "config" / TransactionStateFile.file_name).write_text('{"transactions": {"t": {"state": "Ongoing"}}}')
    with pytest.raises(CorruptStoreError, match="kafkaTransactions.json"):
        small_broker(data).start()


@pytest.mark.parametrize("state", list(TxnState))
def test_a_state_file_keeps_every_state_and_reads_the_older_spelling(state):
    txn = Transaction("t", 7, 3, 60000, state, {("topic", 1)})
    stored = txn.encode()
    assert stored["state"] == state.name
    assert Transaction.decode("t", stored) == txn
    # Files written before the states had names of their own hold Kafka's spelling ("PrepareCommit").
    kafka_spelling = "".join(word.capitalize() for word in state.name.split("_"))
    assert Transaction.decode("t", {**stored, "state": kafka_spelling}).state is state
    with pytest.raises(ValueError, match="no valid state"):
        Transaction.decode("t", {**stored, "state": kafka_spelling + "d"})
