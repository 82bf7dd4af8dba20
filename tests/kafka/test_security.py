"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) over plain TCP and TLS, against Apache Kafka's own listeners: what
fastmq writes there, confluent-kafka (librdkafka) reads with the same credentials, and the reverse; a wrong
password is refused with the reason named. (Tansu offers neither PLAIN nor users; the embedded broker's
authentication is tested in tests/broker/test_security.py.)"""
from __future__ import annotations

import uuid

import confluent_kafka
import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.producer import Producer
from fastmq.kafka.structs import TopicPartition
from tests.support.apache_kafka import SASL_MECHANISMS
from tests.support.brokers import KAFKA_USERS

WAIT = 30.0
USER, PASSWORD = next(iter(KAFKA_USERS.items()))


def credentials(listener: str, mechanism: str, pki, password: str = PASSWORD) -> dict:
    options = {"security_protocol": listener, "sasl_mechanism": mechanism, "sasl_plain_username": USER,
               "sasl_plain_password": password}
    if listener == "SASL_SSL":
        options["ssl_cafile"] = pki.ca_file
    return options


def librdkafka_credentials(listener: str, mechanism: str, pki) -> dict:
    options = {"security.protocol": listener.lower(), "sasl.mechanism": mechanism, "sasl.username": USER,
               "sasl.password": PASSWORD}
    if listener == "SASL_SSL":
        options["ssl.ca.location"] = pki.ca_file
    return options


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_sasl_logins_carry_records_both_ways_with_librdkafka(apache_kafka, pki, listener, mechanism):
    servers = apache_kafka.listener(listener)
    topic = f"sasl-{uuid.uuid4().hex[:10]}"
    with Producer(servers, **credentials(listener, mechanism, pki)) as producer:
        assert producer.send(topic, b"from fastmq", partition=0).get(WAIT).offset == 0
    peer = confluent_kafka.Producer({"bootstrap.servers": servers, **librdkafka_credentials(listener, mechanism, pki)})
    peer.produce(topic, b"from librdkafka", partition=0)
    assert peer.flush(WAIT) == 0
    reader = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": f"g-{topic}",
                                       "auto.offset.reset": "earliest",
                                       **librdkafka_credentials(listener, mechanism, pki)})
    consumer = Consumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                        **credentials(listener, mechanism, pki))
    try:
        reader.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        theirs = [m.value() for m in reader.consume(2, WAIT) if m.error() is None]
        consumer.assign([TopicPartition(topic, 0)])
        ours: list = []
        for _ in range(60):     # bounded: 60 polls of at most half a second
            ours += [r.value for chunk in consumer.poll(0.5).values() for r in chunk]
            if len(ours) >= 2:
                break
        assert theirs == ours == [b"from fastmq", b"from librdkafka"]
    finally:
        reader.close()
        consumer.close()


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_a_wrong_password_is_refused_naming_the_reason(apache_kafka, pki, mechanism):
    producer = Producer(apache_kafka.listener("SASL_PLAINTEXT"),
                        **credentials("SASL_PLAINTEXT", mechanism, pki, password="not-the-password"),
                        max_block_ms=3000, request_timeout_ms=3000)
    try:
        with pytest.raises(kerrors.KafkaTimeoutError, match="(?i)authentication"):
            producer.send(f"sasl-{uuid.uuid4().hex[:10]}", b"x")
    finally:
        producer.close(0)

