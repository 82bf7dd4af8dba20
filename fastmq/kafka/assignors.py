"""Partition assignors: how the group leader shares the subscribed partitions among the members.

The leader runs the assignor that all members offered (the coordinator picks the first protocol, in the
leader's order of preference, that every member supports); the others only supply their subscription's
user data and learn their assignment.

- range: per topic, members sorted, each gets a contiguous range (the first n % m members one more).
  Members subscribed to the same topics get the same partition numbers of every topic (co-partitioning).
- roundrobin: all partitions sorted, dealt one by one to the members in turn, skipping members that are
  not subscribed to that topic.
- sticky: balanced (counts differ by at most one when subscriptions are equal) while keeping as many
  partitions as possible where they were; the previous assignment travels in the user data (Kafka's
  StickyAssignorUserData) or, for cooperative members, in the subscription's owned partitions.
- cooperative-sticky: sticky's target, but a partition that changes owner is withheld from its new owner
  for one round (KIP-429): its old owner revokes it, rejoins, and the next round hands it over. Members keep
  consuming every partition that does not move.

Members are ordered as Kafka orders them: static members (group.instance.id) first by instance id, then the
others by member id, so that a restarted static member gets its partitions back.
"""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping

from fastmq.kafka import consumer_protocol as cp
from fastmq.kafka.consumer_protocol import Assignment, Subscription
from fastmq.kafka.errors import KafkaConfigurationError
from fastmq.kafka.structs import TopicPartition

_log = logging.getLogger(__name__)

EAGER = "eager"
COOPERATIVE = "cooperative"


def member_order(member_id: str, subscription: Subscription) -> tuple[int, str, str]:
    """Sort key of a member: static members by instance id first, then dynamic ones by member id."""
    if subscription.group_instance_id:
        return (0, subscription.group_instance_id, member_id)
    return (1, member_id, "")


class PartitionAssignor(ABC):
    """One assignment strategy. Subclasses set `name` (the protocol name in JoinGroup) and implement assign()."""

    name: str = ""
    rebalance_protocol: str = EAGER

    def subscription(self, topics: Iterable[str], owned: list[TopicPartition], generation: int) -> Subscription:
        """The subscription this member sends in JoinGroup; assignors that remember add user data."""
        return Subscription(sorted(topics), None, list(owned), generation)

    @abstractmethod
    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        """Leader only: member id -> Assignment, for every member in `subscriptions`."""

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called on every member with its own assignment once SyncGroup succeeded."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _subscribed_partitions(partitions_per_topic: Mapping[str, int], topics: Iterable[str]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for topic in sorted(set(topics)) for p in range(partitions_per_topic.get(topic, 0))]


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        members = sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m]))
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        for topic in topics:
            count = partitions_per_topic.get(topic, 0)
            consumers = [m for m in members if topic in subscriptions[m].topics]
            if not count or not consumers:
                continue
            per_member, extra = divmod(count, len(consumers))
            for index, member in enumerate(consumers):
                start = per_member * index + min(index, extra)
                length = per_member + (1 if index < extra else 0)
                result[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return {m: Assignment(tps) for m, tps in result.items()}


class RoundRobinAssignor(PartitionAssignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        members = sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m]))
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        if not members:
            return {}
        topics = {t for s in subscriptions.values() for t in s.topics}
        turn = 0
        for tp in _subscribed_partitions(partitions_per_topic, topics):
            # Some member is subscribed to every listed topic, so this finds one within a full circle.
            for _ in range(len(members)):
                member = members[turn % len(members)]
                turn += 1
                if tp.topic in subscriptions[member].topics:
                    result[member].append(tp)
                    break
        return {m: Assignment(tps) for m, tps in result.items()}


class StickyAssignor(PartitionAssignor):
    """Kafka's "sticky" (KIP-54): balance first, then keep partitions where they were."""

    name = "sticky"

    def __init__(self) -> None:
        self._current: list[TopicPartition] = []
        self._generation = -1

    def subscription(self, topics: Iterable[str], owned: list[TopicPartition], generation: int) -> Subscription:
        user_data = cp.encode_sticky_user_data(self._current, self._generation)
        return Subscription(sorted(topics), user_data, list(owned), generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._current = list(assignment.partitions)
        self._generation = generation

    def _previous(self, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        if subscription.owned_partitions:
            return subscription.owned_partitions, subscription.generation_id
        if subscription.user_data:
            try:
                return cp.decode_sticky_user_data(subscription.user_data)
            except Exception as exc:  # a member's bad user data costs stickiness, not the rebalance
                _log.warning("ignoring unreadable sticky user data: %s", exc)
        return [], -1

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        target, _ = self._target(partitions_per_topic, subscriptions)
        return {m: Assignment(sorted(tps)) for m, tps in target.items()}

    def _target(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
                ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
        """(member -> partitions, partition -> previous owner)."""
        members = sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m]))
        order = {m: i for i, m in enumerate(members)}
        topics = {t for s in subscriptions.values() for t in s.topics}
        partitions = _subscribed_partitions(partitions_per_topic, topics)
        eligible = {tp: [m for m in members if tp.topic in subscriptions[m].topics] for tp in partitions}

        # Previous owners; when two members claim a partition the higher generation wins (KIP-341).
        previous: dict[TopicPartition, tuple[int, str]] = {}
        for member in members:
            owned, generation = self._previous(subscriptions[member])
            for tp in owned:
                if tp not in eligible or member not in eligible[tp]:
                    continue
                claim = previous.get(tp)
                if claim is None or generation > claim[0]:
                    previous[tp] = (generation, member)
        previous_owner = {tp: owner for tp, (_, owner) in previous.items()}

        assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
        owner: dict[TopicPartition, str] = {}
        for tp, member in previous_owner.items():
            assignment[member].append(tp)
            owner[tp] = member
        # Unowned partitions: the most constrained first, each to its least loaded eligible member.
        for tp in sorted((tp for tp in partitions if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)):
            if not eligible[tp]:
                continue
            member = min(eligible[tp], key=lambda m: (len(assignment[m]), order[m]))
            assignment[member].append(tp)
            owner[tp] = member
        self._balance(assignment, owner, eligible, order, previous_owner)
        return assignment, previous_owner

    @staticmethod
    def _balance(assignment: dict[str, list[TopicPartition]], owner: dict[TopicPartition, str],
                 eligible: dict[TopicPartition, list[str]], order: dict[str, int],
                 previous_owner: dict[TopicPartition, str]) -> None:
        # Move one partition at a time from a member to an eligible one holding at least two fewer. Every
        # move lowers the sum of squared counts, so this ends; partitions new to their member move first.
        while True:
            moved = False
            for member in sorted(assignment, key=lambda m: (-len(assignment[m]), order[m])):
                count = len(assignment[member])
                for tp in sorted(assignment[member], key=lambda tp: (previous_owner.get(tp) == member, tp)):
                    candidates = [m for m in eligible[tp] if len(assignment[m]) < count - 1]
                    if candidates:
                        target = min(candidates, key=lambda m: (len(assignment[m]), order[m]))
                        assignment[member].remove(tp)
                        assignment[target].append(tp)
                        owner[tp] = target
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return


class CooperativeStickyAssignor(StickyAssignor):
    """Kafka's "cooperative-sticky" (KIP-429)."""

    name = "cooperative-sticky"
    rebalance_protocol = COOPERATIVE

    def subscription(self, topics: Iterable[str], owned: list[TopicPartition], generation: int) -> Subscription:
        return Subscription(sorted(topics), cp.encode_generation(self._generation), list(owned), generation)

    def _previous(self, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        generation = subscription.generation_id
        if generation < 0:
            generation = cp.decode_generation(subscription.user_data)
        return subscription.owned_partitions, generation

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        target, previous_owner = self._target(partitions_per_topic, subscriptions)
        for member, tps in target.items():
            # A partition still owned by another member waits one round: that member revokes it first.
            target[member] = [tp for tp in tps if previous_owner.get(tp, member) == member]
        return {m: Assignment(sorted(tps)) for m, tps in target.items()}


ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def make_assignors(strategies: Iterable[object]) -> list[PartitionAssignor]:
    """Assignor instances from names ('range', ...), PartitionAssignor classes or instances, or kafka-python's
    assignor classes (matched by their name)."""
    result: list[PartitionAssignor] = []
    for strategy in strategies:
        if isinstance(strategy, PartitionAssignor):
            result.append(strategy)
            continue
        if isinstance(strategy, type) and issubclass(strategy, PartitionAssignor):
            result.append(strategy())
            continue
        name = strategy if isinstance(strategy, str) else getattr(strategy, "name", None)
        if not isinstance(name, str) or name not in ASSIGNORS:
            raise KafkaConfigurationError(
                f"unknown partition assignment strategy {strategy!r}: use one of {sorted(ASSIGNORS)} or a "
                f"fastmq.kafka.assignors.PartitionAssignor")
        result.append(ASSIGNORS[name]())
    if not result:
        raise KafkaConfigurationError("partition_assignment_strategy is empty")
    names = [a.name for a in result]
    if len(set(names)) != len(names):
        raise KafkaConfigurationError(f"partition_assignment_strategy names an assignor twice: {names}")
    return result


def rebalance_protocol(assignors: Iterable[PartitionAssignor]) -> str:
    """COOPERATIVE only when every configured assignor supports it (as Kafka's consumer decides)."""
    return COOPERATIVE if all(a.rebalance_protocol == COOPERATIVE for a in assignors) else EAGER
