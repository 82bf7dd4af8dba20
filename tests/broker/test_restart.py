"""What survives a restart: records, topics and their ids and configs, committed offsets, producer ids and the
de-duplication state, after a clean shutdown and after kill -9 (the broker in a child process). And the
durability contract of acks=all: kill -9 the broker at a random moment during production, start it again, and
every record that was acknowledged is there, at the offset it was acknowledged with."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fastmq.broker import BrokerProcess
from fastmq.broker.kafka.offsets import kafka_commit_fields
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

from tests.support.waiting import wait_for
from .conftest import Wire, fetch, produce, record_batch, records_of, small_broker


def test_clean_restart_keeps_records_topics_offsets_and_producer_state(tmp_path):
    broker = small_broker(tmp_path / "data").start()
    try:
        wire = Wire(broker.bootstrap_servers)
        topic = broker.broker.topics.create("kept", 2, {"max.message.bytes": "5000"})
        producer_id = wire.request(ApiKey.INIT_PRODUCER_ID, 4, kp.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=1000)).producer_id
        batch = record_batch([b"a", b"b"], keys=[b"k1", b"k2"], producer=(producer_id, 0, 0))
        assert produce(wire, "kept", 1, batch).base_offset == 0
        commit = kp.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            kp.OffsetCommitRequest.OffsetCommitRequestTopic(name="kept", partitions=[
                kp.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=1, committed_offset=2,
                                                                    committed_metadata="meta")])])
        wire.request(ApiKey.OFFSET_COMMIT, 8, commit)
        wire.close()
        port = broker.addresses[0][1]
        broker.restart()
        assert broker.addresses[0][1] == port
        wire = Wire(broker.bootstrap_servers)
        restored = broker.broker.topics.get("kept")
        assert (restored.partitions, restored.topic_id, restored.configs) == (2, topic.topic_id, topic.configs)
        assert [(r.key, r.value) for r in records_of(fetch(wire, "kept", 1, 0))] == [(b"k1", b"a"), (b"k2", b"b")]
        committed = broker.broker.offsets.fetch("g", "kept", 1)
        assert (committed.offset, kafka_commit_fields(committed)[0]) == (2, "meta")
        # The retried batch is recognised after the restart; new producer ids never repeat an old one.
        assert produce(wire, "kept", 1, batch).base_offset == 0
        assert fetch(wire, "kept", 1, 0).high_watermark == 2
        new_id = wire.request(ApiKey.INIT_PRODUCER_ID, 4, kp.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=1000)).producer_id
        assert new_id > producer_id
        assert broker.broker.cluster_id
        wire.close()
    finally:
        broker.close()


@pytest.mark.slow
def test_kill_9_keeps_records_and_rebuilds_producer_state_from_the_log(tmp_path):
    process = BrokerProcess(tmp_path / "data").start()
    try:
        wire = Wire(process.bootstrap_servers)
        producer_id = wire.request(ApiKey.INIT_PRODUCER_ID, 4, kp.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=1000)).producer_id
        first = record_batch([b"1", b"2", b"3"], producer=(producer_id, 0, 0))
        second = record_batch([b"4"], producer=(producer_id, 0, 3))
        wire.request(ApiKey.METADATA, 9, kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(
            name="crash")]))
        assert produce(wire, "crash", 0, first, acks=-1).base_offset == 0
        assert produce(wire, "crash", 0, second, acks=-1).base_offset == 3
        wire.close()
        process.kill()              # long before the periodic producer-state snapshot
        process.start()
        wire = Wire(process.bootstrap_servers)
        # Retries of both batches are answered with their offsets (state replayed from the CommitLog markers).
        assert produce(wire, "crash", 0, first, acks=-1).base_offset == 0
        assert produce(wire, "crash", 0, second, acks=-1).base_offset == 3
        assert produce(wire, "crash", 0, record_batch([b"5"], producer=(producer_id, 0, 4))).base_offset == 4
        assert [r.value for r in records_of(fetch(wire, "crash", 0, 0))] == [b"1", b"2", b"3", b"4", b"5"]
        wire.close()
    finally:
        process.close()


PRODUCER_CHILD = textwrap.dedent("""
    import sys
    from fastmq.kafka import Producer

    servers, topic, path = sys.argv[1:4]
    out = open(path, "w", buffering=1)

    with Producer(servers, acks="all", linger_ms=1) as producer:
        for i in range(1_000_000):
            value = b"value-%d" % i
            future = producer.send(topic, value, partition=0)
            future.add_callback(lambda metadata, v=value: out.write(f"{metadata.offset} {v.decode()}\\n"))
            if i % 200 == 0:
                producer.flush(30)
""")


def crash_while_producing(process: BrokerProcess, topic: str, script: str, args: list[str], progress: Path,
                          min_progress: int) -> None:
    """Run `script` (a producer writing what was acknowledged to `progress`) against the broker, kill -9 the
    broker at a random moment once min_progress bytes were written, then the producer."""
    wire = Wire(process.bootstrap_servers)
    wire.request(ApiKey.CREATE_TOPICS, 5, kp.CreateTopicsRequest(topics=[kp.CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    wire.close()
    child = subprocess.Popen([sys.executable, "-c", script, process.bootstrap_servers, topic, *args, str(progress)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: progress.exists() and progress.stat().st_size > min_progress, 30)
        time.sleep(random.Random(os.getpid()).uniform(0.1, 1.5))  # the crash strikes at a random point of the writing
        process.kill()
        time.sleep(0.3)  # the writer keeps failing against the dead broker a while
    finally:
        child.kill()
        child.wait(30)


@pytest.mark.slow
def test_kill_9_during_acks_all_production_loses_no_acknowledged_record(tmp_path):
    process = BrokerProcess(tmp_path / "data").start()
    acks_path = tmp_path / "acks.txt"
    try:
        crash_while_producing(process, "durable", PRODUCER_CHILD, [], acks_path, 1000)
        acknowledged = {}
        for line in acks_path.read_text().splitlines():
            offset, value = line.split()
            acknowledged[int(offset)] = value.encode()
        assert len(acknowledged) > 100
        process.start()
        wire = Wire(process.bootstrap_servers)
        stored = {}
        offset = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            records = records_of(fetch(wire, "durable", 0, offset, partition_max_bytes=1 << 20))
            if not records:
                break
            stored.update((r.offset, r.value) for r in records)
            offset = records[-1].offset + 1
        wire.close()
        missing = {o: v for o, v in acknowledged.items() if stored.get(o) != v}
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing.items())[:3]}"
    finally:
        process.close()


TRANSACTIONAL_CHILD = textwrap.dedent("""
    import sys
    from fastmq.kafka import Producer

    servers, topic, transactional_id, path = sys.argv[1:5]
    out = open(path, "w", buffering=1)

    with Producer(servers, transactional_id=transactional_id, linger_ms=1) as producer:
        producer.init_transactions(30)
        for k in range(100_000):
            producer.begin_transaction()
            for i in range(20):
                producer.send(topic, b"txn-%d-%d" % (k, i), partition=0)
            producer.commit_transaction(30)
            out.write(f"{k}\\n")
""")


@pytest.mark.slow
def test_kill_9_during_transactions_keeps_them_atomic_and_committed_ones_durable(tmp_path):
    from fastmq.kafka import Consumer, Producer, TopicPartition

    process = BrokerProcess(tmp_path / "data").start()
    committed_path = tmp_path / "committed.txt"
    try:
        crash_while_producing(process, "atomic", TRANSACTIONAL_CHILD, ["tid-atomic"], committed_path, 20)
        acknowledged = {int(line) for line in committed_path.read_text().split()}
        assert len(acknowledged) >= 5
        process.start()
        # A new producer of the id fences the old one and aborts what it left open.
        with Producer(process.bootstrap_servers, transactional_id="tid-atomic") as successor:
            successor.init_transactions(30)
        seen: dict[int, list[int]] = {}
        with Consumer(bootstrap_servers=process.bootstrap_servers, isolation_level="read_committed",
                      auto_offset_reset="earliest") as consumer:
            tp = TopicPartition("atomic", 0)
            consumer.assign([tp])
            end = consumer.end_offsets([tp])[tp]
            deadline = time.monotonic() + 60
            while consumer.position(tp) < end and time.monotonic() < deadline:
                for record in consumer.consume(1000, 0.5):
                    _, k, i = record.value.split(b"-")
                    seen.setdefault(int(k), []).append(int(i))
            assert consumer.position(tp) >= end
        # Every transaction read is whole and in order; every acknowledged one is there.
        broken = {k: items for k, items in seen.items() if items != list(range(20))}
        assert not broken, f"partial transactions visible: {sorted(broken.items())[:3]}"
        assert acknowledged <= set(seen), f"committed transactions lost: {sorted(acknowledged - set(seen))[:5]}"
    finally:
        process.close()
