"""format("fastmq-store"): a store directory written by the embedded broker, read without a broker, agrees
with a consumer that read the same topic from the broker; read_committed hides aborted transactions and
timestampType follows the topic's timestamp type, as in the Kafka read."""
from __future__ import annotations

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import Admin, Consumer, Producer
from fastmq.kafka.admin import NewTopic
from tests.spark.conftest import new_topic


def produce_transactions(servers: str, topic: str) -> set[str]:
    """Committed, aborted and plain records on 2 partitions, and a transaction left open; the values a
    read_committed read shows."""
    committed = set()
    with Producer(servers, transactional_id=f"{topic}-txn") as producer:
        producer.init_transactions(30)
        for round_ in range(4):
            producer.begin_transaction()
            values = [f"t{round_}-{i}" for i in range(9)]
            for i, value in enumerate(values):
                producer.send(topic, value.encode(), partition=i % 2)
            producer.flush(30)                  # an abort drops records not sent yet: these are in the log
            if round_ % 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
                committed.update(values)
        with Producer(servers) as plain:
            plain.send_many(topic, [f"p-{i}".encode() for i in range(6)], partition=0).get(30)
            committed.update(f"p-{i}" for i in range(6))
        producer.begin_transaction()
        producer.send(topic, b"open", partition=1)
        producer.flush(30)                      # never ended: the broker closes with it open
    return committed


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store directory: a topic with headers and null keys (and what a consumer read of it), one record in
    another topic, transactions, and a LogAppendTime topic."""
    data_dir = tmp_path_factory.mktemp("store") / "broker"
    with EmbeddedBroker(data_dir) as broker:
        servers = broker.bootstrap_servers
        topic, other, transactions = new_topic(servers, 3), new_topic(servers, 1), new_topic(servers, 2)
        appended = "spark-appended"
        with Admin(servers) as admin:
            admin.create_topics([NewTopic(appended, 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
            admin.wait_for_topics([appended], timeout=30)
        with Producer(servers, linger_ms=5, compression_type="zstd") as producer:
            for i in range(900):
                producer.send(topic, f"v{i}".encode(), key=None if i % 4 == 0 else f"k{i}".encode(),
                              headers=[("n", str(i).encode())] if i % 2 else None, partition=i % 3)
            producer.send(other, b"elsewhere")
            producer.send_many(appended, [b"a%d" % i for i in range(5)], timestamp_ms=1_000_000)
            producer.flush(30)
        committed = produce_transactions(servers, transactions)
        with Consumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000) as consumer:
            consumed = {(r.partition, r.offset): (r.key, r.value, list(r.headers) or None)
                        for r in consumer}
            assert len(consumed) == 900
    return {"dir": str(data_dir), "topic": topic, "consumed": consumed, "transactions": transactions,
            "committed": committed, "appended": appended}


def test_store_read_agrees_with_a_consumer(spark, store, tmp_path):
    data_dir, topic = store["dir"], store["topic"]
    df = spark.read.format("fastmq-store").option("subscribe", topic).option("minPartitions", "6") \
        .option("includeHeaders", "true").load(data_dir)
    assert df.rdd.getNumPartitions() == 6
    rows = df.collect()
    assert {(r.partition, r.offset): (r.key, r.value, None if r.headers is None else
                                      [(h.key, h.value) for h in r.headers]) for r in rows} == store["consumed"]
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}
    # every topic: 900 + 1 + 4 x 9 transactional records, 4 markers, 6 plain, 1 open + 5 appended
    assert spark.read.format("fastmq-store").load(data_dir).count() == 900 + 1 + 36 + 6 + 1 + 5
    with pytest.raises(Exception, match="not in the store"):
        spark.read.format("fastmq-store").option("subscribe", "nope").load(data_dir).collect()
    with pytest.raises(Exception, match="not a message-store directory"):
        spark.read.format("fastmq-store").load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="read_uncommitted or read_committed"):
        spark.read.format("fastmq-store").option("kafka.isolation.level", "serializable").load(data_dir).collect()


def test_store_read_committed_hides_aborted_transactions(spark, store):
    def values(**options: str) -> list[str]:
        read = spark.read.format("fastmq-store").option("subscribe", store["transactions"])
        for name, value in options.items():
            read = read.option(name, value)
        return sorted(r.value.decode() for r in read.load(store["dir"]).select("value").collect())

    # Ranges of 10 records: some markers lie beyond the range whose records they decide.
    committed = values(**{"kafka.isolation.level": "read_committed", "maxRecordsPerPartition": "10"})
    assert committed == sorted(store["committed"])
    assert len(values()) == 36 + 6 + 1                # read_uncommitted shows aborted and open ones too


def test_store_timestamp_type_of_a_log_append_time_topic(spark, store):
    rows = spark.read.format("fastmq-store").option("subscribe", store["appended"]).load(store["dir"]).collect()
    assert sorted(r.value for r in rows) == [b"a%d" % i for i in range(5)]
    assert {r.timestampType for r in rows} == {1}
    assert all(r.timestamp.timestamp() * 1000 > 1_000_000 for r in rows)   # the append time, not the producer's
