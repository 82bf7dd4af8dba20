"""The options of format("fastmq"), checked without Spark: Spark's Kafka connector's names, and clear errors
for what cannot work."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.kafka.structs import TopicPartition
from fastmq.spark.options import OptionError, parse_options
from fastmq.spark.source import _share, split_ranges
from fastmq.spark.partition_reader import OffsetRange, walk_batches

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}


def test_kafka_connector_options_are_taken():
    options = parse_options({**BASE, "subscribe": "a, b", "startingOffsets": '{"a": {"0": 5, "1": -2}}',
                             "endingOffsets": '{"a": {"0": 9, "1": -1}}', "includeHeaders": "true",
                             "failOnDataLoss": "false", "minPartitions": "4", "kafka.isolation.level":
                             "read_committed", "kafka.security.protocol": "SASL_PLAINTEXT",
                             "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config":
                             'org.apache...PlainLoginModule required username="alice" password="s3";'})
    assert options.subscribe == ("a", "b") and options.starting == {"a": {0: 5, 1: -2}}
    assert options.include_headers and not options.fail_on_data_loss and options.read_committed
    assert dict(options.client)["sasl_plain_username"] == "alice"
    assert dict(options.client)["security_protocol"] == "SASL_PLAINTEXT"
    stream = parse_options({**BASE, "maxOffsetsPerTrigger": "100", "minOffsetsPerTrigger": "10",
                            "maxTriggerDelay": "30s"}, streaming=True)
    assert (stream.max_offsets_per_trigger, stream.min_offsets_per_trigger, stream.max_trigger_delay_ms) == \
        (100, 10, 30_000)
    assert stream.starting == "latest" and parse_options(BASE).starting == "earliest"


@pytest.mark.parametrize("options, message", [(tuple(options.items()), message) for options, message in [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({**BASE, "assign": '{"a": [0]}'}, "exactly one of"),
    ({"kafka.bootstrap.servers": "x:1"}, "exactly one of"),
    ({**BASE, "startingOffset": "earliest"}, "unknown option"),
    ({**BASE, "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
    ({**BASE, "kafka.value.deserializer": "x"}, "CAST"),
    ({**BASE, "kafka.no.such.thing": "1"}, "not a client option"),
    ({**BASE, "startingOffsets": "latest"}, "streaming"),
    ({**BASE, "endingOffsets": "earliest"}, "may not be 'earliest'"),
    ({**BASE, "startingOffsets": "{nope"}, "not JSON"),
    ({**BASE, "startingOffsets": '{"a": {"0": 1}}', "endingOffsets": '{"a": {"1": 5}}'}, "same partitions"),
    ({**BASE, "minPartitions": "0"}, "positive"),
    ({**BASE, "failOnDataLoss": "maybe"}, "true or false"),
    ({**BASE, "topic": "a"}, "for writing"),
    ({"kafka.bootstrap.servers": "x:1", "subscribePattern": "("}, "regular expression"),
]])
def test_bad_options_say_what_to_write(options, message):
    with pytest.raises(OptionError, match=message):
        parse_options(dict(options))


def test_streaming_refuses_batch_options_and_contradictions():
    with pytest.raises(OptionError, match="batch queries"):
        parse_options({**BASE, "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="must not exceed"):
        parse_options({**BASE, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"}, streaming=True)


@given(st.dictionaries(st.sampled_from(["subscribe", "assign", "startingOffsets", "endingOffsets", "minPartitions",
                                        "startingOffsetsByTimestamp", "startingTimestamp", "includeHeaders",
                                        "maxOffsetsPerTrigger", "maxTriggerDelay", "kafka.request.timeout.ms"]),
                       st.text(max_size=30)), st.booleans())
def test_any_option_values_give_options_or_option_error(options, streaming):
    try:
        parse_options({"kafka.bootstrap.servers": "127.0.0.1:1", **options}, streaming=streaming)
    except OptionError:
        pass


@given(st.dictionaries(st.integers(0, 5), st.integers(0, 10_000), min_size=1), st.integers(1, 20_000))
def test_max_offsets_per_trigger_is_never_exceeded(backlog, limit):
    backlog = {TopicPartition("t", p): n for p, n in backlog.items()}
    share = _share(backlog, limit)
    assert sum(share.values()) == min(limit, sum(backlog.values()))
    assert all(0 <= share[tp] <= backlog[tp] for tp in backlog)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=5), st.integers(1, 40))
def test_split_ranges_cover_each_range_exactly(sizes, min_partitions):
    ranges = [OffsetRange("t", p, 10, 10 + n) for p, n in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions)
    for r in ranges:
        covered = sorted((p.start, p.end) for p in pieces if p.partition == r.partition)
        offsets = [o for a, b in covered for o in range(a, b)]
        assert offsets == list(range(r.start, r.end))
    if sum(sizes) >= min_partitions:
        assert len(pieces) >= min(min_partitions, sum(1 for n in sizes if n))


@given(st.binary(max_size=300))
def test_batch_header_walk_of_any_bytes_ends_cleanly(data):
    from fastmq.kafka.errors import UnsupportedVersionError

    try:
        next_offset, batches = walk_batches(data, None)
    except UnsupportedVersionError:
        return
    assert next_offset == -1 or batches is not None


def _varint(value: int) -> bytes:
    zigzag, out = (value << 1) ^ (value >> 63), b""
    while zigzag >= 0x80:
        out += bytes([zigzag & 0x7F | 0x80])
        zigzag >>= 7
    return out + bytes([zigzag])


@given(st.sampled_from([0, 1]), st.integers(0, 2**40), st.integers(0, 2**31 - 1), st.integers(0, 100))
def test_control_record_type_is_read_from_its_key(kind, timestamp_delta, coordinator_epoch, at):
    from fastmq.spark.store_source import control_type

    key = kind.to_bytes(4, "big")                  # [version i16 = 0][type i16]
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big")
    body = b"\0" + _varint(timestamp_delta) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + \
        _varint(0)
    batch = bytes(at) + bytes(61) + _varint(len(body)) + body
    assert control_type(memoryview(batch), at) == kind


@given(st.binary(max_size=120), st.integers(0, 10))
def test_control_type_of_any_bytes_is_a_number_or_a_clear_error(data, at):
    from fastmq.spark.store_source import control_type

    try:
        assert 0 <= control_type(memoryview(data), at) < 65536
    except ValueError:
        pass
