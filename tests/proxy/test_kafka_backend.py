"""The proxy with its Kafka backend in front of real Apache Kafka (the session's KRaft node): produce over HTTP
(one message, a batch) read by a peer Kafka client (kafka-python), records a Kafka producer wrote consumed and acked
over HTTP, and an offset reset to a time through the admin API served from Kafka's ListOffsets by timestamp."""
from __future__ import annotations

import time
import uuid

import pytest

from tests.proxy.client import ProxyClient
from tests.proxy.processes import running_proxy

TOPIC = "proxy-on-apache-kafka"
ADMIN_TOKEN = "kafka-admin"
CONFIG = """
redis_url = "{redis_url}"
namespace = "apache-kafka-{unique}"
admin_token = "kafka-admin"
[producers.ak-writer]
topic = "proxy-on-apache-kafka"
[consumers.ak-reader]
topic = "proxy-on-apache-kafka"
lease_ms = 10000
"""


@pytest.fixture(scope="module")
def kafka_proxy(apache_kafka, redis_url, tmp_path_factory):
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
        admin.wait_for_topics([TOPIC], timeout=30)
    with running_proxy("fastmq-proxy-apache-kafka", tmp_path_factory.mktemp("kafka-proxy"),
                       CONFIG.format(redis_url=redis_url, unique=uuid.uuid4().hex[:8]),
                       apache_kafka.bootstrap_servers) as client:
        yield client


def consume_all(client: ProxyClient, wanted: int) -> list[dict]:
    """Consume and ack until `wanted` messages came (bounded in rounds)."""
    got: list[dict] = []
    for _ in range(40):
        if len(got) >= wanted:
            break
        answer = client.message("ak-reader", max=50, wait_ms=500).json
        got += [dict(m, queue=answer["queue"]) for m in answer["messages"]]
        if answer["token"]:
            assert client.ack("ak-reader", answer["token"]).json == {"ok": True}
    return got


def test_the_proxy_produces_to_and_consumes_from_apache_kafka(kafka_proxy, apache_kafka):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    client = kafka_proxy
    one = client.call("POST", "/produce", query={"producer": "ak-writer", "key": "k1"}, body=b"one",
                      content_type="text/plain", headers={"x-message-header-origin": "http"})
    assert one.status == 200, one.body
    batch = client.produce("ak-writer", [{"value": f"batch-{n}", "key": "k2", "tags": "t"} for n in range(5)])
    assert batch.status == 200, batch.body
    sent = {(int(r["queue"].rpartition(":")[2]), r["offset"]) for r in one.json["results"] + batch.json["results"]}
    assert len(sent) == 6

    # What the proxy produced, as a Kafka peer reads it.
    consumer = KafkaConsumer(bootstrap_servers=apache_kafka.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(2)])
        consumer.seek_to_beginning()
        records = {}
        for record in consumer:
            records[(record.partition, record.offset)] = record
            if set(records) >= sent:
                break
    finally:
        consumer.close()
    assert set(records) >= sent
    by_value = {r.value: r for r in records.values()}
    assert by_value[b"one"].key == b"k1" and (("origin", b"http") in by_value[b"one"].headers)
    assert by_value[b"batch-4"].key == b"k2" and ("tags", b"t") in by_value[b"batch-4"].headers

    # What a Kafka producer wrote, consumed and acked through the proxy with what the proxy wrote.
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap_servers)
    try:
        peer = producer.send(TOPIC, b"from kafka-python", key=b"p", headers=[("via", b"kafka")]).get(30)
    finally:
        producer.close()
    got = consume_all(client, 7)
    assert sorted(m["value"] for m in got) == sorted(["one", "from kafka-python"] + [f"batch-{n}" for n in range(5)])
    from_peer = next(m for m in got if m["value"] == "from kafka-python")
    assert from_peer["offset"] == peer.offset and from_peer["key"] == "p" and from_peer["headers"] == {"via": "kafka"}
    assert client.message("ak-reader", max=10).json["status"] == "empty"

    # An offset reset to a time: Apache Kafka's ListOffsets by timestamp says where each partition goes back to.
    admin = ProxyClient(client.port, ADMIN_TOKEN)
    reset = admin.call("POST", "/admin/consumers/ak-reader/reset", json_body={"to": 0})
    assert reset.status == 200, reset.body
    assert len(consume_all(client, 7)) == 7
    after = admin.call("POST", "/admin/consumers/ak-reader/reset", json_body={"to": int(time.time() * 1000) + 60_000})
    assert after.status == 200, after.body
    assert client.message("ak-reader", max=10).json["status"] == "empty"
