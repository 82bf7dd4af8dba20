"""fastmq's Kafka client: producer, consumer, admin client, wire protocol and record batches.

    from fastmq.kafka import Producer, Consumer, Admin
    from fastmq.kafka.compat import KafkaProducer, KafkaConsumer, KafkaAdminClient   # kafka-python's API

Names are imported on first use, so that importing a submodule (errors, record) stays cheap.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lazily imported names, for a type checker (the module's __getattr__ gives it Any)
    from fastmq.kafka.admin import Admin as Admin
    from fastmq.kafka.client import KafkaClient as KafkaClient
    from fastmq.kafka.consumer import Consumer as Consumer
    from fastmq.kafka.producer import Producer as Producer
    from fastmq.kafka.structs import ConsumerRecord as ConsumerRecord
    from fastmq.kafka.structs import OffsetAndMetadata as OffsetAndMetadata
    from fastmq.kafka.structs import RecordMetadata as RecordMetadata
    from fastmq.kafka.structs import TopicPartition as TopicPartition

_EXPORTS = {
    "Producer": "fastmq.kafka.producer",
    "Consumer": "fastmq.kafka.consumer",
    "Admin": "fastmq.kafka.admin",
    "KafkaClient": "fastmq.kafka.client",
    "TopicPartition": "fastmq.kafka.structs",
    "OffsetAndMetadata": "fastmq.kafka.structs",
    "RecordMetadata": "fastmq.kafka.structs",
    "ConsumerRecord": "fastmq.kafka.structs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fastmq.kafka' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
