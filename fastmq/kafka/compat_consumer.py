"""kafka-python 3.x's KafkaConsumer on fastmq's consumer: change `from kafka import KafkaConsumer` into
`from fastmq.kafka.compat import KafkaConsumer` and nothing else.

kafka-python's 65 keyword arguments with its defaults (an unknown one raises KafkaConfigurationError, as
there), its methods with their signatures (timeouts in ms), iteration, poll(timeout_ms, max_records) returning
{TopicPartition: [ConsumerRecord]}, records shaped exactly as kafka-python's (headers a list; records without
headers share one read-only empty list, copied with list(); deserializers
also called for null keys and values, kafka.serializer.Deserializer objects called with (topic, headers,
data)), and its errors (fastmq.kafka.errors under kafka-python's names). Settings that only tune kafka-python's
own internals (selector, kafka_client, metric reporters, client_dns_lookup, api_version) are accepted and have
no effect.
"""
from __future__ import annotations

import logging
import warnings
from typing import Any

from fastmq.closeable import Closeable
from fastmq.kafka import errors as kerrors
from fastmq.kafka.compat_config import CONNECTION_DEFAULTS, Unset, client_options, resolve
from fastmq.kafka.compat_types import by_topic_partition, offsets_to_commit, topic_partition, topic_partitions
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.group_config import ConsumerRebalanceListener
from fastmq.kafka.structs import TopicPartition

_log = logging.getLogger(__name__)


CONSUMER_DEFAULTS: dict[str, Any] = {
    **CONNECTION_DEFAULTS,
    "client_rack": "",
    "group_id": None,
    "group_instance_id": None,
    "key_deserializer": None,
    "value_deserializer": None,
    "enable_incremental_fetch_sessions": True,
    "fetch_max_wait_ms": 500,
    "fetch_min_bytes": 1,
    "fetch_max_bytes": 52428800,
    "max_partition_fetch_bytes": 1 * 1024 * 1024,
    "auto_offset_reset": "latest",
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "default_offset_commit_callback": Unset,
    "check_crcs": True,
    "isolation_level": "read_uncommitted",
    "allow_auto_create_topics": True,
    "partition_assignment_strategy": ("range", "roundrobin"),
    "max_poll_records": 500,
    "max_poll_interval_ms": 300000,
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "consumer_timeout_ms": float("inf"),
    "ssl_ciphers": None,
    "metrics_enabled": True,
    "metric_group_prefix": "consumer",
    "exclude_internal_topics": True,
}

# The consumer's own settings, passed to fastmq's Consumer as they are (connection settings go through
# compat_config.client_options).
_CONSUMER_KEYS = (
    "client_rack", "group_id", "group_instance_id", "enable_incremental_fetch_sessions", "fetch_max_wait_ms",
    "fetch_min_bytes", "fetch_max_bytes", "max_partition_fetch_bytes", "auto_offset_reset", "enable_auto_commit",
    "auto_commit_interval_ms", "check_crcs", "isolation_level", "partition_assignment_strategy",
    "max_poll_records", "max_poll_interval_ms", "session_timeout_ms", "heartbeat_interval_ms",
    "consumer_timeout_ms", "exclude_internal_topics",
)


def _deserializer(deserializer: Any) -> Any:
    """kafka-python 3 deserializers: an object with deserialize(topic, headers, data), or a function of data
    (which kafka-python wraps, with a DeprecationWarning)."""
    if deserializer is None:
        return None
    method = getattr(deserializer, "deserialize", None)
    if method is not None:
        def call(topic: str, headers: Any, data: Any) -> Any:
            try:
                return method(topic, headers, data)
            except TypeError:
                return method(topic, data)     # kafka-python's fallback for 2-argument deserializers
        return call
    return lambda topic, headers, data: deserializer(data)


def _is_listener(listener: Any) -> bool:
    if isinstance(listener, ConsumerRebalanceListener):
        return True
    try:
        from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
        from kafka.consumer.subscription_state import ConsumerRebalanceListener as KafkaPythonListener
    except ImportError:
        return False
    return isinstance(listener, (KafkaPythonListener, AsyncConsumerRebalanceListener))


class KafkaConsumer(Closeable):
    """kafka-python's KafkaConsumer on fastmq's Consumer (same keywords, defaults, results and errors)."""

    DEFAULT_CONFIG = CONSUMER_DEFAULTS

    def __init__(self, *topics: str, **configs: Any) -> None:
        config = resolve(configs, CONSUMER_DEFAULTS, kind="consumer", unknown_error=kerrors.KafkaConfigurationError)
        if config["auto_offset_reset"] in ("smallest", "largest"):
            replacement = {"smallest": "earliest", "largest": "latest"}[config["auto_offset_reset"]]
            _log.warning("use auto_offset_reset=%s (%s is deprecated)", replacement, config["auto_offset_reset"])
            config["auto_offset_reset"] = replacement
        for key in ("key_deserializer", "value_deserializer"):
            if config[key] is not None and not hasattr(config[key], "deserialize"):
                warnings.warn(f"{key} does not implement kafka.serializer.Deserializer", DeprecationWarning,
                              stacklevel=2)
        self.config = config
        options = {**client_options(config, exclude=("bootstrap_servers",)),
                   **{k: config[k] for k in _CONSUMER_KEYS}}
        if config["default_offset_commit_callback"] is not Unset:
            options["default_offset_commit_callback"] = config["default_offset_commit_callback"]
        self._consumer = Consumer(
            bootstrap_servers=config["bootstrap_servers"],
            key_deserializer=_deserializer(config["key_deserializer"]),
            value_deserializer=_deserializer(config["value_deserializer"]),
            deserializer_context=True, deserialize_null=True, tuple_headers=False, **options)
        try:
            self._consumer.client.bootstrap(config["bootstrap_timeout_ms"] / 1000.0)
            if topics:
                self.subscribe(list(topics))
        except BaseException:
            self._consumer.close(autocommit=False, timeout=0)
            raise

    @staticmethod
    def _seconds(timeout_ms: float | None) -> float | None:
        return None if timeout_ms is None else timeout_ms / 1000.0

    # ---- kafka-python's methods ------------------------------------------------------------------------------

    def bootstrap_connected(self) -> bool:
        return self._consumer.client.cluster.version > 0

    def bootstrap(self, timeout_ms: float | None = None, refresh: bool = False) -> None:
        if refresh:
            version = self._consumer.client.request_update()
            if not self._consumer.client.wait_for_metadata(version, 3600.0 if timeout_ms is None else timeout_ms / 1000.0):
                raise kerrors.KafkaTimeoutError("metadata refresh did not finish in time")
            return
        self._consumer.client.bootstrap(3600.0 if timeout_ms is None else timeout_ms / 1000.0)

    def assign(self, partitions: list[TopicPartition]) -> None:
        if self._consumer._subscriptions.group_managed:
            raise kerrors.IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        self._consumer.assign(topic_partitions(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    def subscribe(self, topics: Any = (), pattern: str | None = None, listener: Any = None) -> None:
        if not topics and not pattern:
            raise ValueError("Must provide topics or pattern")
        if topics and pattern:
            raise kerrors.IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if topics and (isinstance(topics, str) or not hasattr(topics, "__iter__")):
            raise TypeError("Topics must be a list (or non-str sequence)")
        if listener is not None and not _is_listener(listener):
            raise TypeError("listener must be a ConsumerRebalanceListener or AsyncConsumerRebalanceListener")
        # Without a group_id the consumer takes every partition of the topics itself, following the metadata,
        # as kafka-python does.
        self._consumer.subscribe(topics, pattern, listener)

    def subscription(self) -> set[str] | None:
        return self._consumer.subscription()

    def unsubscribe(self) -> None:
        self._consumer.unsubscribe()

    def poll(self, timeout_ms: float = 0, max_records: int | None = None, update_offsets: bool = True) -> dict[Any, Any]:
        if timeout_ms < 0:
            raise ValueError("Timeout must not be negative")
        if max_records is not None:
            if not isinstance(max_records, int):
                raise TypeError("max_records must be an integer")
            if max_records <= 0:
                raise ValueError("max_records must be positive")
        if self._consumer._closed:
            raise kerrors.IllegalStateError("KafkaConsumer is closed")
        return self._consumer.poll(timeout_ms / 1000.0, max_records)

    def __iter__(self) -> "KafkaConsumer":
        return self

    def __next__(self) -> Any:
        return next(self._consumer)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._consumer.seek(topic_partition(partition), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._consumer.seek_to_beginning(*topic_partitions(partitions))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._consumer.seek_to_end(*topic_partitions(partitions))

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int | None:
        return self._consumer.position(topic_partition(partition), self._seconds(timeout_ms))

    def highwater(self, partition: TopicPartition) -> int | None:
        partition = topic_partition(partition)
        if partition not in self._consumer._subscriptions.assignment:
            raise kerrors.IllegalStateError("Partition is not assigned")
        return self._consumer.highwater(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*topic_partitions(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*topic_partitions(partitions))

    def paused(self) -> set[TopicPartition]:
        return self._consumer.paused()

    def commit(self, offsets: dict[Any, Any] | None = None, timeout_ms: float | None = None) -> None:
        self._consumer.commit(offsets_to_commit(offsets), self._seconds(timeout_ms))

    def commit_async(self, offsets: dict[Any, Any] | None = None, callback: Any = None) -> Any:
        return self._consumer.commit_async(offsets_to_commit(offsets), callback)

    def committed(self, partition: TopicPartition, metadata: bool = False, timeout_ms: float | None = None) -> Any:
        return self._consumer.committed(topic_partition(partition), metadata, self._seconds(timeout_ms))

    def group_metadata(self) -> Any:
        return self._consumer.group_metadata()

    def offsets_for_times(self, timestamps: dict[Any, Any], timeout_ms: float | None = None) -> dict[Any, Any]:
        return self._consumer.offsets_for_times(by_topic_partition(timestamps), self._seconds(timeout_ms))

    def beginning_offsets(self, partitions: list[Any], timeout_ms: float | None = None) -> dict[Any, Any]:
        return self._consumer.beginning_offsets(topic_partitions(partitions), self._seconds(timeout_ms))

    def end_offsets(self, partitions: list[Any], timeout_ms: float | None = None) -> dict[Any, Any]:
        return self._consumer.end_offsets(topic_partitions(partitions), self._seconds(timeout_ms))

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._consumer.partitions_for_topic(topic)

    def topics(self) -> set[str]:
        return self._consumer.topics()

    def metrics(self, raw: bool = False) -> dict[Any, Any] | None:
        if not self.config["metrics_enabled"]:
            return None
        return self._consumer.metrics()

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        if self._consumer._closed:
            return
        try:
            self._consumer.close(autocommit, self._seconds(timeout_ms))
        finally:
            for key in ("key_deserializer", "value_deserializer"):
                close = getattr(self.config[key], "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:
                        _log.debug("closing the %s failed", key, exc_info=True)

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(autocommit=exc_type is None)
