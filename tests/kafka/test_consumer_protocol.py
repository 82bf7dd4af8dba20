"""fastmq.kafka.consumer_protocol against kafka-python's encodings of the same messages (the oracle)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as PeerAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as PeerSubscription

from fastmq.errors import FastMQError, ProtocolError
from fastmq.kafka import consumer_protocol as cp
from fastmq.kafka.structs import TopicPartition

topic = st.text(alphabet="abcxyz-_.", min_size=1, max_size=6)
partitions = st.lists(st.builds(TopicPartition, topic, st.integers(0, 50)), max_size=6, unique=True)


def grouped(tps):
    by_topic = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return sorted((t, sorted(p)) for t, p in by_topic.items())


@given(st.lists(topic, max_size=5, unique=True), st.one_of(st.none(), st.binary(max_size=10)), partitions,
       st.integers(-1, 1000), st.one_of(st.none(), topic), st.integers(0, 3))
def test_subscription_matches_kafka_python(topics, user_data, owned, generation, rack, version):
    ours = cp.Subscription(topics, user_data, owned, generation, rack).encode(version)
    fields = {"topics": sorted(topics), "user_data": user_data}
    if version >= 1:
        fields["owned_partitions"] = [{"topic": t, "partitions": p} for t, p in grouped(owned)]
    if version >= 2:
        fields["generation_id"] = generation
    if version >= 3:
        fields["rack_id"] = rack
    peer = PeerSubscription(version=version, **fields)
    assert ours == peer.encode(version=version)          # kafka-python writes the version prefix too
    back = cp.Subscription.decode(ours)
    assert back.topics == sorted(topics) and back.user_data == user_data
    if version >= 1:
        assert sorted(back.owned_partitions) == sorted(owned)


@given(partitions, st.one_of(st.none(), st.binary(max_size=10)), st.integers(0, 3))
def test_assignment_matches_kafka_python(assigned, user_data, version):
    ours = cp.Assignment(assigned, user_data).encode(version)
    peer = PeerAssignment(version=version, assigned_partitions=[
        {"topic": t, "partitions": p} for t, p in grouped(assigned)], user_data=user_data)
    assert ours == peer.encode(version=version)          # kafka-python writes the version prefix too
    back = cp.Assignment.decode(ours)
    assert sorted(back.partitions) == sorted(assigned) and back.user_data == user_data


def test_decodes_what_kafka_python_writes():
    peer = PeerSubscription(version=0, topics=["a", "b"], user_data=b"x")
    assert cp.Subscription.decode(peer.encode(version=0)).topics == ["a", "b"]


def test_empty_assignment_means_nothing_assigned():
    assert cp.Assignment.decode(b"").partitions == []


def test_newer_versions_are_read_as_the_highest_known_one():
    data = bytearray(cp.Assignment([TopicPartition("a", 1)]).encode(3))
    data[0:2] = struct.pack(">h", 9)
    assert cp.Assignment.decode(bytes(data)).partitions == [TopicPartition("a", 1)]
    with pytest.raises(ProtocolError, match="newer than fastmq knows"):
        cp.Assignment.decode(bytes(data) + b"\x00\x01")


def test_sticky_user_data_round_trip_and_version_0():
    data = cp.encode_sticky_user_data([TopicPartition("a", 2), TopicPartition("a", 0)], 7)
    assert cp.decode_sticky_user_data(data) == ([TopicPartition("a", 0), TopicPartition("a", 2)], 7)
    version_0 = data[:-4]                       # the same without the trailing generation
    assert cp.decode_sticky_user_data(version_0) == ([TopicPartition("a", 0), TopicPartition("a", 2)], -1)
    assert cp.decode_generation(cp.encode_generation(12)) == 12
    assert cp.decode_generation(None) == -1


@given(st.binary(max_size=80))
def test_garbage_raises_protocol_errors_only(data):
    for decode in (cp.Subscription.decode, cp.Assignment.decode, cp.decode_sticky_user_data):
        try:
            decode(data)
        except FastMQError:
            pass
