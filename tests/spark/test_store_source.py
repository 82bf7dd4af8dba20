"""format("fastmq-store"): a store directory written by the embedded broker, read without a broker, agrees
with a consumer that read the same topic from the broker."""
from __future__ import annotations

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import Consumer, Producer
from tests.spark.conftest import new_topic


def test_store_read_agrees_with_a_consumer(spark, tmp_path):
    data_dir = tmp_path / "broker"
    with EmbeddedBroker(data_dir) as broker:
        servers = broker.bootstrap_servers
        topic = new_topic(servers, 3)
        other = new_topic(servers, 1)
        with Producer(servers, linger_ms=5, compression_type="zstd") as producer:
            for i in range(900):
                producer.send(topic, f"v{i}".encode(), key=None if i % 4 == 0 else f"k{i}".encode(),
                              headers=[("n", str(i).encode())] if i % 2 else None, partition=i % 3)
            producer.send(other, b"elsewhere")
            producer.flush(30)
        with Consumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000) as consumer:
            consumed = {(r.partition, r.offset): (r.key, r.value, list(r.headers) or None)
                        for r in consumer}
            assert len(consumed) == 900
    df = spark.read.format("fastmq-store").option("subscribe", topic).option("minPartitions", "6") \
        .option("includeHeaders", "true").load(str(data_dir))
    assert df.rdd.getNumPartitions() == 6
    rows = df.collect()
    assert {(r.partition, r.offset): (r.key, r.value, None if r.headers is None else
                                      [(h.key, h.value) for h in r.headers]) for r in rows} == consumed
    assert {r.topic for r in rows} == {topic}
    assert spark.read.format("fastmq-store").load(str(data_dir)).count() == 901     # every topic
    with pytest.raises(Exception, match="not in the store"):
        spark.read.format("fastmq-store").option("subscribe", "nope").load(str(data_dir)).collect()
    with pytest.raises(Exception, match="not a message-store directory"):
        spark.read.format("fastmq-store").load(str(tmp_path)).collect()
