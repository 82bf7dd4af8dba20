"""fastmq.kafka.compat_consumer.KafkaConsumer: kafka-python's KafkaConsumer, checked against kafka-python itself
(configuration, records read from the same topic, errors) with a real broker (Tansu)."""
from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest
from kafka import KafkaConsumer as PeerConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener as PeerListener
from kafka.serializer import Deserializer

from fastmq.kafka import errors as kerrors
from fastmq.kafka.compat_consumer import CONSUMER_DEFAULTS, KafkaConsumer
from fastmq.kafka.structs import ConsumerRecord, TopicPartition

WAIT = 20.0


def topic_name() -> str:
    return f"k-{uuid.uuid4().hex[:10]}"


def produce(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce(topic, b"value-%d" % i if i % 7 else None, key=b"k%d" % i if i % 2 else None,
                         partition=i % 2, headers=[("n", b"%d" % i), ("empty", None)] if i % 3 else None)
    assert producer.flush(WAIT) == 0


def read_all(consumer, count: int) -> list:
    records, deadline = [], time.monotonic() + WAIT
    while len(records) < count and time.monotonic() < deadline:
        for tp, chunk in consumer.poll(timeout_ms=500).items():
            assert isinstance(chunk, list)
            records.extend(chunk)
    return records


def test_configuration_keys_and_defaults_are_kafka_pythons():
    peer = PeerConsumer.DEFAULT_CONFIG
    assert set(CONSUMER_DEFAULTS) == set(peer) and len(peer) == 65
    objects = {"client_id", "default_offset_commit_callback", "partition_assignment_strategy", "socket_options",
               "selector", "kafka_client"}          # per-instance objects of kafka-python's internals
    for key, value in peer.items():
        if key not in objects:
            assert CONSUMER_DEFAULTS[key] == value, key
    with pytest.raises(kerrors.KafkaConfigurationError, match="Unrecognized configs"):
        KafkaConsumer(bootstrap_servers="127.0.0.1:1", not_a_key=1)
    with pytest.raises(kerrors.KafkaConfigurationError):
        KafkaConsumer(bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=40000)
    with pytest.raises(kerrors.KafkaConfigurationError):
        KafkaConsumer(bootstrap_servers="127.0.0.1:1", group_instance_id="x")


def test_no_reachable_broker_is_a_timeout_at_construction():
    with pytest.raises(kerrors.KafkaTimeoutError):
        KafkaConsumer(bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=300)


def as_fields(record) -> tuple:
    return (record.topic, record.partition, record.offset, record.timestamp, record.timestamp_type, record.key,
            record.value, list(record.headers), record.checksum, record.serialized_key_size,
            record.serialized_value_size, record.serialized_header_size)


def test_records_are_what_kafka_python_returns(kafka_broker):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic)
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    peer = PeerConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest")
    ours = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest")
    try:
        peer.assign(partitions)
        ours.assign(partitions)
        expected = sorted(as_fields(r) for r in read_all(peer, 30))
        got = read_all(ours, 30)
        assert all(type(r) is ConsumerRecord and isinstance(r.headers, list) for r in got)
        assert sorted(as_fields(r) for r in got) == expected and len(expected) == 30
    finally:
        peer.close()
        ours.close()


def test_assigned_topics_are_looked_up_without_waiting_for_the_metadata_backoff(kafka_broker):
    """The consumer fetched metadata at construction (as kafka-python does); the topic assigned after it is
    looked up at once, not after retry_backoff_ms (which spaces refreshes for stale metadata): with a backoff
    far beyond WAIT, the records still arrive."""
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                             retry_backoff_ms=600_000)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert len(read_all(consumer, 30)) == 30
    finally:
        consumer.close()


def test_topics_without_a_group_id_are_read_whole_as_kafka_python_does(kafka_broker):
    """KafkaConsumer(topic) without group_id (kafka-python's README example): every partition of the topic is
    assigned to the consumer itself, no group is joined."""
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic)
    options = dict(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                   consumer_timeout_ms=3000)
    peer, ours = PeerConsumer(topic, **options), KafkaConsumer(topic, **options)
    try:
        expected = sorted((r.partition, r.offset, r.value) for r in peer)
        got = sorted((r.partition, r.offset, r.value) for r in ours)
        assert got == expected and len(got) == 30
        assert ours.assignment() == peer.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1),
                                                           TopicPartition(topic, 2), TopicPartition(topic, 3)}
        assert ours.subscription() == peer.subscription() == {topic}
        with pytest.raises(kerrors.IllegalStateError):
            ours.assign([TopicPartition(topic, 0)])
    finally:
        peer.close()
        ours.close()


class Upper(Deserializer):
    def __init__(self):
        self.closed = False

    def deserialize(self, topic, headers, data):
        return None if data is None else (topic, len(headers), data.upper())

    def close(self):
        self.closed = True


def test_deserializers_as_kafka_python_calls_them(kafka_broker):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic)
    upper = Upper()
    with pytest.warns(DeprecationWarning):
        ours = KafkaConsumer(topic, bootstrap_servers=kafka_broker.bootstrap_servers, group_id=f"g-{topic}",
                             auto_offset_reset="earliest", session_timeout_ms=6000, value_deserializer=upper,
                             key_deserializer=lambda data: "null" if data is None else data.decode())
    try:
        records = read_all(ours, 30)
        first = next(r for r in records if r.partition == 1 and r.offset == 0)      # i = 1
        assert first.key == "k1" and first.value == (topic, 2, b"VALUE-1")
        assert any(r.key == "null" for r in records)          # function deserializers see nulls too
        assert any(r.value is None for r in records)
    finally:
        ours.close()
    assert upper.closed


def test_poll_iteration_and_errors(kafka_broker):
    topic = topic_name()
    produce(kafka_broker.bootstrap_servers, topic)
    tp = TopicPartition(topic, 0)
    ours = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                         consumer_timeout_ms=500)
    try:
        with pytest.raises(ValueError):
            ours.poll(timeout_ms=-1)
        with pytest.raises(TypeError):
            ours.poll(max_records="3")
        with pytest.raises(kerrors.IllegalStateError):
            ours.position(tp)
        ours.assign([tp])
        with pytest.raises(kerrors.IllegalStateError):
            ours.subscribe([topic])
        assert len(ours.poll(timeout_ms=WAIT * 1000, max_records=4)[tp]) == 4
        assert [r.offset for r in ours] == list(range(4, 15))
        assert ours.position(tp) == 15 and ours.highwater(tp) == 15
        with pytest.raises(kerrors.IllegalStateError):
            ours.commit()
        with pytest.raises(TypeError):
            ours.seek_to_beginning(0)
        ours.seek_to_beginning()
        assert ours.position(tp) == 0
    finally:
        ours.close()
    with pytest.raises(kerrors.IllegalStateError):
        ours.poll()
    assert list(ours) == []


def test_subscribe_checks_its_arguments(kafka_broker):
    ours = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, group_id="g-args")
    try:
        with pytest.raises(ValueError):
            ours.subscribe()
        with pytest.raises(TypeError):
            ours.subscribe("just-a-string")
        with pytest.raises(TypeError):
            ours.subscribe(["t"], listener=object())

        class Listener(PeerListener):
            def on_partitions_revoked(self, revoked):
                pass

            def on_partitions_assigned(self, assigned):
                pass

        ours.subscribe(["t"], listener=Listener())
        assert ours.subscription() == {"t"}
        with pytest.raises(kerrors.IllegalStateError):
            ours.assign([TopicPartition("t", 0)])
        ours.unsubscribe()
        assert ours.subscription() is None
        ours.subscribe(pattern="^k-.*")
    finally:
        ours.close()


@pytest.mark.slow
def test_pattern_subscription_follows_new_topics(kafka_broker):
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    first, second = f"{prefix}-a", f"{prefix}-b"
    produce(kafka_broker.bootstrap_servers, first)
    ours = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, group_id=f"g-{prefix}",
                         auto_offset_reset="earliest", session_timeout_ms=6000, metadata_max_age_ms=500)
    try:
        ours.subscribe(pattern=f"^{prefix}-.*")
        assert {r.topic for r in read_all(ours, 30)} == {first}
        produce(kafka_broker.bootstrap_servers, second)
        records = read_all(ours, 30)
        assert {r.topic for r in records} == {second} and len(records) == 30
        assert ours.subscription() == {first, second}
    finally:
        ours.close()
