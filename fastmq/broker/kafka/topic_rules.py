"""Kafka's rules for topics, which the Kafka front end gives the broker's core (TopicManager.add_rules): legal
names (org.apache.kafka.common.internals.Topic) and the topic configs this broker knows, with Kafka's defaults;
and what the Kafka front end reads from a topic's configs.
"""
from __future__ import annotations

import re

from fastmq.broker.topics import Topic, TopicConfigDef, TopicRules

# Letters, digits, '.', '_', '-'; at most 249 characters; not '.' or '..'.
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
MAX_MESSAGE_BYTES = "max.message.bytes"
TIMESTAMP_TYPE = "message.timestamp.type"


def _positive_int(value: str) -> bool:
    return value.isdigit() and 0 < int(value) < 2 ** 31


def _long(value: str) -> bool:
    return re.fullmatch(r"-?\d{1,19}", value) is not None


def _boolean(value: str) -> bool:
    return value in ("true", "false")


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    # Acted on.
    MAX_MESSAGE_BYTES: TopicConfigDef("1048588", True, _positive_int),
    "cleanup.policy": TopicConfigDef("delete", True, lambda v: v == "delete"),
    "compression.type": TopicConfigDef("producer", True, lambda v: v == "producer"),
    TIMESTAMP_TYPE: TopicConfigDef("CreateTime", True, lambda v: v in ("CreateTime", "LogAppendTime"), fixed=True),
    "min.insync.replicas": TopicConfigDef("1", True, lambda v: v == "1"),
    # Stored and reported, not acted on: the store's retention is the same for every topic.
    "retention.ms": TopicConfigDef("604800000", False, _long),
    "retention.bytes": TopicConfigDef("-1", False, _long),
    "segment.bytes": TopicConfigDef("1073741824", False, _positive_int),
    "segment.ms": TopicConfigDef("604800000", False, _long),
    "delete.retention.ms": TopicConfigDef("86400000", False, _long),
    "file.delete.delay.ms": TopicConfigDef("60000", False, _long),
    "flush.messages": TopicConfigDef("9223372036854775807", False, _long),
    "flush.ms": TopicConfigDef("9223372036854775807", False, _long),
    "index.interval.bytes": TopicConfigDef("4096", False, _positive_int),
    "message.timestamp.difference.max.ms": TopicConfigDef("9223372036854775807", False, _long),
    "min.cleanable.dirty.ratio": TopicConfigDef("0.5", False),
    "min.compaction.lag.ms": TopicConfigDef("0", False, _long),
    "max.compaction.lag.ms": TopicConfigDef("9223372036854775807", False, _long),
    "preallocate": TopicConfigDef("false", False, _boolean),
    "unclean.leader.election.enable": TopicConfigDef("false", False, _boolean),
    "message.downconversion.enable": TopicConfigDef("true", False, _boolean),
}


def _legal_name(name: str) -> bool:
    return TOPIC_NAME.fullmatch(name) is not None and name not in (".", "..")


def kafka_topic_rules(max_message_bytes: int) -> TopicRules:
    """Kafka's rules; max_message_bytes, the broker's message.max.bytes, becomes each new topic's
    max.message.bytes where it differs from Kafka's default."""
    defaults = {} if str(max_message_bytes) == TOPIC_CONFIGS[MAX_MESSAGE_BYTES].default else {
        MAX_MESSAGE_BYTES: str(max_message_bytes)}
    return TopicRules("kafka", _legal_name, "1-249 of [a-zA-Z0-9._-], not '.' or '..'", TOPIC_CONFIGS, defaults)


def max_message_bytes(topic: Topic) -> int:
    """The largest record batch the topic takes."""
    return int(topic.config(MAX_MESSAGE_BYTES))


def log_append_time(topic: Topic) -> bool:
    """Records take the broker's time when appended (message.timestamp.type=LogAppendTime)."""
    return topic.config(TIMESTAMP_TYPE) == "LogAppendTime"
