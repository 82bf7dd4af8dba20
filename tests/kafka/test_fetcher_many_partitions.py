"""The fetcher across many partitions, against the embedded broker: a 1024-partition topic is read whole, once
and in order per partition, within the buffer budget (fetch_max_bytes), and the fetch session's incremental
requests list only the partitions whose offsets moved."""
from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator

from fastmq.kafka import Consumer, Producer
from fastmq.kafka.admin import Admin, NewTopic
from fastmq.kafka.fetcher import REQUESTS_PER_BUDGET
from fastmq.kafka.structs import TopicPartition
from tests.support.waiting import wait_for

PARTITIONS = 1024
ROUNDS = 3                      # send_many calls per partition: several batches each
PER_ROUND = 4
BUDGET = 64 * 1024              # fetch_max_bytes: far below PARTITIONS x max_partition_fetch_bytes
WAIT = 60.0


def make_topic(servers: str) -> str:
    topic = f"many-{uuid.uuid4().hex[:8]}"
    admin = Admin(bootstrap_servers=servers)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    with Producer(bootstrap_servers=servers, linger_ms=0) as producer:
        for round_ in range(ROUNDS):
            for p in range(PARTITIONS):
                producer.send_many(topic, [b"%d:%d" % (p, round_ * PER_ROUND + i) for i in range(PER_ROUND)],
                                   partition=p)
            producer.flush()
    return topic


def read(consumer: Consumer, count: int) -> dict[int, list[int]]:
    """partition -> the offsets of the values read, in the order read (bounded in time)."""
    seen: dict[int, list[int]] = {}
    total, deadline = 0, time.monotonic() + WAIT
    while total < count and time.monotonic() < deadline:
        for tp, chunk in consumer.poll(0.5).items():
            for record in chunk:
                partition, index = record.value.split(b":")
                assert int(partition) == tp.partition
                assert record.offset == int(index)
                seen.setdefault(tp.partition, []).append(record.offset)
                total += 1
    return seen


@contextlib.contextmanager
def caught_up_consumer(servers: str, **options) -> Iterator[tuple[Consumer, str]]:
    """(a consumer assigned every partition of a new topic, the topic), once it has read the whole topic."""
    topic = make_topic(servers)
    total = PARTITIONS * ROUNDS * PER_ROUND
    with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest", **options) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        assert sum(map(len, read(consumer, total).values())) == total
        # Record sets are decoded as they are handed out, and a partition is fetched on only once its record set
        # is decoded: the Fetch that moves the last ones on may leave after the user read them. Wait for it.
        wait_for(lambda: positions_in_session(consumer), WAIT, interval=0.05,
                 message="the fetch session holding every partition at its position")
        yield consumer, topic


def positions_in_session(consumer: Consumer) -> bool:
    held = {tp: position for session in list(consumer._fetcher._sessions.values())
            for tp, (position, _) in dict(session.partitions).items()}
    return all(held.get(tp) == consumer.position(tp) for tp in consumer.assignment())


def test_a_1024_partition_topic_is_read_once_in_order_within_the_buffer_budget(embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topic = make_topic(servers)
    per_partition = ROUNDS * PER_ROUND
    with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest", fetch_max_bytes=BUDGET,
                  fetch_max_wait_ms=100, max_poll_records=1) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = read(consumer, 1)                        # positions known: the loop fetches from now on
        # Nobody hands records out: the buffers fill up to the budget (the data is several times larger), and no
        # more; a Fetch leaves only for a whole request's share of it, so the last share may stay empty.
        assert wait_for(lambda: consumer.metrics()["consumer-fetch-manager-metrics"]["buffered-bytes"]
                          >= BUDGET - BUDGET // REQUESTS_PER_BUDGET, WAIT)
        more = read(consumer, PARTITIONS * per_partition - 1)
        for partition, offsets in more.items():
            seen.setdefault(partition, []).extend(offsets)
        assert len(seen) == PARTITIONS
        assert all(offsets == list(range(per_partition)) for offsets in seen.values())
        assert not consumer.poll(0.3)                   # nothing twice
        metrics = consumer.metrics()["consumer-fetch-manager-metrics"]
        # Over budget by at most one batch per response: each of ours is far below 1 KB.
        assert 0 < metrics["buffered-bytes-max"] <= BUDGET + 1024
        assert metrics["buffered-bytes"] == 0


def test_incremental_fetches_list_only_the_partitions_that_moved(embedded_broker):
    servers = embedded_broker.bootstrap_servers
    per_partition = ROUNDS * PER_ROUND
    with caught_up_consumer(servers, fetch_max_wait_ms=100) as (consumer, topic):
        before = consumer.metrics()["consumer-fetch-manager-metrics"]
        moved = [5, 500, 1023]
        with Producer(bootstrap_servers=servers, linger_ms=0) as producer:
            for p in moved:
                producer.send_many(topic, [b"%d:%d" % (p, per_partition)], partition=p)
        seen = read(consumer, len(moved))
        assert seen == {p: [per_partition] for p in moved}
        # The Fetch that lists a moved partition at its new offset leaves once its record is decoded, and may
        # leave after the user read it (under load it had not left for all three: 0 listed, then 3).
        wait_for(lambda: positions_in_session(consumer), WAIT, interval=0.05,
                 message="the fetch session holding the moved partitions at their new positions")
        after = consumer.metrics()["consumer-fetch-manager-metrics"]
    requests = after["fetch-total"] - before["fetch-total"]
    listed = after["fetch-partitions-total"] - before["fetch-partitions-total"]
    # Each request lists only partitions whose fetch offset moved since the last one (a full request would
    # list all 1024): the moved ones, once each.
    assert requests > 0
    assert listed == len(moved)


def test_a_loop_turn_looks_only_at_the_partitions_that_changed(embedded_broker):
    # Fetches held by the broker for up to 3 s: while the loop turns below, at most one answer comes back.
    with caught_up_consumer(embedded_broker.bootstrap_servers, fetch_max_wait_ms=3000) as (consumer, _):
        metrics = consumer.metrics
        before = metrics()["consumer-fetch-manager-metrics"]
        turns = 50
        for _ in range(turns):                          # each wakeup is a loop turn, each turn a _maintain()
            consumer.client.loop.wakeup()
            time.sleep(0.002)
        after = metrics()["consumer-fetch-manager-metrics"]
    answers = after["fetch-total"] - before["fetch-total"]
    visited = after["partitions-visited-total"] - before["partitions-visited-total"]
    # A turn with nothing new looks at no partition; an answered fetch makes its partitions worth a look once,
    # and so may the last records handed out or a metadata refresh (a scan of the assignment per turn would
    # have looked at 50 x 1024).
    assert visited <= (answers + 2) * PARTITIONS
    assert answers <= 2
