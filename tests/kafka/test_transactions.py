"""Transactional producer against both brokers: the coordinator protocol (init, add partitions, commit, abort,
offsets, fencing) and what read_committed consumers see. Tansu 0.6 writes no transaction markers and keeps no
transactional offsets, so those checks are its expected failures; the embedded broker must pass them."""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition

from fastmq.kafka import errors as kerrors
from fastmq.kafka.compat import KafkaProducer
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.producer import Producer
from fastmq.kafka.structs import OffsetAndMetadata
from fastmq.kafka.structs import TopicPartition as OurTopicPartition

from tests.support.brokers import on_all_brokers, on_brokers

WAIT = 20.0
EVERY_BROKER = on_brokers("tansu", "embedded", "apache")
NO_MARKERS = "Tansu 0.6.0 writes no transaction markers: read_committed consumers still see aborted records " \
             "(kafka.md)"


def names():
    return f"txn-{uuid.uuid4().hex[:8]}", f"tid-{uuid.uuid4().hex[:8]}"


def read(servers, topic, isolation_level="read_uncommitted"):
    consumer = KafkaConsumer(bootstrap_servers=servers, consumer_timeout_ms=2000, isolation_level=isolation_level)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return [r.value for r in consumer]
    finally:
        consumer.close()


@pytest.fixture
def txn_producer(kafka_broker):
    made = []

    def make(transactional_id, begin: bool = False, **options):
        """A transactional producer; with begin, initialized and in a transaction."""
        options.setdefault("linger_ms", 5)
        made.append(Producer(kafka_broker.bootstrap_servers, transactional_id=transactional_id, **options))
        if begin:
            made[-1].init_transactions(WAIT)
            made[-1].begin_transaction()
        return made[-1]

    yield make
    for p in made:
        p.close(0)


@EVERY_BROKER
def test_commit_and_abort(kafka_broker, txn_producer):
    topic, tid = names()
    p = txn_producer(tid, begin=True)
    committed = [p.send(topic, b"committed-%d" % i, partition=0) for i in range(5)]
    p.commit_transaction(WAIT)
    assert all(f.succeeded() for f in committed)
    p.begin_transaction()
    p.send(topic, b"aborted", partition=0)
    p.flush(WAIT)
    p.abort_transaction(WAIT)
    values = read(kafka_broker.bootstrap_servers, topic)
    assert values[:5] == [b"committed-%d" % i for i in range(5)]


@on_all_brokers(NO_MARKERS)
def test_read_committed_hides_aborted_records(kafka_broker, txn_producer):
    topic, tid = names()
    p = txn_producer(tid, begin=True)
    p.send(topic, b"aborted", partition=0)
    p.flush(WAIT)
    p.abort_transaction(WAIT)
    p.begin_transaction()
    p.send(topic, b"kept", partition=0)
    p.commit_transaction(WAIT)
    assert read(kafka_broker.bootstrap_servers, topic, "read_committed") == [b"kept"]


@EVERY_BROKER
def test_abort_fails_records_not_sent_yet(kafka_broker, txn_producer):
    topic, tid = names()
    p = txn_producer(tid, begin=True, linger_ms=60000, batch_size=1 << 20)
    futures = [p.send(topic, b"never-sent", partition=0) for _ in range(10)]
    p.abort_transaction(WAIT)
    assert all(isinstance(f.exception, kerrors.TransactionAbortedError) for f in futures)
    p.begin_transaction()                              # the producer goes on with a new transaction
    following = p.send(topic, b"next", partition=0)
    p.commit_transaction(WAIT)                         # commit flushes, linger or not
    assert following.succeeded()


@EVERY_BROKER
def test_state_errors(kafka_broker, txn_producer):
    topic, tid = names()
    p = txn_producer(tid)
    with pytest.raises(kerrors.IllegalStateError):
        p.begin_transaction()                          # before init_transactions
    p.init_transactions(WAIT)
    with pytest.raises(kerrors.IllegalStateError):
        p.send(topic, b"outside a transaction")
    with pytest.raises(kerrors.IllegalStateError):
        p.commit_transaction(WAIT)
    p.begin_transaction()
    with pytest.raises(kerrors.IllegalStateError):
        p.begin_transaction()
    p.commit_transaction(WAIT)                         # an empty transaction commits


@EVERY_BROKER
def test_a_new_producer_with_the_same_id_fences_the_old_one(kafka_broker, txn_producer):
    topic, tid = names()
    old = txn_producer(tid)
    old.init_transactions(WAIT)
    old.begin_transaction()
    old.send(topic, b"one", partition=0).get(WAIT)
    new = txn_producer(tid)
    new.init_transactions(WAIT)
    with pytest.raises(kerrors.ProducerFencedError):
        old.send(topic, b"two", partition=0).get(WAIT)
    with pytest.raises(kerrors.ProducerFencedError):
        old.commit_transaction(WAIT)
    with pytest.raises(kerrors.ProducerFencedError):
        old.begin_transaction()


def committed_offset(servers: str, group: str, topic: str) -> int | None:
    with Consumer(bootstrap_servers=servers, group_id=group, enable_auto_commit=False) as consumer:
        committed = consumer.committed(OurTopicPartition(topic, 0))
        return None if committed is None else getattr(committed, "offset", committed)


@EVERY_BROKER
def test_offsets_join_the_transaction(kafka_broker, txn_producer):
    topic, tid = names()
    source = f"{topic}-in"
    group = f"group-{tid}"
    with Producer(kafka_broker.bootstrap_servers) as plain:
        plain.send(source, b"x", partition=0).get(WAIT)
    p = txn_producer(tid)
    p.init_transactions(WAIT)
    for committed in (False, True):
        p.begin_transaction()
        p.send(topic, b"out", partition=0)
        p.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(42, "", -1)}, group)
        if committed:
            p.commit_transaction(WAIT)
        else:
            p.abort_transaction(WAIT)
            assert committed_offset(kafka_broker.bootstrap_servers, group, source) is None
    assert committed_offset(kafka_broker.bootstrap_servers, group, source) == 42


@EVERY_BROKER
def test_offsets_alone_make_a_transaction(kafka_broker, txn_producer):
    # No record at all: the transaction holds only offsets, and still ends at the coordinator.
    _topic, tid = names()
    source, group = f"in-{tid}", f"group-{tid}"
    with Producer(kafka_broker.bootstrap_servers) as plain:
        plain.send(source, b"x", partition=0).get(WAIT)
    p = txn_producer(tid, begin=True)
    p.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(1, "", -1)}, group)
    p.commit_transaction(WAIT)
    assert committed_offset(kafka_broker.bootstrap_servers, group, source) == 1


@on_all_brokers(NO_MARKERS)
def test_read_committed_consumer_of_fastmq(kafka_broker, txn_producer):
    topic, tid = names()
    p = txn_producer(tid, begin=True)
    p.send(topic, b"open", partition=0).get(WAIT)
    with Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, isolation_level="read_committed",
                  auto_offset_reset="earliest") as consumer:
        consumer.assign([OurTopicPartition(topic, 0)])
        assert consumer.consume(10, 1.0) == []          # the open transaction holds everything back
        p.abort_transaction(WAIT)
        p.begin_transaction()
        p.send(topic, b"kept", partition=0)
        p.commit_transaction(WAIT)
        got = []
        for _ in range(20):
            got += [r.value for r in consumer.consume(10, 0.5)]
            if got:
                break
        assert got == [b"kept"]
        tp = OurTopicPartition(topic, 0)
        assert consumer.end_offsets([tp])[tp] == 4      # open, aborted marker, kept, commit marker


@EVERY_BROKER
def test_kafka_python_transactional_api(kafka_broker):
    topic, tid = names()
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, transactional_id=tid)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"via compat", partition=0)
        producer.commit_transaction()
        assert read(kafka_broker.bootstrap_servers, topic) == [b"via compat"]
    finally:
        producer.close()
    with pytest.raises(kerrors.KafkaConfigurationError):
        KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, transactional_id=tid,
                      enable_idempotence=False)


@on_brokers("embedded", "apache")
@pytest.mark.parametrize("isolation_level", ["read_uncommitted", "read_committed"])
def test_a_fetch_of_markers_only_moves_the_consumer_on(kafka_broker, txn_producer, isolation_level):
    # The consumer reads the transaction's record, then a fetch brings the commit marker alone: its position
    # must pass the marker, or every later fetch would be dropped as not following on.
    topic, tid = names()
    p = txn_producer(tid, begin=True)
    p.send(topic, b"in-txn", partition=0).get(WAIT)
    tp = OurTopicPartition(topic, 0)
    with Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, isolation_level=isolation_level,
                  auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        if isolation_level == "read_uncommitted":
            assert [r.value for r in consumer.consume(10, 5.0)] == [b"in-txn"]
        p.commit_transaction(WAIT)
        with Producer(kafka_broker.bootstrap_servers) as plain:
            plain.send(topic, b"after", partition=0).get(WAIT)
        got = []
        for _ in range(20):
            got += [r.value for r in consumer.consume(10, 0.5)]
            if b"after" in got:
                break
        assert got == ([b"after"] if isolation_level == "read_uncommitted" else [b"in-txn", b"after"])
        assert consumer.position(tp) == 3
