"""kafka-python 3.x's KafkaConsumer on fastmq's consumer: change `from kafka import KafkaConsumer` into
`from fastmq.kafka.compat import KafkaConsumer` and nothing else.

kafka-python's 65 keyword arguments with its defaults (an unknown one raises KafkaConfigurationError, as
there), its methods with their signatures (timeouts in ms), iteration, poll(timeout_ms, max_records) returning
{TopicPartition: [ConsumerRecord]}, records shaped exactly as kafka-python's (headers a list, deserializers
also called for null keys and values, kafka.serializer.Deserializer objects called with (topic, headers,
data)), and its errors (fastmq.kafka.errors under kafka-python's names). Settings that only tune kafka-python's
own internals (selector, kafka_client, metric reporters, client_dns_lookup, api_version) are accepted and have
no effect.
"""
from __future__ import annotations

import logging
import warnings
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.group import ConsumerRebalanceListener
from fastmq.kafka.structs import TopicPartition

_log = logging.getLogger(__name__)


class _Unset:
    """Marks a kafka-python default whose value is an object created per consumer."""


CONSUMER_DEFAULTS: dict[str, Any] = {
    "bootstrap_servers": "localhost",
    "client_id": _Unset,
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
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 30000,
    "max_in_flight_requests_per_connection": 5,
    "auto_offset_reset": "latest",
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "default_offset_commit_callback": _Unset,
    "check_crcs": True,
    "isolation_level": "read_uncommitted",
    "allow_auto_create_topics": True,
    "metadata_max_age_ms": 5 * 60 * 1000,
    "client_dns_lookup": "use_all_dns_ips",
    "partition_assignment_strategy": ("range", "roundrobin"),
    "max_poll_records": 500,
    "max_poll_interval_ms": 300000,
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "receive_buffer_bytes": None,
    "send_buffer_bytes": None,
    "receive_message_max_bytes": 100_000_000,
    "socket_options": _Unset,
    "consumer_timeout_ms": float("inf"),
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "ssl_check_hostname": True,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_crlfile": None,
    "ssl_password": None,
    "ssl_ciphers": None,
    "api_version": None,
    "bootstrap_timeout_ms": 30000,
    "connections_max_idle_ms": 9 * 60 * 1000,
    "metric_reporters": [],
    "metrics_enabled": True,
    "metrics_num_samples": 2,
    "metrics_sample_window_ms": 30000,
    "metric_group_prefix": "consumer",
    "selector": None,
    "exclude_internal_topics": True,
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "sasl_kerberos_name": None,
    "sasl_kerberos_service_name": "kafka",
    "sasl_kerberos_domain_name": None,
    "sasl_oauth_token_provider": None,
    "proxy_url": None,
    "socks5_proxy": None,
    "kafka_client": None,
}

# Keys passed to fastmq's Consumer as they are (the connection's and the consumer's own).
_PASSED_KEYS = (
    "client_rack", "group_id", "group_instance_id", "enable_incremental_fetch_sessions", "fetch_max_wait_ms",
    "fetch_min_bytes", "fetch_max_bytes", "max_partition_fetch_bytes", "request_timeout_ms", "retry_backoff_ms",
    "reconnect_backoff_ms", "reconnect_backoff_max_ms", "max_in_flight_requests_per_connection",
    "auto_offset_reset", "enable_auto_commit", "auto_commit_interval_ms", "check_crcs", "isolation_level",
    "allow_auto_create_topics", "metadata_max_age_ms", "partition_assignment_strategy", "max_poll_records",
    "max_poll_interval_ms", "session_timeout_ms", "heartbeat_interval_ms", "receive_buffer_bytes",
    "send_buffer_bytes", "receive_message_max_bytes", "consumer_timeout_ms", "security_protocol", "ssl_context",
    "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_crlfile", "ssl_password",
    "ssl_ciphers", "connections_max_idle_ms", "exclude_internal_topics", "sasl_mechanism", "sasl_plain_username",
    "sasl_plain_password",
)
_UNSUPPORTED = {
    "sasl_oauth_token_provider": "SASL OAUTHBEARER", "proxy_url": "connecting through a proxy",
    "socks5_proxy": "connecting through a SOCKS5 proxy",
}
_client_counter = iter(range(1, 1 << 62))


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


class KafkaConsumer:
    """kafka-python's KafkaConsumer on fastmq's Consumer (same keywords, defaults, results and errors)."""

    DEFAULT_CONFIG = CONSUMER_DEFAULTS

    def __init__(self, *topics: str, **configs: Any) -> None:
        unknown = set(configs) - set(CONSUMER_DEFAULTS)
        if unknown:
            raise kerrors.KafkaConfigurationError(f"Unrecognized configs: {unknown}")
        config = {k: (configs[k] if k in configs else v) for k, v in CONSUMER_DEFAULTS.items()}
        for key, feature in _UNSUPPORTED.items():
            if config[key] is not None:
                raise kerrors.KafkaConfigurationError(f"{key}: {feature} is not supported by fastmq yet")
        if config["sasl_mechanism"] == "GSSAPI":
            raise kerrors.KafkaConfigurationError("sasl_mechanism GSSAPI (Kerberos) is not supported by fastmq")
        if config["auto_offset_reset"] in ("smallest", "largest"):
            replacement = {"smallest": "earliest", "largest": "latest"}[config["auto_offset_reset"]]
            _log.warning("use auto_offset_reset=%s (%s is deprecated)", replacement, config["auto_offset_reset"])
            config["auto_offset_reset"] = replacement
        if config["client_id"] is _Unset:
            config["client_id"] = f"kafka-python-consumer-{next(_client_counter)}"
        for key in ("key_deserializer", "value_deserializer"):
            if config[key] is not None and not hasattr(config[key], "deserialize"):
                warnings.warn(f"{key} does not implement kafka.serializer.Deserializer", DeprecationWarning,
                              stacklevel=2)
        self.config = config
        options = {k: config[k] for k in _PASSED_KEYS}
        options["client_id"] = config["client_id"]
        if config["socket_options"] is not _Unset:
            options["socket_options"] = list(config["socket_options"])
        if config["default_offset_commit_callback"] is not _Unset:
            options["default_offset_commit_callback"] = config["default_offset_commit_callback"]
        self._consumer = Consumer(
            bootstrap_servers=config["bootstrap_servers"],
            key_deserializer=_deserializer(config["key_deserializer"]),
            value_deserializer=_deserializer(config["value_deserializer"]),
            deserializer_context=True, deserialize_null=True, tuple_headers=False, **options)
        try:
            self._consumer.client.bootstrap(config["bootstrap_timeout_ms"] / 1000.0)
            if topics:
                self._consumer.subscribe(topics)
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
        self._consumer.assign(partitions)

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
        self._consumer.subscribe(topics, pattern, listener)

    def subscription(self) -> set[str] | None:
        return self._consumer.subscription()

    def unsubscribe(self) -> None:
        self._consumer.unsubscribe()

    def poll(self, timeout_ms: float = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
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
        self._consumer.seek(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._consumer.seek_to_beginning(*partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._consumer.seek_to_end(*partitions)

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int | None:
        return self._consumer.position(partition, self._seconds(timeout_ms))

    def highwater(self, partition: TopicPartition) -> int | None:
        if not isinstance(partition, TopicPartition):
            raise TypeError("partition must be a TopicPartition namedtuple")
        if partition not in self._consumer._subscriptions.assignment:
            raise kerrors.IllegalStateError("Partition is not assigned")
        return self._consumer.highwater(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._consumer.paused()

    def commit(self, offsets: dict | None = None, timeout_ms: float | None = None) -> None:
        self._consumer.commit(offsets, self._seconds(timeout_ms))

    def commit_async(self, offsets: dict | None = None, callback: Any = None) -> Any:
        return self._consumer.commit_async(offsets, callback)

    def committed(self, partition: TopicPartition, metadata: bool = False, timeout_ms: float | None = None) -> Any:
        return self._consumer.committed(partition, metadata, self._seconds(timeout_ms))

    def group_metadata(self) -> Any:
        return self._consumer.group_metadata()

    def offsets_for_times(self, timestamps: dict, timeout_ms: float | None = None) -> dict:
        return self._consumer.offsets_for_times(timestamps, self._seconds(timeout_ms))

    def beginning_offsets(self, partitions: list, timeout_ms: float | None = None) -> dict:
        return self._consumer.beginning_offsets(partitions, self._seconds(timeout_ms))

    def end_offsets(self, partitions: list, timeout_ms: float | None = None) -> dict:
        return self._consumer.end_offsets(partitions, self._seconds(timeout_ms))

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._consumer.partitions_for_topic(topic)

    def topics(self) -> set[str]:
        return self._consumer.topics()

    def metrics(self, raw: bool = False) -> dict | None:
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

    def __enter__(self) -> "KafkaConsumer":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(autocommit=exc_type is None)
