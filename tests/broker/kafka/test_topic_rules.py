"""Kafka's topic rules (fastmq/broker/kafka/topic_rules.py) on the core's TopicManager: names, configs and the
broker-wide message.max.bytes as each new topic's max.message.bytes."""
from __future__ import annotations

import pytest

from fastmq.broker.errors import CoreError, TopicError
from fastmq.broker.kafka.topic_rules import kafka_topic_rules, log_append_time, max_message_bytes
from fastmq.broker.topics import TopicManager
from fastmq.store import MessageStore, MessageStoreConfig


@pytest.fixture
def store(tmp_path):
    with MessageStore(tmp_path / "store", MessageStoreConfig(mapped_file_size_commit_log=1 << 20,
                                                             message_index_enable=False)) as opened:
        yield opened


def kafka_topics(store, max_bytes: int = 1048588) -> TopicManager:
    topics = TopicManager(store, 1)
    topics.add_rules(kafka_topic_rules(max_bytes))
    return topics


def test_kafka_names_are_a_subset_of_the_stores(store):
    topics = kafka_topics(store)
    topics.create("a" * 249)
    for bad in ("a" * 250, "per%cent", "pi|pe", "..", ""):
        with pytest.raises(TopicError) as error:
            topics.create(bad)
        assert error.value.error is CoreError.INVALID_TOPIC_NAME


def test_kafka_configs_are_checked_and_read(store):
    topics = kafka_topics(store)
    topic = topics.create("t", 1, {"message.timestamp.type": "LogAppendTime"})
    assert max_message_bytes(topic) == 1048588 and log_append_time(topic)
    topics.alter_configs("t", {"max.message.bytes": "100"})
    assert max_message_bytes(topic) == 100
    topics.alter_configs("t", {}, ["max.message.bytes"])
    assert max_message_bytes(topic) == 1048588
    for configs in ({"cleanup.policy": "compact"}, {"max.message.bytes": "0"}, {"no.such.config": "1"}):
        with pytest.raises(TopicError) as error:
            topics.create("u", 1, configs)
        assert error.value.error is CoreError.INVALID_CONFIG
    with pytest.raises(TopicError):
        topics.alter_configs("t", {"message.timestamp.type": "CreateTime"})


def test_a_broker_wide_max_message_bytes_becomes_the_topic_default(store):
    topics = kafka_topics(store, 5000)
    assert max_message_bytes(topics.create("small")) == 5000
    assert topics.get("small").configs == {"max.message.bytes": "5000"}
    assert kafka_topics(store).create("default").configs == {}
