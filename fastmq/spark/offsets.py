"""Which partitions a query reads and from which offsets to which (on the driver), with fastmq's Consumer.

Offsets are resolved as Spark's Kafka connector does: the subscription (subscribe, subscribePattern or
assign) gives the partitions; the start is startingTimestamp, else startingOffsetsByTimestamp, else
startingOffsets (earliest, latest or JSON with -2 / -1); the end of a batch read likewise from the ending
options. Under read_committed "latest" is the last stable offset. Streaming offsets are dicts shaped like the
connector's checkpoint lines, {"topic": {"0": 123}}: the next offset to read per partition.
"""
from __future__ import annotations

import atexit
import re
import threading
from typing import Any

from fastmq.errors import CorruptDataError
from fastmq.kafka import errors as kerrors
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.structs import TopicPartition
from fastmq.spark.options import EARLIEST, LATEST, KafkaOptions, OptionError

_consumers: dict[tuple[Any, ...], Consumer] = {}
_consumers_lock = threading.Lock()


def shared_consumer(options: KafkaOptions) -> Consumer:
    """One Consumer (no group) per process and client configuration, for offset lookups: Spark reuses its
    Python processes across tasks and queries, so the connection and metadata are set up once."""
    key = (options.bootstrap_servers, options.client, options.read_committed)
    with _consumers_lock:
        consumer = _consumers.get(key)
        if consumer is None:
            consumer = _consumers[key] = Consumer(
                bootstrap_servers=options.bootstrap_servers, enable_auto_commit=False,
                isolation_level="read_committed" if options.read_committed else "read_uncommitted",
                **{**dict(options.client), "client_id": "fastmq-spark-offsets"})
        return consumer


@atexit.register
def _close_consumers() -> None:
    with _consumers_lock:
        for consumer in _consumers.values():
            consumer.close(autocommit=False)
        _consumers.clear()


def _timeout(options: KafkaOptions) -> float:
    return float(dict(options.client).get("request_timeout_ms", 30000)) / 1000.0


def subscribed_partitions(options: KafkaOptions) -> list[TopicPartition]:
    """The partitions of the subscription now; a named topic that does not exist is an error."""
    consumer = shared_consumer(options)
    timeout = _timeout(options)
    if options.assign:
        return [TopicPartition(t, p) for t, p in options.assign]
    existing = consumer.topics(timeout)
    if options.subscribe_pattern is not None:
        pattern = re.compile(options.subscribe_pattern)
        topics = sorted(t for t in existing if pattern.fullmatch(t))
    else:
        missing = sorted(set(options.subscribe) - existing)
        if missing:
            raise kerrors.UnknownTopicOrPartitionError(
                f"topic(s) {missing} do not exist on {options.bootstrap_servers} (create them first: fastmq's Spark "
                "source does not create topics)")
        topics = list(options.subscribe)
    # Fresh metadata each time: partitions added to a topic show up in the next micro-batch.
    consumer.client.wait_for_metadata(consumer.client.request_update("partitions of the subscription"), timeout)
    found: list[TopicPartition] = []
    for topic in topics:
        found.extend(TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic, timeout)))
    return found


def earliest_offsets(options: KafkaOptions, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    return shared_consumer(options).beginning_offsets(partitions, _timeout(options)) if partitions else {}


def latest_offsets(options: KafkaOptions, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    return shared_consumer(options).end_offsets(partitions, _timeout(options)) if partitions else {}


def resolve(options: KafkaOptions, partitions: list[TopicPartition], *, ending: bool) -> dict[TopicPartition, int]:
    """The starting (or ending) offset of every partition, as the options say."""
    prefix = "ending" if ending else "starting"
    timestamp = options.ending_timestamp if ending else options.starting_timestamp
    by_timestamp = options.ending_by_timestamp if ending else options.starting_by_timestamp
    if timestamp is not None:
        return _by_timestamp(options, {tp: timestamp for tp in partitions}, ending)
    if by_timestamp is not None:
        wanted = {TopicPartition(t, p): ts for t, parts in by_timestamp.items() for p, ts in parts.items()}
        _same_partitions(f"{prefix}OffsetsByTimestamp", wanted, partitions)
        return _by_timestamp(options, wanted, ending)
    spec = options.ending if ending else options.starting
    if spec in ("earliest", "latest"):
        return (earliest_offsets if spec == "earliest" else latest_offsets)(options, partitions)
    wanted = {TopicPartition(t, p): o for t, parts in spec.items() for p, o in parts.items()}
    _same_partitions(f"{prefix}Offsets", wanted, partitions)
    return _absolute(options, wanted)


def _same_partitions(name: str, wanted: dict[TopicPartition, Any], partitions: list[TopicPartition]) -> None:
    missing = sorted(set(partitions) - set(wanted))
    if missing:
        raise OptionError(f"{name} does not name {', '.join(f'{tp.topic}-{tp.partition}' for tp in missing)}: "
                          "give every partition of the subscription (-2 for earliest, -1 for latest)")


def _absolute(options: KafkaOptions, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """-2 and -1 in offset JSON replaced by the partition's earliest and latest offsets."""
    earliest = earliest_offsets(options, [tp for tp, o in wanted.items() if o == EARLIEST])
    latest = latest_offsets(options, [tp for tp, o in wanted.items() if o == LATEST])
    return {tp: earliest.get(tp, latest.get(tp, o)) if o < 0 else o for tp, o in wanted.items()}


def _by_timestamp(options: KafkaOptions, wanted: dict[TopicPartition, int], ending: bool) -> dict[TopicPartition, int]:
    found = shared_consumer(options).offsets_for_times(wanted, _timeout(options))
    missing = [tp for tp, hit in found.items() if hit is None]
    latest = latest_offsets(options, missing)
    if missing and not ending and options.timestamp_strategy == "error":
        raise OptionError(f"no record at or after the starting timestamp in {', '.join(map(str, missing))}: set "
                          "startingOffsetsByTimestampStrategy to latest to start at the end there")
    return {tp: latest[tp] if hit is None else hit.offset for tp, hit in found.items()}


def to_json(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{"topic": {"0": 123}}, partitions in order: the shape of Spark's Kafka offsets in a checkpoint."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def from_json(offsets: Any) -> dict[TopicPartition, int]:
    """to_json's shape back, as Spark hands it over from a checkpoint; CorruptDataError for anything else (a
    damaged or hand-edited checkpoint)."""
    try:
        return {TopicPartition(str(topic), int(p)): int(o)
                for topic, parts in offsets.items() for p, o in parts.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"Spark offsets {offsets!r:.200} are not {{topic: {{partition: offset}}}}: {exc}") from None
