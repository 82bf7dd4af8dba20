"""fastmq.broker.tubemq.balancer: every partition held by exactly one consumer, shares differing by at most one,
and partitions held within a consumer's share never move."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.broker.tubemq.balancer import balance, bound_balance


def settle(partitions, consumers, owner):
    releases, assignments = balance(partitions, consumers, owner)
    owner = dict(owner)
    for consumer, released in releases.items():
        for partition in released:
            assert owner.pop(partition) == consumer
    for consumer, assigned in assignments.items():
        for partition in assigned:
            assert partition not in owner or owner[partition] not in consumers
            owner[partition] = consumer
    return owner, releases


def test_a_new_group_is_divided_in_sorted_order():
    releases, assignments = balance(range(5), ["b", "a"], {})
    assert releases == {}
    assert assignments == {"a": [0, 1, 2], "b": [3, 4]}


def test_a_joining_consumer_takes_over_the_surplus_only():
    owner = {p: "a" for p in range(4)}
    releases, assignments = balance(range(4), ["a", "b"], owner)
    assert releases == {"a": [2, 3]}
    assert assignments == {"b": [2, 3]}


def test_a_leaving_consumer_leaves_its_partitions_to_the_rest():
    owner = {0: "a", 1: "a", 2: "b", 3: "b"}
    releases, assignments = balance(range(4), ["a"], owner)
    assert releases == {} and assignments == {"a": [2, 3]}


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 30), st.sets(st.text("abcdef", min_size=1, max_size=3), min_size=1, max_size=8),
       st.dictionaries(st.integers(0, 30), st.text("abcdefgh", min_size=1, max_size=3)))
def test_one_round_settles_the_group(count, consumers, owner):
    partitions = list(range(count))
    owner = {p: c for p, c in owner.items() if p < count}
    settled, _ = settle(partitions, consumers, owner)
    assert set(settled) == set(partitions)
    assert set(settled.values()) <= consumers
    shares = [sum(1 for c in settled.values() if c == consumer) for consumer in consumers]
    assert max(shares) - min(shares) <= 1
    for partition, consumer in owner.items():      # kept within its share: not moved
        if consumer in consumers and settled[partition] != consumer:
            assert sum(1 for c in owner.values() if c == consumer) > min(shares)
    again, releases = settle(partitions, consumers, settled)
    assert again == settled and releases == {}


def test_a_bound_group_gets_what_each_member_named():
    claims = {"a": {0: 5, 1: 2}, "b": {1: 7, 2: 0}}
    releases, assignments = bound_balance(claims, {1: "a", 3: "a"})
    assert releases == {"a": [1, 3]}                            # 1 goes to the bigger offset, 3 was named by nobody
    assert assignments == {"a": [0], "b": [1, 2]}
    assert bound_balance(claims, {}, select_big=False)[1] == {"a": [0, 1], "b": [2]}
    assert bound_balance({"b": {0: 1}, "a": {0: 1}}, {})[1] == {"a": [0]}      # a tie: the first consumer id
    assert bound_balance(claims, {0: "a", 1: "b", 2: "b"}) == ({}, {})      # settled: nothing moves
