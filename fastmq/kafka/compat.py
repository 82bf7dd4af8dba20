"""kafka-python 3.x's client classes on fastmq: change `from kafka import KafkaProducer` into
`from fastmq.kafka.compat import KafkaProducer` and nothing else.

The constructors take kafka-python's keyword arguments with the same defaults (unknown keywords raise
ValueError, as there), the methods keep their names, signatures and return types, and errors are raised as
kafka-python's classes of the same names (fastmq.kafka.errors). Settings that only tune kafka-python's own
internals (selector, kafka_client, metric reporters, client_dns_lookup, api_version) are accepted and have
no effect: fastmq negotiates API versions with every broker itself.
"""
from __future__ import annotations

import logging
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka.compat_config import CONNECTION_DEFAULTS, Unset, client_options, resolve
from fastmq.kafka.compat_consumer import KafkaConsumer as KafkaConsumer  # noqa: F401  (re-exported)
from fastmq.kafka.compat_admin import (  # noqa: F401  (kafka-python's admin names)
    AlterConfigOp, ConfigFilterType, ConfigResource, ConfigResourceType, ConfigSourceType, ConfigType,
    IsolationLevel, KafkaAdminClient, NewPartitions, NewTopic, OffsetSpec,
)
from fastmq.kafka.partitioner import ClusterView, DefaultPartitioner, Partitioner
from fastmq.kafka._native.accumulator import FutureRecordMetadata
from fastmq.kafka._native.compat_send import KafkaPythonSend, check_headers, raise_headers_error
from fastmq.kafka.producer import CODECS, Producer
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition  # noqa: F401  (kafka-python exports them)

_log = logging.getLogger(__name__)

PRODUCER_DEFAULTS: dict[str, Any] = {
    **CONNECTION_DEFAULTS,
    "key_serializer": None,
    "value_serializer": None,
    "enable_idempotence": True,
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
    "delivery_timeout_ms": 120000,
    "acks": -1,
    "compression_type": None,
    "retries": float("inf"),
    "batch_size": 16384,
    "linger_ms": 0,
    "partitioner": Unset,
    "max_block_ms": 60000,
    "max_request_size": 1048576,
    "allow_auto_create_topics": True,
    "metrics_enabled": True,
    "ssl_ciphers": None,
}
# Settings the Producer takes as its own arguments rather than as connection settings.
# kafka-python's size estimate of one record beyond its key and value (batch and record overhead).
_RECORD_OVERHEAD = 61 + 21
_PRODUCER_ARGUMENTS = ("bootstrap_servers", "request_timeout_ms", "retry_backoff_ms",
                       "max_in_flight_requests_per_connection")


def _serializer(serializer: Any) -> Any:
    """kafka-python 3 serializers: an object with serialize(topic, headers, data), or a plain function of data."""
    if serializer is None:
        return None
    if hasattr(serializer, "serialize"):
        return serializer.serialize
    return lambda topic, headers, data: serializer(data)


class KafkaProducer(Producer):
    """kafka-python's KafkaProducer on fastmq's producer (same keywords, defaults, results and errors)."""

    DEFAULT_CONFIG = PRODUCER_DEFAULTS

    def __init__(self, **configs: Any) -> None:
        config = resolve(configs, PRODUCER_DEFAULTS, kind="producer", unknown_error=ValueError)
        if config["acks"] == "all":
            config["acks"] = -1
        if config["compression_type"] not in CODECS:
            raise ValueError(f"Not supported codec: {config['compression_type']}")
        # Idempotence defaults as kafka-python decides them: conflicting explicit settings win over the
        # default (with a warning), but not over an explicit enable_idempotence=True or a transactional id.
        explicit = set(configs)
        if config["transactional_id"]:
            if "enable_idempotence" in explicit and not config["enable_idempotence"]:
                raise kerrors.KafkaConfigurationError("Cannot set transactional_id without enable_idempotence.")
            config["enable_idempotence"] = True
            explicit.add("enable_idempotence")
        if config["enable_idempotence"]:
            conflicts = []
            if "acks" in explicit and config["acks"] != -1:
                conflicts.append(("acks", config["acks"]))
            if "retries" in explicit and config["retries"] == 0:
                conflicts.append(("retries", 0))
            if "max_in_flight_requests_per_connection" in explicit and config[
                    "max_in_flight_requests_per_connection"] > 5:
                conflicts.append(("max_in_flight_requests_per_connection",
                                  config["max_in_flight_requests_per_connection"]))
            if conflicts:
                text = ", ".join(f"{k}={v!r}" for k, v in conflicts)
                if "enable_idempotence" in explicit:
                    raise kerrors.KafkaConfigurationError(
                        f"enable_idempotence=True is incompatible with user-provided {text}")
                _log.warning("Idempotence will be disabled because user-provided config conflicts with "
                             "idempotent defaults: %s", text)
                config["enable_idempotence"] = False
        self.config = config
        options = client_options(config, exclude=_PRODUCER_ARGUMENTS)
        partitioner = config["partitioner"]
        # kafka-python's partitioners: a Partitioner, an object with partition(topic, key, cluster), or a callable.
        self._custom_partitioner: Any = None
        if partitioner is not Unset and not isinstance(partitioner, DefaultPartitioner) and not (
                type(partitioner).__name__ in ("DefaultPartitioner", "StickyPartitioner")
                and type(partitioner).__module__.startswith("kafka.partitioner")):
            self._custom_partitioner = partitioner
        super().__init__(
            config["bootstrap_servers"], acks=config["acks"], compression_type=config["compression_type"],
            batch_size=config["batch_size"], linger_ms=config["linger_ms"], max_block_ms=config["max_block_ms"],
            max_request_size=config["max_request_size"], request_timeout_ms=config["request_timeout_ms"],
            delivery_timeout_ms=config["delivery_timeout_ms"], retries=config["retries"],
            retry_backoff_ms=config["retry_backoff_ms"], enable_idempotence=config["enable_idempotence"],
            max_in_flight_requests_per_connection=config["max_in_flight_requests_per_connection"],
            transactional_id=config["transactional_id"], transaction_timeout_ms=config["transaction_timeout_ms"],
            **options)
        self._serialize_key = _serializer(config["key_serializer"])
        self._serialize_value = _serializer(config["value_serializer"])
        self._checks = KafkaPythonSend(self._accumulator, self.max_request_size, _RECORD_OVERHEAD)
        if (type(self).send is KafkaProducer.send and self._serialize_key is None and self._serialize_value is None
                and self._custom_partitioner is None and self._txn is None):
            # send() below, compiled (compat_send.pyx), for a producer that does nothing to a record before the
            # accumulator: two Python frames a record cost more than the rest of a send.
            self.send = self._checks.send  # type: ignore[method-assign]
        try:
            self.client.bootstrap(config["bootstrap_timeout_ms"] / 1000.0)
        except BaseException:
            super().close(0)
            raise

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Publish a record; returns a FutureRecordMetadata (kafka-python's semantics and errors).

        The checks are compiled (compat_send.pyx), whose send() this method is when the producer does nothing to
        a record before the accumulator; the accumulator's TypeError / ValueError for bad headers become
        kafka-python's."""
        check_headers(headers)
        if self._serialize_key is not None:
            key = self._serialize_key(topic, headers or [], key)
        if self._serialize_value is not None:
            value = self._serialize_value(topic, headers or [], value)
        self._checks.check_size(key, value)
        if partition is None and self._custom_partitioner is not None:
            if topic not in self.client.cluster.topics:
                self.client.topic_metadata(topic, self.max_block)
            partition = self._call_partitioner(topic, key, value)
        try:
            return self._append(topic, value, key, headers, partition, timestamp_ms)
        except (TypeError, ValueError):
            raise_headers_error(headers)
            raise

    def _call_partitioner(self, topic: str, key: Any, value: Any) -> int:
        partitioner = self._custom_partitioner
        cluster = ClusterView(self.client.cluster)
        chosen: int | None
        if isinstance(partitioner, Partitioner) or any(
                base.__module__.startswith("kafka.partitioner") for base in type(partitioner).__mro__):
            chosen = partitioner.partition(topic, key, key, value, value, cluster)
        elif hasattr(partitioner, "partition"):
            chosen = partitioner.partition(topic, key, cluster)
        else:   # kafka-python 1.x/2.x: partitioner(serialized_key, all_partitions, available_partitions)
            info = self.client.cluster.topics[topic]
            chosen = partitioner(key, sorted(p.partition for p in info.partitions),
                                 sorted(p.partition for p in info.partitions if p.leader >= 0))
        if chosen is None:
            raise ValueError(f"Partitioner did not assign a partition for topic {topic}!")
        return chosen

    @classmethod
    def max_usable_produce_magic(cls, api_version: tuple[int, ...]) -> int:
        """The record format (magic) a broker of this version takes: 2 from Kafka 0.11, 1 from 0.10.0."""
        if api_version >= (0, 11):
            return 2
        return 1 if api_version >= (0, 10, 0) else 0

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group_metadata: Any,
                                    timeout: float | None = None) -> None:
        """Commit consumer offsets in the transaction; group_metadata is a group id or a consumer's
        group_metadata() (kafka-python's argument name)."""
        super().send_offsets_to_transaction(offsets, group_metadata, timeout)

    def bootstrap_connected(self) -> bool:
        """True once metadata came from a bootstrap server."""
        return self.client.cluster.version > 0

    def close(self, timeout: float | None = None, null_logger: bool = False) -> None:
        """Flush what was sent and close (timeout in seconds; 0 aborts what is unsent)."""
        if timeout is not None and timeout < 0:
            raise ValueError(f"Invalid timeout: {timeout}")
        super().close(timeout)

    # kafka-python's grouping ({group: {name: value}}) differs from Producer.metrics()'s, which the checker refuses.
    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]] | None:  # type: ignore[override]
        """Producer metrics as kafka-python groups them ({group: {name: value}})."""
        return super().metrics() if self.config["metrics_enabled"] else None

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                super().close(0)
            except Exception:
                pass
