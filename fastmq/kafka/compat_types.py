"""kafka-python's value objects where fastmq's are expected.

Code written for kafka-python passes its own TopicPartition, OffsetAndMetadata, ConfigResource, NewTopic and
NewPartitions: other classes with the same fields. The compat faces turn any object with those fields into
fastmq's class (fastmq's own pass through untouched) before handing it down, so that fastmq's type checks
hold. An object without the fields is a TypeError naming what was expected.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from fastmq.kafka.admin import ConfigResource, NewPartitions, NewTopic
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition


def _fields(value: Any, what: str, names: tuple[str, ...]) -> list[Any]:
    try:
        return [getattr(value, name) for name in names]
    except AttributeError:
        raise TypeError(f"expected a {what} ({', '.join(names)}), not {value!r}") from None


def topic_partition(value: Any) -> TopicPartition:
    if type(value) is TopicPartition:
        return value
    return TopicPartition(*_fields(value, "TopicPartition", TopicPartition._fields))


def topic_partitions(values: Iterable[Any]) -> list[TopicPartition]:
    return [topic_partition(value) for value in values]


def offset_and_metadata(value: Any) -> OffsetAndMetadata:
    if type(value) is OffsetAndMetadata:
        return value
    return OffsetAndMetadata(*_fields(value, "OffsetAndMetadata", OffsetAndMetadata._fields))


def by_topic_partition(mapping: Any) -> Any:
    """{TopicPartition: value} with the keys as fastmq's TopicPartition (anything not a mapping as it is,
    for the callee to refuse)."""
    if not isinstance(mapping, Mapping):
        return mapping
    return {topic_partition(tp): value for tp, value in mapping.items()}


def offsets_to_commit(mapping: Any) -> Any:
    """{TopicPartition: OffsetAndMetadata} in fastmq's classes (None and non-mappings as they are)."""
    if not isinstance(mapping, Mapping):
        return mapping
    return {topic_partition(tp): offset_and_metadata(meta) for tp, meta in mapping.items()}


def new_topic(value: Any) -> NewTopic:
    if isinstance(value, NewTopic):
        return value
    return NewTopic(*_fields(value, "NewTopic", ("name", "num_partitions", "replication_factor",
                                                 "replica_assignments", "topic_configs")))


def new_partitions(value: Any) -> NewPartitions:
    if isinstance(value, NewPartitions):
        return value
    return NewPartitions(*_fields(value, "NewPartitions", ("total_count", "new_assignments")))


def config_resource(value: Any) -> ConfigResource:
    """A ConfigResource; kafka-python's resource types (IntEnums with Kafka's codes) become fastmq's."""
    if isinstance(value, ConfigResource):
        return value
    resource_type, name, configs = _fields(value, "ConfigResource", ("resource_type", "name", "configs"))
    return ConfigResource(int(resource_type) if hasattr(resource_type, "value") else resource_type, name, configs)
