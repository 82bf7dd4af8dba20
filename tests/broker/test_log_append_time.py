"""LogAppendTime topics on the embedded broker: records take the broker's time when appended, every client reads
that time as a LogAppendTime timestamp, offsets by time follow it, and the type is fixed at creation."""
from __future__ import annotations

import time

import pytest

from fastmq.kafka import Consumer, Producer, TopicPartition
from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import Admin, ConfigResource, NewTopic

WAIT = 30.0
OLD = 1_000_000                             # a create time long before any append time


def create(broker, name: str, timestamp_type: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs={"message.timestamp.type": timestamp_type})])


def produce_in_two_requests(broker, topic: str) -> list:
    """Two batches of 3 records (each flushed as one batch) a few milliseconds apart, stamped long ago; their
    metadata."""
    metadata = []
    with Producer(broker.bootstrap_servers, linger_ms=60_000) as producer:
        for round_ in range(2):
            futures = [producer.send(topic, b"v%d-%d" % (round_, i), timestamp_ms=OLD + i) for i in range(3)]
            producer.flush(WAIT)
            metadata += [future.get(WAIT) for future in futures]
            time.sleep(0.02)  # the second round is appended at a later time
    return metadata


def read_all(broker, topic: str, count: int) -> list:
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got, deadline = [], time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            got += consumer.consume(100, 0.5)
        return got


def test_records_take_the_append_time_and_clients_read_it_as_such(broker):
    create(broker, "appended", "LogAppendTime")
    before = int(time.time() * 1000)
    metadata = produce_in_two_requests(broker, "appended")
    after = int(time.time() * 1000)
    stamps = [m.timestamp for m in metadata]
    # The producer's futures carry the broker's append time (ProduceResponse.log_append_time_ms).
    assert all(before <= stamp <= after for stamp in stamps)
    assert len(set(stamps[:3])) == 1 and len(set(stamps[3:])) == 1 and stamps[0] < stamps[3]

    records = read_all(broker, "appended", 6)
    assert [(r.value, r.timestamp, r.timestamp_type) for r in records] == [
        (b"v%d-%d" % (i // 3, i % 3), stamps[i], 1) for i in range(6)]

    from kafka import KafkaConsumer
    peer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                         consumer_timeout_ms=int(WAIT * 1000))
    try:
        peer.assign([__import__("kafka").TopicPartition("appended", 0)])
        seen = [next(peer) for _ in range(6)]
    finally:
        peer.close()
    assert [(r.timestamp, r.timestamp_type) for r in seen] == [(stamp, 1) for stamp in stamps]

    import confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lat",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition("appended", 0, 0)])
        messages, deadline = [], time.monotonic() + WAIT
        while len(messages) < 6 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    assert [m.timestamp() for m in messages] == [(confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, s) for s in stamps]


def test_offsets_by_time_follow_the_append_time(broker):
    create(broker, "appended", "LogAppendTime")
    stamps = [m.timestamp for m in produce_in_two_requests(broker, "appended")]
    partition = TopicPartition("appended", 0)
    with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
        found = consumer.offsets_for_times({partition: stamps[0] - 1})[partition]
        assert (found.offset, found.timestamp) == (0, stamps[0])
        found = consumer.offsets_for_times({partition: stamps[0] + 1})[partition]
        assert (found.offset, found.timestamp) == (3, stamps[3])
        # The create times the producer wrote are gone: nothing is as old as they were.
        assert consumer.offsets_for_times({partition: OLD})[partition].offset == 0


def test_a_create_time_topic_keeps_the_producers_timestamps(broker):
    create(broker, "created", "CreateTime")
    metadata = produce_in_two_requests(broker, "created")
    assert [m.timestamp for m in metadata] == [OLD + i % 3 for i in range(6)]
    assert [(r.timestamp, r.timestamp_type) for r in read_all(broker, "created", 6)] == [
        (OLD + i % 3, 0) for i in range(6)]


def test_the_timestamp_type_is_fixed_when_the_topic_is_created(broker):
    create(broker, "appended", "LogAppendTime")
    with Admin(broker.bootstrap_servers) as admin:
        for change in (admin.incremental_alter_configs, admin.alter_configs):
            with pytest.raises(kerrors.InvalidConfigurationError, match="message.timestamp.type"):
                change([ConfigResource("TOPIC", "appended", {"message.timestamp.type": "CreateTime"})])
        # Setting what it already is, or changing something else, is fine.
        admin.incremental_alter_configs([ConfigResource("TOPIC", "appended",
                                                        {"message.timestamp.type": "LogAppendTime"})])
        admin.incremental_alter_configs([ConfigResource("TOPIC", "appended", {"retention.ms": "1000"})])
        described = admin.describe_configs([ConfigResource("TOPIC", "appended")])
        (configs,) = described.values()
        assert configs.entries["message.timestamp.type"].value == "LogAppendTime"
        with pytest.raises(kerrors.InvalidConfigurationError):
            admin.create_topics([NewTopic("bogus", 1, 1, topic_configs={"message.timestamp.type": "Whenever"})])
