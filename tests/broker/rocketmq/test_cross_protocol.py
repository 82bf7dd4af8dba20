"""One store for both protocols: a topic written through RocketMQ reads through Kafka (queue = partition, the
RocketMQ KEYS property as the record key, other properties as headers), and a topic written through Kafka reads
through RocketMQ (the record key as KEYS, headers as properties); offsets are the same numbers on both sides."""
from __future__ import annotations

from fastmq.kafka import Consumer, Producer, TopicPartition
from fastmq.store import decode_messages
from tests.support.waiting import wait_for

from .test_endpoint import PULL, pull_fields, send


def test_rocketmq_writes_kafka_reads(rmq, client):
    for i in range(3):
        send(client, "x-from-rocketmq", b"r%d" % i, queue_id=2, tags="T", properties={"KEYS": f"key-{i}"})
    with Consumer(bootstrap_servers=rmq.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("x-from-rocketmq", 2)])
        records = []

        def read_all() -> bool:
            records.extend(consumer.consume(10, 0.2))
            return len(records) >= 3
        wait_for(read_all, message=lambda: f"Kafka read {len(records)} of 3 records")
    assert [(r.offset, r.key, r.value) for r in records] == [(i, b"key-%d" % i, b"r%d" % i) for i in range(3)]
    assert (b"TAGS" if isinstance(records[0].headers[0][0], bytes) else "TAGS", b"T") in \
        [(name, value) for name, value in records[0].headers]


def test_kafka_writes_rocketmq_reads(rmq, client):
    rmq.broker.topics.create("x-from-kafka", 2)
    with Producer(rmq.bootstrap_servers) as producer:
        for i in range(3):
            producer.send("x-from-kafka", b"k%d" % i, key=b"kafka-key", partition=1,
                          headers=[("h", b"v")]).get(10)
    answer = client.call(PULL, pull_fields("x-from-kafka", 0, queue_id=1))
    messages = decode_messages(answer.body)
    assert [(m.queue_offset, m.body) for m in messages] == [(i, b"k%d" % i) for i in range(3)]
    assert messages[0].properties["KEYS"] == "kafka-key" and messages[0].properties["h"] == "v"
