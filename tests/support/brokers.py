"""Which Kafka brokers a test runs against. Apache Kafka is the reference: every test runs there and must pass.
Tansu (light, started in milliseconds) runs what it can; where it is known wrong the test says so as a strict
expected failure naming the bug. fastmq's embedded broker runs the tests of features Tansu lacks."""
from __future__ import annotations

import pytest

BROKER_FIXTURES = {"tansu": "tansu", "apache": "apache_kafka", "embedded": "embedded_broker"}
"""Broker name -> the session fixture that starts it (tests/conftest.py)."""

DEFAULT_BROKERS = ("tansu", "apache")
"""The brokers of a test that takes `kafka_broker` and names none."""

KAFKA_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
"""The SASL users of the session's Apache Kafka (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)."""


def on_brokers(*names: str, fixture: str = "kafka_broker"):
    """Parametrize `fixture` (indirectly) with these broker names."""
    unknown = set(names) - set(BROKER_FIXTURES)
    if unknown:
        raise ValueError(f"unknown broker(s) {sorted(unknown)}; known: {sorted(BROKER_FIXTURES)}")
    return pytest.mark.parametrize(fixture, names, indirect=True)


def on_all_brokers(reason: str, raises: type[BaseException] | None = None, fixture: str = "kafka_broker"):
    """Run on every broker, Tansu as a strict expected failure for `reason` (a Tansu bug): for a feature Tansu
    gets wrong, which the embedded broker and Apache Kafka must get right."""
    tansu = pytest.mark.xfail(strict=True, reason=reason, raises=raises)
    return pytest.mark.parametrize(fixture, [pytest.param("tansu", marks=tansu), "embedded", "apache"],
                                   indirect=True)


def create_served_topic(bootstrap_servers: str, name: str, partitions: int, timeout: float = 30.0) -> None:
    """Create a topic and return once the leader of every partition serves it. Apache Kafka answers CreateTopics
    and lists the leaders in Metadata before they took their partitions: a producer's first batches would meet
    NOT_LEADER there (see the report of test_peers_read_exactly_what_was_sent)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic
    from tests.support.waiting import wait_for

    with Admin(bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
        admin.wait_for_topics([name], timeout=timeout)
    # kafka-python, an independent client: its ListOffsets fail while a leader still answers NOT_LEADER.
    probe = KafkaConsumer(bootstrap_servers=bootstrap_servers, request_timeout_ms=3000)

    def served() -> bool:
        try:
            probe.end_offsets([TopicPartition(name, p) for p in range(partitions)])
        except KafkaError:
            return False
        return True

    try:
        wait_for(served, timeout, interval=0.1, message=f"every leader of {name} serving it")
    finally:
        probe.close()
