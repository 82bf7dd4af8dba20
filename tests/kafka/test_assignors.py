"""Partition assignors: range and roundrobin against kafka-python's (the oracle); sticky and cooperative-sticky
by their properties (everything assigned once, balance, stickiness, KIP-429's withheld moves)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor as PeerRange
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as PeerRoundRobin

from fastmq.kafka import assignors as a
from fastmq.kafka.consumer_protocol import Assignment, Subscription
from fastmq.kafka.errors import KafkaConfigurationError
from fastmq.kafka.structs import TopicPartition

TOPICS = ["alpha", "beta", "gamma"]
counts = st.fixed_dictionaries({t: st.integers(0, 9) for t in TOPICS})
members = st.dictionaries(st.text(alphabet="mnopq", min_size=1, max_size=4),
                          st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True),
                          min_size=1, max_size=6)


class Cluster:
    def __init__(self, counts):
        self.counts = counts

    def partitions_for_topic(self, topic):
        return set(range(self.counts[topic])) if topic in self.counts else None


def peer_assign(peer, counts, subscriptions):
    members = [SimpleNamespace(member_id=m, group_instance_id=None, metadata=SimpleNamespace(topics=t))
               for m, t in subscriptions.items()]
    result = peer.assign(Cluster(counts), members)
    return {m: sorted(TopicPartition(t, p) for t, ps in assignment.assigned_partitions for p in ps)
            for m, assignment in result.items()}


def ours(assignor, counts, subscriptions, **extra):
    subs = {m: Subscription(list(t), **extra.get(m, {})) for m, t in subscriptions.items()}
    return {m: sorted(x.partitions) for m, x in assignor.assign(counts, subs).items()}


@given(counts, members)
def test_range_matches_kafka_python(counts, subscriptions):
    assert ours(a.RangeAssignor(), counts, subscriptions) == peer_assign(PeerRange, counts, subscriptions)


@given(counts, members)
def test_roundrobin_matches_kafka_python(counts, subscriptions):
    # kafka-python's roundrobin breaks (KeyError) when members subscribe to different topics: compare equal ones.
    first = next(iter(subscriptions.values()))
    subscriptions = {m: first for m in subscriptions}
    assert ours(a.RoundRobinAssignor(), counts, subscriptions) == peer_assign(PeerRoundRobin, counts, subscriptions)


def test_roundrobin_skips_members_not_subscribed():
    subs = {"a": Subscription(["t1"]), "b": Subscription(["t1", "t2"]), "c": Subscription(["t2"])}
    result = {m: [(tp.topic, tp.partition) for tp in x.partitions]
              for m, x in a.RoundRobinAssignor().assign({"t1": 3, "t2": 3}, subs).items()}
    assert result == {"a": [("t1", 0), ("t1", 2)], "b": [("t1", 1), ("t2", 0), ("t2", 2)], "c": [("t2", 1)]}


def test_range_known_layout_and_static_members_first():
    subs = {"b": Subscription(["t"]), "a": Subscription(["t"]), "z": Subscription(["t"], group_instance_id="i1")}
    result = a.RangeAssignor().assign({"t": 7}, subs)
    assert [tp.partition for tp in result["z"].partitions] == [0, 1, 2]
    assert [tp.partition for tp in result["a"].partitions] == [3, 4]
    assert [tp.partition for tp in result["b"].partitions] == [5, 6]


def check_complete(result, counts, subscriptions):
    owners = {}
    for member, tps in result.items():
        for tp in tps:
            assert tp not in owners, f"{tp} assigned twice"
            assert tp.topic in subscriptions[member]
            owners[tp] = member
    wanted = {TopicPartition(t, p) for ts in subscriptions.values() for t in ts for p in range(counts[t])}
    assert set(owners) == wanted


@given(counts, members)
def test_sticky_assigns_everything_once(counts, subscriptions):
    result = ours(a.StickyAssignor(), counts, subscriptions)
    check_complete(result, counts, subscriptions)


@given(st.integers(1, 40), st.integers(1, 8))
def test_sticky_is_balanced_for_equal_subscriptions(partitions, count):
    subscriptions = {f"m{i}": ["alpha"] for i in range(count)}
    sizes = [len(v) for v in ours(a.StickyAssignor(), {"alpha": partitions}, subscriptions).values()]
    assert max(sizes) - min(sizes) <= 1


def previous_data(result, generation=1):
    from fastmq.kafka.consumer_protocol import encode_sticky_user_data
    return {m: {"user_data": encode_sticky_user_data(tps, generation)} for m, tps in result.items()}


@given(st.integers(2, 30), st.integers(2, 6), st.data())
def test_sticky_moves_only_what_balance_requires_when_a_member_leaves_or_joins(partitions, count, data):
    counts = {"alpha": partitions}
    subscriptions = {f"m{i}": ["alpha"] for i in range(count)}
    first = ours(a.StickyAssignor(), counts, subscriptions)
    leaver = data.draw(st.sampled_from(sorted(subscriptions)))
    remaining = {m: t for m, t in subscriptions.items() if m != leaver}
    second = ours(a.StickyAssignor(), counts, remaining,
                  **{m: v for m, v in previous_data(first).items() if m != leaver})
    check_complete(second, counts, remaining)
    for member in remaining:                    # nobody lost a partition: only the leaver's moved
        assert set(first[member]) <= set(second[member])
    joined = dict(remaining, newcomer=["alpha"])
    third = ours(a.StickyAssignor(), counts, joined, **previous_data(second))
    check_complete(third, counts, joined)
    moved = sum(len(set(second[m]) - set(third[m])) for m in remaining)
    assert moved == len(third["newcomer"])      # the newcomer's share came from the others, nothing else moved
    sizes = [len(v) for v in third.values()]
    assert max(sizes) - min(sizes) <= 1


def test_sticky_prefers_the_newer_generation_when_two_members_claim_a_partition():
    from fastmq.kafka.consumer_protocol import encode_sticky_user_data
    tp = TopicPartition("alpha", 0)
    subs = {"old": Subscription(["alpha"], encode_sticky_user_data([tp], 1)),
            "new": Subscription(["alpha"], encode_sticky_user_data([tp], 2))}
    result = a.StickyAssignor().assign({"alpha": 1}, subs)
    assert result["new"].partitions == [tp] and result["old"].partitions == []


def test_sticky_member_remembers_its_assignment_in_its_subscription():
    assignor = a.StickyAssignor()
    assignor.on_assignment(Assignment([TopicPartition("alpha", 3)]), 5)
    subscription = assignor.subscription({"alpha"}, [], 5)
    from fastmq.kafka.consumer_protocol import decode_sticky_user_data
    assert decode_sticky_user_data(subscription.user_data) == ([TopicPartition("alpha", 3)], 5)


def test_cooperative_sticky_withholds_moving_partitions_for_one_round():
    assignor = a.CooperativeStickyAssignor()
    counts = {"alpha": 6}
    owned = [TopicPartition("alpha", p) for p in range(6)]
    subs = {"a": Subscription(["alpha"], None, owned, 3), "b": Subscription(["alpha"])}
    first = assignor.assign(counts, subs)
    assert len(first["a"].partitions) == 3          # keeps half, revokes the rest
    assert first["b"].partitions == []              # the revoked half is not handed over yet
    subs = {"a": Subscription(["alpha"], None, first["a"].partitions, 4), "b": Subscription(["alpha"], None, [], 4)}
    second = assignor.assign(counts, subs)
    assert second["a"].partitions == first["a"].partitions
    assert sorted(second["a"].partitions + second["b"].partitions) == owned


def test_make_assignors_by_name_class_or_kafka_python_class():
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    made = a.make_assignors(["range", a.RoundRobinAssignor, StickyPartitionAssignor])
    assert [x.name for x in made] == ["range", "roundrobin", "sticky"]
    assert a.rebalance_protocol(made) == a.EAGER
    assert a.rebalance_protocol(a.make_assignors(["cooperative-sticky"])) == a.COOPERATIVE
    with pytest.raises(KafkaConfigurationError):
        a.make_assignors(["bogus"])
    with pytest.raises(KafkaConfigurationError):
        a.make_assignors([])
