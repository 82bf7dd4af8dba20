"""One embedded broker speaking TubeMQ and Kafka over one store: a topic written through TubeMQ reads through Kafka
and the other way (a TubeMQ payload is the Kafka record's value)."""
from __future__ import annotations

import pytest

from fastmq.kafka import Consumer as KafkaConsumer
from fastmq.kafka import Producer as KafkaProducer
from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.tubemq import start_tubemq
from tests.tubemq.test_client import FAST, drain


@pytest.fixture(scope="module")
def both():
    cluster = start_tubemq(partitions=2, with_kafka=True)
    host, port = cluster.embedded.addresses[2]
    yield cluster, f"{host}:{port}"
    cluster.embedded.close()


def test_tubemq_write_kafka_read(both):
    cluster, kafka = both
    with Producer(cluster.master, heartbeat_interval=0.5) as producer:
        producer.publish("x-tube-to-kafka")
        for index in range(20):
            producer.send(Message("x-tube-to-kafka", b"t%d" % index))
    with KafkaConsumer("x-tube-to-kafka", bootstrap_servers=kafka, group_id="x1", auto_offset_reset="earliest",
                       consumer_timeout_ms=5000) as consumer:
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 20:
                break
    assert sorted(values) == sorted(b"t%d" % i for i in range(20))


def test_kafka_write_tubemq_read(both):
    cluster, kafka = both
    with KafkaProducer(kafka) as producer:
        for index in range(20):
            producer.send("x-kafka-to-tube", b"k%d" % index)
        producer.flush()
    with PullConsumer(cluster.master, "x2", ["x-kafka-to-tube"], **FAST) as consumer:
        received = drain(consumer, 20)
    assert sorted(m.body for m in received) == sorted(b"k%d" % i for i in range(20))
