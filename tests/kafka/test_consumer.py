"""fastmq.kafka.Consumer against a real broker (Tansu), reading what independent producers wrote.

What Tansu 0.6.0 gets wrong (ListOffsets LATEST, offsets by time, read_committed, a fetch beyond the log end,
commit metadata; see shared/docs/protocols/kafka.md) is tested as it should behave, against both Tansu (an
expected failure naming the bug) and fastmq's embedded broker (expected to pass).
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import confluent_kafka
import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

from tests.support.brokers import on_all_brokers

WAIT = 20.0
TANSU_LATEST = ("Tansu 0.6.0: ListOffsets(LATEST) answers the start of the last batch + 1, not the log end "
                "(end_offsets, seek_to_end and auto_offset_reset='latest' are wrong against it)")
TANSU_TIMES = "Tansu 0.6.0: offsets_for_times compares the batch's store time, not record timestamps"
TANSU_READ_COMMITTED = "Tansu 0.6.0: read_committed consumers still see records of aborted transactions"
TANSU_OUT_OF_RANGE = ("Tansu 0.6.0: a fetch beyond the log end gets no records and no OFFSET_OUT_OF_RANGE, so the "
                      "consumer cannot know it must reset (tests/kafka/test_fetcher.py covers the reset)")


def topic_name(prefix: str = "c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(bootstrap: str, topic: str, count: int, *, partition: int | None = 0, batches: int = 1,
            value: bytes = b"v", **extra) -> None:
    """count records through confluent-kafka, in `batches` separate flushes (so separate batches)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    per_batch = -(-count // batches)
    for start in range(0, count, per_batch):
        for i in range(start, min(count, start + per_batch)):
            kwargs = dict(extra)
            if partition is not None:
                kwargs["partition"] = partition
            producer.produce(topic, value + str(i).encode(), **kwargs)
        assert producer.flush(WAIT) == 0


def poll_until(consumer: Consumer, count: int, timeout: float = WAIT) -> list[ConsumerRecord]:
    records, deadline = [], time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for chunk in consumer.poll(0.5).values():
            records.extend(chunk)
    return records


def consumer_factory(bootstrap_servers: str):
    made = []

    def make(**options):
        options.setdefault("auto_offset_reset", "earliest")
        instance = Consumer(bootstrap_servers=bootstrap_servers, **options)
        made.append(instance)
        return instance

    return make, made


@pytest.fixture
def consumer(kafka_broker):
    make, made = consumer_factory(kafka_broker.bootstrap_servers)
    yield make
    for instance in made:
        instance.close(timeout=5)


def exact_brokers(tansu_bug: str):
    """Run a test against Tansu (an expected failure: `tansu_bug`) and the embedded broker (expected to pass)."""
    return on_all_brokers(tansu_bug, fixture="exact")


@pytest.fixture
def exact(request, tmp_path):
    """(broker with .bootstrap_servers, consumer factory) for the broker named by the parameter."""
    if request.param == "tansu":
        broker = request.getfixturevalue("tansu")
        make, made = consumer_factory(broker.bootstrap_servers)
        yield broker, make
    else:
        from fastmq.broker import EmbeddedBroker
        with EmbeddedBroker(tmp_path / "data", commit_log_file_size=4 << 20,
                            group_initial_rebalance_delay_ms=0) as broker:
            make, made = consumer_factory(broker.bootstrap_servers)
            try:
                yield broker, make
            finally:
                for instance in made:
                    instance.close(timeout=5)
        return
    for instance in made:
        instance.close(timeout=5)


# ---- reading -----------------------------------------------------------------------------------------------

def test_assign_reads_every_partition_in_order(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 400, partition=None, key=b"k")
    for p in range(4):
        produce(kafka_broker.bootstrap_servers, topic, 50, partition=p, value=b"p%d-" % p)
    c = consumer()
    c.assign([TopicPartition(topic, p) for p in range(4)])
    records = poll_until(c, 600)
    assert len(records) == 600
    by_partition: dict[int, list[int]] = {}
    for record in records:
        by_partition.setdefault(record.partition, []).append(record.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    assert sum(len(v) for v in by_partition.values()) == 600


def test_record_fields(kafka_broker, consumer):
    topic = topic_name()
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(topic, b"value", key=b"key", partition=0, timestamp=1_700_000_000_123,
                     headers=[("h1", b"a"), ("h2", None)])
    producer.produce(topic, None, partition=0, timestamp=1_700_000_000_456)
    assert producer.flush(WAIT) == 0
    c = consumer()
    c.assign([TopicPartition(topic, 0)])
    first, tombstone = poll_until(c, 2)
    assert first == ConsumerRecord(topic, 0, first.leader_epoch, 0, 1_700_000_000_123, 0, b"key", b"value",
                                   (("h1", b"a"), ("h2", None)), None, 3, 5, 5)
    assert (tombstone.key, tombstone.value, tombstone.serialized_value_size, tombstone.headers) == (None, None, -1, ())


def test_deserializers_skip_null_keys_and_values(kafka_broker, consumer):
    topic = topic_name()
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(topic, b"41", key=b"k", partition=0)
    producer.produce(topic, None, partition=0)
    assert producer.flush(WAIT) == 0
    c = consumer(key_deserializer=bytes.decode, value_deserializer=lambda v: int(v) + 1)
    c.assign([TopicPartition(topic, 0)])
    assert [(r.key, r.value) for r in poll_until(c, 2)] == [("k", 42), (None, None)]


def test_max_records_consume_and_iteration(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 30)
    tp = TopicPartition(topic, 0)
    c = consumer(consumer_timeout_ms=1000)
    c.assign([tp])
    chunk = c.poll(WAIT, max_records=7)
    assert len(chunk[tp]) == 7
    flat = c.consume(max_records=8, timeout=WAIT)
    assert [r.offset for r in flat] == list(range(7, 15))
    seen = []
    for record in c:                        # consumer_timeout_ms ends the loop
        seen.append(record.offset)
        if record.offset == 20:
            assert c.position(tp) == 21      # the position follows the records handed out
            break
    assert seen == list(range(15, 21))
    assert [r.offset for r in c] == list(range(21, 30))     # nothing skipped after the break
    assert c.position(tp) == 30


def test_seek_pause_resume(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 20, partition=0)
    produce(kafka_broker.bootstrap_servers, topic, 20, partition=1)
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = consumer()
    c.assign([a, b])
    c.pause(b)
    assert c.paused() == {b}
    records = poll_until(c, 20)
    assert {r.partition for r in records} == {0}
    assert c.poll(0.5) == {}
    c.resume(b)
    assert {r.partition for r in poll_until(c, 20)} == {1}
    c.seek(a, 15)
    assert [r.offset for r in poll_until(c, 5)] == [15, 16, 17, 18, 19]
    c.seek_to_beginning(a)
    assert c.position(a) == 0
    assert [r.offset for r in poll_until(c, 20)] == list(range(20))
    assert c.highwater(a) == 20
    with pytest.raises(ValueError):
        c.seek(TopicPartition(topic, 3), 0)
    with pytest.raises(ValueError):
        c.seek(a, -1)


def test_records_of_partitions_no_longer_assigned_are_dropped(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 300, partition=0)
    produce(kafka_broker.bootstrap_servers, topic, 300, partition=1)
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = consumer()
    c.assign([a, b])
    first = c.poll(WAIT, max_records=1)
    time.sleep(0.3)                                 # both partitions are fetched ahead meanwhile
    c.assign([a])
    rest = poll_until(c, 300 - len(first.get(a, [])))
    time.sleep(0.3)
    rest += poll_until(c, 1, timeout=0.5)
    assert {r.partition for r in rest} == {0}
    assert [r.offset for r in first.get(a, []) + rest] == list(range(300))


def test_offset_reset_none_raises_until_a_position_is_set(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 3)
    tp = TopicPartition(topic, 0)
    c = consumer(auto_offset_reset="none")
    c.assign([tp])
    with pytest.raises(kerrors.NoOffsetForPartitionError):
        c.poll(1.0)
    c.seek(tp, 1)
    assert [r.offset for r in poll_until(c, 2)] == [1, 2]


@exact_brokers(TANSU_OUT_OF_RANGE)
def test_an_offset_out_of_range_resets(exact):
    kafka_broker, consumer = exact
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 5)
    tp = TopicPartition(topic, 0)
    c = consumer()
    c.assign([tp])
    c.seek(tp, 1000)
    assert [r.offset for r in poll_until(c, 5, timeout=3.0)] == [0, 1, 2, 3, 4]


def test_beginning_offsets_and_partitions(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 5)
    c = consumer()
    assert c.beginning_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 0}
    assert c.partitions_for_topic(topic) == {0, 1, 2, 3}
    assert topic in c.topics()


@exact_brokers(TANSU_LATEST)
def test_end_offsets_and_seek_to_end(exact):
    kafka_broker, consumer = exact
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 10, batches=2)
    tp = TopicPartition(topic, 0)
    c = consumer()
    assert c.end_offsets([tp]) == {tp: 10}
    c.assign([tp])
    c.seek_to_end(tp)
    assert c.position(tp) == 10


@exact_brokers(TANSU_LATEST)
def test_auto_offset_reset_latest_reads_only_new_records(exact):
    kafka_broker, consumer = exact
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 10, batches=2)
    tp = TopicPartition(topic, 0)
    c = consumer(auto_offset_reset="latest")
    c.assign([tp])
    assert c.position(tp) == 10
    produce(kafka_broker.bootstrap_servers, topic, 1, value=b"new")
    assert [r.value for r in poll_until(c, 1)] == [b"new0"]


@exact_brokers(TANSU_TIMES)
def test_offsets_for_times_uses_record_timestamps(exact):
    kafka_broker, consumer = exact
    topic = topic_name()
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 50})
    base = 1_700_000_000_000
    for i in range(3):
        producer.produce(topic, b"v", partition=0, timestamp=base + 1000 * i)     # one batch
    assert producer.flush(WAIT) == 0
    tp = TopicPartition(topic, 0)
    found = consumer().offsets_for_times({tp: base + 1000})
    assert (found[tp].offset, found[tp].timestamp) == (1, base + 1000)


def test_offsets_for_times_rejects_negative_times(kafka_broker, consumer):
    with pytest.raises(ValueError):
        consumer().offsets_for_times({TopicPartition("x", 0): -5})


@exact_brokers(TANSU_READ_COMMITTED)
def test_read_committed_skips_aborted_transactions(exact):
    broker, consumer = exact
    topic = topic_name()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": f"tx-{uuid.uuid4().hex}"})
    producer.init_transactions(WAIT)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(WAIT)
    producer.abort_transaction(WAIT)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.commit_transaction(WAIT)
    c = consumer(isolation_level="read_committed")
    c.assign([TopicPartition(topic, 0)])
    records = poll_until(c, 1)
    time.sleep(0.5)  # the aborted records stay hidden however long one waits
    records += poll_until(c, 1, timeout=1.0)
    assert [r.value for r in records] == [b"committed"]


# ---- rate limits ------------------------------------------------------------------------------------------

def test_record_rate_limit_caps_what_one_poll_hands_out(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 500)
    tp = TopicPartition(topic, 0)
    c = consumer(max_records_per_second=50)
    c.assign([tp])
    first = c.poll(WAIT, max_records=500)
    assert 1 <= len(first[tp]) <= 51            # one second's worth at most, though 500 are there
    taken = len(first[tp]) + len(c.poll(0.0, max_records=500).get(tp, []))
    assert taken <= 52                          # the bucket is empty: nothing more right away


def test_byte_rate_limit_caps_what_one_poll_hands_out(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 500, value=b"x" * 100)
    tp = TopicPartition(topic, 0)
    c = consumer(max_bytes_per_second=2000)
    c.assign([tp])
    first = c.poll(WAIT, max_records=500)
    assert 1 <= len(first[tp]) <= 25            # about 2000 bytes of ~100-byte records


# ---- commits ------------------------------------------------------------------------------------------------

def test_commit_committed_and_async_callback_on_the_users_thread(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 10)
    tp = TopicPartition(topic, 0)
    c = consumer(group_id=f"g-{topic}", enable_auto_commit=False)
    c.assign([tp])
    assert len(poll_until(c, 10)) == 10
    assert c.committed(tp) is None
    c.commit()
    assert c.committed(tp) == 10
    calls = []
    future = c.commit_async({tp: OffsetAndMetadata(7, "meta", -1)},
                            lambda offsets, result: calls.append((threading.current_thread().name, result)))
    future.result(WAIT)
    assert calls == []                          # callbacks wait for the user's thread ...
    c.poll(0.0)
    assert calls and calls[0][0] == threading.current_thread().name    # ... and run there
    assert c.committed(tp) == 7
    without = consumer()
    with pytest.raises(kerrors.IllegalStateError):
        without.commit()
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):     # not retried: the topic does not exist
        c.commit({TopicPartition(topic_name("none"), 0): OffsetAndMetadata(1, "", -1)}, timeout=WAIT)


@exact_brokers("Tansu 0.6.0 does not store the metadata string of committed offsets")
def test_committed_metadata_is_kept(exact):
    kafka_broker, consumer = exact
    tp = TopicPartition(topic_name(), 0)
    produce(kafka_broker.bootstrap_servers, tp.topic, 1)
    c = consumer(group_id=f"g-{tp.topic}", enable_auto_commit=False)
    c.commit({tp: OffsetAndMetadata(3, "where I was", -1)})
    assert c.committed(tp, metadata=True).metadata == "where I was"


def test_assign_with_group_resumes_from_committed_offsets(kafka_broker, consumer):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 10)
    tp = TopicPartition(topic, 0)
    group = f"g-{topic}"
    first = consumer(group_id=group, enable_auto_commit=False)
    first.assign([tp])
    assert len(poll_until(first, 6)) >= 6
    first.commit({tp: OffsetAndMetadata(6, "", -1)})
    first.close()
    second = consumer(group_id=group)
    second.assign([tp])
    assert [r.offset for r in poll_until(second, 4)] == [6, 7, 8, 9]
    second.close()                              # auto-commit commits the position on close
    assert consumer(group_id=group).committed(tp) == 10


# ---- interoperability: peers' producers in, peers' consumers reading our commits --------------------------

def produce_kafka_python(bootstrap, topic, count, compression):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=5)
    for i in range(count):
        producer.send(topic, b"kp%d" % i, key=b"k%d" % (i % 3), partition=0, headers=[("i", b"%d" % i)])
    producer.flush(WAIT)
    producer.close()


def produce_aiokafka(bootstrap, topic, count, compression):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=5)
        await producer.start()
        try:
            for i in range(count):
                await producer.send(topic, b"kp%d" % i, key=b"k%d" % (i % 3), partition=0, headers=[("i", b"%d" % i)])
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


def produce_confluent(bootstrap, topic, count, compression):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": compression or "none",
                                         "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, b"kp%d" % i, key=b"k%d" % (i % 3), partition=0, headers=[("i", b"%d" % i)])
    assert producer.flush(WAIT) == 0


def produce_fastmq(bootstrap, topic, count, compression):
    from fastmq.kafka import Producer
    with Producer(bootstrap, compression_type=compression, linger_ms=5) as producer:
        for i in range(count):
            producer.send(topic, b"kp%d" % i, key=b"k%d" % (i % 3), partition=0, headers=[("i", b"%d" % i)])
        producer.flush(WAIT)


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("peer", [produce_kafka_python, produce_aiokafka, produce_confluent, produce_fastmq],
                         ids=["kafka-python", "aiokafka", "confluent-kafka", "fastmq"])
def test_reads_what_every_producer_writes(kafka_broker, consumer, peer, compression):
    topic = topic_name()
    peer(kafka_broker.bootstrap_servers, topic, 200, compression)
    c = consumer()
    c.assign([TopicPartition(topic, 0)])
    records = poll_until(c, 200)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (i, b"k%d" % (i % 3), b"kp%d" % i, (("i", b"%d" % i),)) for i in range(200)]


def test_peers_resume_from_our_commits_and_we_from_theirs(kafka_broker, consumer):
    from kafka import KafkaConsumer as PeerConsumer
    from kafka import TopicPartition as PeerTopicPartition
    from kafka.structs import OffsetAndMetadata as PeerOffsetAndMetadata
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic, 30)
    tp = TopicPartition(topic, 0)
    group = f"g-{topic}"
    ours = consumer(group_id=group, enable_auto_commit=False)
    ours.assign([tp])
    ours.commit({tp: OffsetAndMetadata(11, "", -1)})
    ours.close()
    # confluent-kafka and kafka-python, in the same group, start where we committed.
    confluent = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": group,
                                          "enable.auto.commit": False, "fetch.queue.backoff.ms": 0})
    try:
        confluent.assign([confluent_kafka.TopicPartition(topic, 0)])
        messages, deadline = [], time.monotonic() + WAIT
        while not messages and time.monotonic() < deadline:
            messages = confluent.consume(1, 0.5)
        assert messages[0].offset() == 11
        confluent.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 17)], asynchronous=False)
    finally:
        confluent.close()
    assert consumer(group_id=group).committed(tp) == 17
    peer = PeerConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, group_id=group, enable_auto_commit=False)
    try:
        peer_tp = PeerTopicPartition(topic, 0)
        assert peer.committed(peer_tp) == 17
        peer.commit({peer_tp: PeerOffsetAndMetadata(23, "", -1)})
    finally:
        peer.close()
    resumed = consumer(group_id=group)
    resumed.assign([tp])
    assert [r.offset for r in poll_until(resumed, 7)] == list(range(23, 30))


def test_consumes_through_tls(tls_kafka, pki):
    topic = topic_name("tls")
    producer = confluent_kafka.Producer({"bootstrap.servers": tls_kafka.bootstrap_servers, "security.protocol": "ssl",
                                         "ssl.ca.location": str(pki.ca_file)})
    for i in range(5):
        producer.produce(topic, b"v%d" % i, partition=0)
    assert producer.flush(WAIT) == 0
    make, made = consumer_factory(tls_kafka.bootstrap_servers)
    try:
        c = make(security_protocol="SSL", ssl_cafile=pki.ca_file, group_id=f"g-{topic}")
        c.assign([TopicPartition(topic, 0)])
        assert [r.value for r in poll_until(c, 5)] == [b"v%d" % i for i in range(5)]
        c.commit()
        assert c.committed(TopicPartition(topic, 0)) == 5
    finally:
        for instance in made:
            instance.close(timeout=5)
