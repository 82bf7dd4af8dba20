"""Batch reads of format("fastmq"): what is read equals what was produced, on the embedded broker and on
Apache Kafka."""
from __future__ import annotations

import socket
import uuid

import pytest

from fastmq.kafka import Admin, Producer, TopicPartition
from fastmq.kafka.admin import NewTopic
from tests.spark.conftest import new_topic, reader
from tests.support.brokers import create_served_topic

BASE_TS = 1_700_000_000_000


def produce_mixed(bootstrap_servers: str, topic: str, partitions: int, count: int) -> dict:
    """count records per partition, lz4-compressed, every third key null, odd records with headers; returns
    {(partition, offset): (key, value, headers, timestamp ms)}."""
    sent = {}
    with Producer(bootstrap_servers, linger_ms=20, compression_type="lz4") as producer:
        for p in range(partitions):
            for i in range(count):
                key = None if i % 3 == 0 else f"k{p}-{i}".encode()
                value = f"value {p}-{i}".encode() * (1 + i % 4)
                headers = [("h1", f"x{i}".encode()), ("h2", None)] if i % 2 else None
                ts = BASE_TS + p * 100_000 + i
                producer.send(topic, value, key=key, headers=headers, partition=p, timestamp_ms=ts)
                sent[(p, i)] = (key, value, headers, ts)
        producer.flush(30)
    return sent


@pytest.fixture(scope="module")
def mixed_topic(embedded_broker):
    topic = new_topic(embedded_broker.bootstrap_servers, 3)
    return topic, produce_mixed(embedded_broker.bootstrap_servers, topic, 3, 400)


def check_rows(rows, topic: str, sent: dict) -> None:
    got = {}
    for row in rows:
        assert row.topic == topic and row.timestampType == 0
        headers = None if row.headers is None else [(h.key, h.value) for h in row.headers]
        got[(row.partition, row.offset)] = (row.key, row.value, headers, int(row.timestamp.timestamp() * 1000))
    assert got == sent


def test_batch_read_equals_what_was_produced(spark, embedded_broker, mixed_topic):
    topic, sent = mixed_topic
    df = reader(spark, embedded_broker.bootstrap_servers, topic, includeHeaders="true")
    check_rows(df.collect(), topic, sent)
    assert df.count() == len(sent)
    assert reader(spark, embedded_broker.bootstrap_servers, topic).columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_offset_ranges_split_and_bounded(spark, embedded_broker, mixed_topic):
    topic, _ = mixed_topic
    df = reader(spark, embedded_broker.bootstrap_servers, topic, minPartitions="9",
                startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2, "2": 390}}}}',
                endingOffsets=f'{{"{topic}": {{"0": 20, "1": 100, "2": -1}}}}')
    assert df.rdd.getNumPartitions() >= 9
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == sorted([(0, o) for o in range(10, 20)] + [(1, o) for o in range(100)]
                         + [(2, o) for o in range(390, 400)])


def test_starting_timestamp(spark, embedded_broker, mixed_topic):
    topic, sent = mixed_topic
    df = reader(spark, embedded_broker.bootstrap_servers, topic,
                startingOffsetsByTimestamp=f'{{"{topic}": {{"0": {BASE_TS + 350}, "1": {BASE_TS + 100_000}, '
                                           f'"2": {BASE_TS + 200_395}}}}}')
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == sorted([(0, o) for o in range(350, 400)] + [(1, o) for o in range(400)]
                         + [(2, o) for o in range(395, 400)])
    late = reader(spark, embedded_broker.bootstrap_servers, topic, startingTimestamp=str(BASE_TS + 200_000),
                  startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 400          # partition 2 only: the others' records are all older


def test_read_committed_hides_aborted_transactions(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topic = new_topic(servers, 2)
    with Producer(servers, transactional_id=f"{topic}-txn") as producer:
        producer.init_transactions(30)
        for round_ in range(3):
            producer.begin_transaction()
            for i in range(50):
                producer.send(topic, f"r{round_}-{i}".encode(), partition=i % 2)
            producer.flush(30)                  # an abort drops records not sent yet: these are in the log
            if round_ == 1:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
    with Producer(servers) as plain:
        for i in range(10):
            plain.send(topic, f"plain-{i}".encode(), partition=i % 2)
        plain.flush(30)
    committed = reader(spark, servers, topic, **{"kafka.isolation.level": "read_committed"})
    values = sorted(r.value.decode() for r in committed.select("value").collect())
    assert values == sorted([f"r{r}-{i}" for r in (0, 2) for i in range(50)] + [f"plain-{i}" for i in range(10)])
    assert reader(spark, servers, topic).count() == 160     # read_uncommitted sees the aborted records


def test_timestamp_type_of_a_log_append_time_topic(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topic = f"spark-appended-{uuid.uuid4().hex[:8]}"
    with Admin(servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
        admin.wait_for_topics([topic], timeout=30)
    with Producer(servers) as producer:
        producer.send_many(topic, [b"a", b"b", b"c"], timestamp_ms=1_000_000).get(30)
    rows = reader(spark, servers, topic).collect()
    assert sorted(r.value for r in rows) == [b"a", b"b", b"c"] and {r.timestampType for r in rows} == {1}
    assert all(r.timestamp.timestamp() * 1000 > 1_000_000 for r in rows)     # the broker's append time


def test_fail_on_data_loss_both_ways(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topic = new_topic(servers, 1)
    with Producer(servers) as producer:
        producer.send_many(topic, [b"x%d" % i for i in range(100)], partition=0).get(30)
    starting = f'{{"{topic}": {{"0": 0}}}}'
    with Admin(servers) as admin:
        admin.delete_records({TopicPartition(topic, 0): 40}, timeout=30)
    with pytest.raises(Exception, match=r"offsets \[0, 40\) were deleted"):
        reader(spark, servers, topic, startingOffsets=starting).collect()
    rows = reader(spark, servers, topic, startingOffsets=starting, failOnDataLoss="false").select("offset").collect()
    assert sorted(r.offset for r in rows) == list(range(40, 100))


def test_apache_kafka_batch_read(spark, apache_kafka):
    servers = apache_kafka.bootstrap_servers
    topic = "spark-batch-read"
    create_served_topic(servers, topic, 2)
    sent = produce_mixed(servers, topic, 2, 300)
    check_rows(reader(spark, servers, topic, includeHeaders="true").collect(), topic, sent)


def test_bad_options_missing_topic_and_unreachable_cluster_fail_clearly(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    with pytest.raises(Exception, match="exactly one of the options"):
        spark.read.format("fastmq").option("kafka.bootstrap.servers", servers).load().collect()
    with pytest.raises(Exception, match="startingOffsets"):
        reader(spark, servers, "x", **{"kafka.auto.offset.reset": "earliest"}).collect()
    with pytest.raises(Exception, match="do not exist"):
        reader(spark, servers, "no-such-topic-here").collect()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(Exception, match="KafkaTimeoutError|Failed to update metadata"):
        reader(spark, f"127.0.0.1:{port}", "x", **{"kafka.request.timeout.ms": "2000"}).collect()
