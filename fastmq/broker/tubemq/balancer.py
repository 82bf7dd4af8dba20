"""The master's server-side balancing of one consumer group (TubeMQ's balancerChore, seed 5.6).

Partitions and consumers are sorted; each consumer's share is len(partitions) // len(consumers), the first
len(partitions) % len(consumers) consumers taking one more. A consumer keeps what it holds up to its share and
is told to release the rest (a DISCONNECT event); partitions nobody holds go to the consumers under their share
(a CONNECT event), lowest first. A partition released in this round may be handed out in the same round: its new
holder then meets PARTITION_OCCUPIED at the broker until the old holder unregistered, drops it, reports that,
and gets it again in a later round.

A bound group (bound consumption) is not divided: each partition goes to the member that named it in its
requiredPartition (named by several: the one with the biggest offset, or the smallest when the group selects
small; equal offsets: the first consumer id), and a partition nobody named goes to nobody.
"""
from __future__ import annotations

from collections.abc import Iterable

Partition = tuple[str, int]                     # (topic, partition index)
Moves = dict[str, list[Partition]]              # consumer id -> partitions


def balance(partitions: Iterable[Partition], consumers: Iterable[str], owner: dict[Partition, str]
            ) -> tuple[Moves, Moves]:
    """(releases, assignments), each {consumer: [partition, ...]}, given owner {partition: consumer}.
    Partitions held by consumers no longer in the group count as unheld."""
    ordered_partitions = sorted(partitions)
    ordered_consumers = sorted(consumers)
    if not ordered_consumers:
        return {}, {}
    base, extra = divmod(len(ordered_partitions), len(ordered_consumers))
    share = {consumer: base + (index < extra) for index, consumer in enumerate(ordered_consumers)}
    held: Moves = {consumer: [] for consumer in ordered_consumers}
    unheld: list[Partition] = []
    for partition in ordered_partitions:
        holder = owner.get(partition)
        if holder in held:
            held[holder].append(partition)
        else:
            unheld.append(partition)
    releases: Moves = {}
    for consumer, partitions_held in held.items():
        surplus = partitions_held[share[consumer]:]
        if surplus:
            releases[consumer] = surplus
            del partitions_held[share[consumer]:]
            unheld.extend(surplus)
    unheld.sort()
    assignments: Moves = {}
    for consumer in ordered_consumers:
        room = share[consumer] - len(held[consumer])
        if room > 0 and unheld:
            assignments[consumer], unheld = unheld[:room], unheld[room:]
    return releases, assignments


def bound_balance(claims: dict[str, dict[Partition, int]], owner: dict[Partition, str], select_big: bool = True
                  ) -> tuple[Moves, Moves]:
    """(releases, assignments) as balance() returns them, given claims {consumer: {partition: offset}}."""
    chosen: dict[Partition, tuple[str, int]] = {}        # partition -> (consumer, offset)
    for consumer in sorted(claims):
        for partition, offset in claims[consumer].items():
            best = chosen.get(partition)
            if best is None or (offset > best[1] if select_big else offset < best[1]):
                chosen[partition] = (consumer, offset)
    releases: Moves = {}
    for partition, holder in sorted(owner.items()):
        if holder in claims and chosen.get(partition, (None,))[0] != holder:
            releases.setdefault(holder, []).append(partition)
    assignments: Moves = {}
    for partition, (consumer, _) in sorted(chosen.items()):
        if owner.get(partition) != consumer:
            assignments.setdefault(consumer, []).append(partition)
    return releases, assignments
