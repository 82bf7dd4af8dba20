"""fastmq.kafka.compat.KafkaProducer keeps kafka-python's contract: every scenario runs against kafka-python's
KafkaProducer and against ours (uvloop's "one test, two implementations" idea), and the observable results
must agree."""
from __future__ import annotations

import uuid

import kafka
import kafka.errors
import kafka.partitioner
import pytest

import fastmq.kafka.errors as fm_errors
from fastmq.kafka import compat

WAIT = 30.0

IMPLEMENTATIONS = {
    "kafka-python": (kafka.KafkaProducer, kafka.errors),
    "fastmq": (compat.KafkaProducer, fm_errors),
}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def impl(request, kafka_broker):
    producer_class, errors = IMPLEMENTATIONS[request.param]
    made = []

    def make(**configs):
        configs.setdefault("bootstrap_servers", kafka_broker.bootstrap_servers)
        producer = producer_class(**configs)
        made.append(producer)
        return producer

    make.errors = errors
    make.name = request.param
    yield make
    for producer in made:
        producer.close(timeout=5)


def topic() -> str:
    return f"compat-{uuid.uuid4().hex[:10]}"


def test_same_config_keys_and_defaults():
    theirs = kafka.KafkaProducer.DEFAULT_CONFIG
    ours = compat.KafkaProducer.DEFAULT_CONFIG
    assert set(ours) == set(theirs)
    plain = (int, float, str, bool, type(None))
    for key, value in theirs.items():
        if isinstance(value, plain):
            assert ours[key] == value, key


@pytest.mark.parametrize("producer_class", [kafka.KafkaProducer, compat.KafkaProducer])
def test_unknown_config_raises_value_error(producer_class):
    with pytest.raises(ValueError, match="Unrecognized configs"):
        producer_class(bootstrap_servers="127.0.0.1:1", not_a_setting=1)


def test_unreachable_bootstrap_raises_kafka_timeout_error(impl):
    with pytest.raises(impl.errors.KafkaTimeoutError):
        impl(bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=1000)


def test_send_and_metadata(impl):
    producer = impl(linger_ms=5)
    name = topic()
    future = producer.send(name, b"value", key=b"key", headers=[("h", b"12")], timestamp_ms=1700000000000)
    metadata = future.get(timeout=WAIT)
    assert future.is_done and future.succeeded() and not future.failed()
    assert future.value == metadata and future.exception is None
    assert (metadata.topic, metadata.offset, metadata.timestamp, metadata.checksum) == (name, 0, 1700000000000, None)
    assert (metadata.serialized_key_size, metadata.serialized_value_size, metadata.serialized_header_size) == (3, 5, 3)
    assert metadata.topic_partition == (name, metadata.partition)
    assert metadata.partition in producer.partitions_for(name)
    assert type(metadata).__name__ == "RecordMetadata"


def test_callbacks_and_errbacks(impl):
    producer = impl()
    seen = []
    future = producer.send(topic(), b"v")
    future.add_callback(lambda md: seen.append(("ok", md.offset)))
    future.add_errback(lambda exc: seen.append(("error", exc)))
    future.add_both(lambda tag, outcome: seen.append((tag, outcome.offset)), "both")   # args come first
    producer.flush(WAIT)
    assert seen == [("ok", 0), ("both", 0)]


# A producer without serializers sends through compat_send.pyx's compiled send(), one with them through
# KafkaProducer.send: both check the same way.
IDENTITY_SERIALIZERS = {"key_serializer": lambda data: data, "value_serializer": lambda data: data}


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"value": None, "key": None}, ValueError),
    ({"value": b"v", "headers": ("h", b"v")}, TypeError),
    ({"value": b"v", "headers": [("h", "not bytes")]}, TypeError),
    ({"value": "str without serializer"}, TypeError),
    ({"value": b"v", "partition": -1}, ValueError),
])
@pytest.mark.parametrize("serializers", [{}, IDENTITY_SERIALIZERS], ids=["compiled send", "send with serializers"])
def test_invalid_sends_raise_the_same_errors(impl, kwargs, error, serializers):
    producer = impl(**serializers)
    name = topic()
    producer.send(name, b"make the topic exist").get(WAIT)
    with pytest.raises(error):
        producer.send(name, **kwargs)


@pytest.mark.parametrize("serializers", [{}, IDENTITY_SERIALIZERS], ids=["compiled send", "send with serializers"])
def test_message_larger_than_max_request_size(impl, serializers):
    producer = impl(max_request_size=1000, **serializers)
    with pytest.raises(impl.errors.MessageSizeTooLargeError):
        producer.send(topic(), b"x" * 5000)


def test_serializers(impl):
    producer = impl(key_serializer=lambda k: k.encode(), value_serializer=lambda v: repr(v).encode())
    metadata = producer.send(topic(), {"a": 1}, key="k").get(WAIT)
    assert (metadata.serialized_key_size, metadata.serialized_value_size) == (1, len(repr({"a": 1})))


class FixedPartitioner(kafka.partitioner.Partitioner):
    """Written against kafka-python's interface: always the last partition."""

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster):
        return max(cluster.partitions_for_topic(topic))


def test_custom_partitioner_written_for_kafka_python(impl):
    producer = impl(partitioner=FixedPartitioner())
    name = topic()
    partitions = producer.partitions_for(name)
    assert producer.send(name, b"v").get(WAIT).partition == max(partitions)


def test_idempotence_settings_conflicts(impl):
    with pytest.raises(impl.errors.KafkaConfigurationError):
        impl(enable_idempotence=True, acks=1)
    producer = impl(acks=1)           # idempotence silently gives way to the explicit acks
    assert producer.send(topic(), b"v").get(WAIT).offset == 0


def test_close_semantics(impl):
    producer = impl(linger_ms=60000)
    future = producer.send(topic(), b"v")
    with pytest.raises(ValueError):
        producer.close(timeout=-1)
    producer.close()
    assert future.succeeded()
    with pytest.raises(impl.errors.IllegalStateError):
        producer.send(topic(), b"late")


def test_metrics_shape(impl):
    producer = impl()
    producer.send(topic(), b"v").get(WAIT)
    metrics = producer.metrics()
    assert "producer-metrics" in metrics and isinstance(metrics["producer-metrics"], dict)
