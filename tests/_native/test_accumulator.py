"""The producer's record accumulator, driven directly as the sender drives it."""
from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.kafka._native.accumulator import RecordAccumulator
from fastmq.kafka._native.aio_batch import BatchBuilder
from fastmq._native.hashing import kafka_partition
from fastmq.kafka._native.records import RecordBatch
from fastmq.kafka.errors import IllegalStateError, KafkaTimeoutError, NotLeaderForPartitionError
from tests.support.waiting import wait_for


def drain_all(acc, now=None, complete=True, offsets=None, contents=None):
    """Drain every ready batch (as the sender would) and acknowledge it; returns the batches. A done batch
    lets go of its bytes (the accumulator reuses its memory): `contents` (a dict) keeps a copy per batch."""
    now = time.monotonic() + 3600 if now is None else now
    drained = []
    offsets = {} if offsets is None else offsets
    while True:
        nodes, _, _ = acc.ready(now)
        if not nodes:
            return drained
        for queues in nodes.values():
            for batch in acc.drain(queues, 1 << 30, now):
                drained.append(batch)
                if contents is not None:
                    contents[batch] = bytes(batch.payload)
                if complete:
                    tp = batch.topic_partition
                    acc.complete(batch, offsets.get(tp, 0))
                    offsets[tp] = offsets.get(tp, 0) + batch.record_count


def records_of(data):
    return [(r.key, r.value) for r in RecordBatch(data)]


def make(**config):
    acc = RecordAccumulator(**config)
    acc.update_topic("t", [1, 2, 1, 2])
    return acc, "t"


def test_keyed_records_use_the_java_partitioner_and_keep_order():
    acc, topic = make(batch_size=1000)
    futures = [acc.send(topic, None, b"key-%d" % (i % 7), b"value-%d" % i, None, None) for i in range(300)]
    contents = {}
    batches = drain_all(acc, contents=contents)
    by_partition = {}
    for batch in batches:
        by_partition.setdefault(batch.topic_partition.partition, []).extend(records_of(contents[batch]))
    for i, future in enumerate(futures):
        metadata = future.get(0)
        assert metadata.partition == kafka_partition(b"key-%d" % (i % 7), 4)
        assert by_partition[metadata.partition][metadata.offset] == (b"key-%d" % (i % 7), b"value-%d" % i)


def test_records_without_key_stick_to_one_partition_until_its_batch_fills():
    acc, topic = make(batch_size=2000)
    partitions = [acc.send(topic, None, None, b"x" * 100, None, None).topic_partition.partition
                  for _ in range(200)]
    runs = [[partitions[0], 0]]                       # [partition, records] for each stretch
    for p in partitions:
        if p != runs[-1][0]:
            runs.append([p, 0])
        runs[-1][1] += 1
    # A new batch starts a new stretch only when the previous batch filled (~18 records of 110 B in 2000 B);
    # the sticky choice may pick the same partition again, so stretches can be longer, never shorter.
    assert all(length >= 15 for _, length in runs[:-1]), runs
    assert len({p for p, _ in runs}) > 1


def test_explicit_partition_is_checked():
    acc, topic = make()
    assert acc.send(topic, 3, None, b"v", None, None).topic_partition.partition == 3
    with pytest.raises(ValueError):
        acc.send(topic, 4, None, b"v", None, None)
    with pytest.raises(TypeError):
        acc.send(topic, None, None, "text", None, None)


def test_unknown_topic_returns_none_for_the_caller_to_fetch_metadata():
    acc = RecordAccumulator()
    assert acc.send("nothing-known", None, None, b"v", None, None) is None


def test_linger_and_readiness():
    acc, topic = make(linger_ms=50, batch_size=1 << 20)
    acc.send(topic, 0, None, b"v", None, None)
    now = time.monotonic()
    nodes, next_check, unknown = acc.ready(now)
    assert nodes == {} and 0 < next_check <= 0.05 and unknown == []
    nodes, _, _ = acc.ready(now + 0.06)
    assert list(nodes) == [1]
    pending = acc.begin_flush()                    # a flush makes everything ready at once
    assert len(pending) == 1
    nodes, _, _ = acc.ready(now)
    assert list(nodes) == [1]
    acc.end_flush()


def test_partitions_without_leader_are_reported():
    acc = RecordAccumulator()
    acc.update_topic("t", [1, -1])
    acc.send("t", 1, None, b"v", None, None)
    nodes, _, unknown = acc.ready(time.monotonic() + 10)
    assert nodes == {} and unknown == ["t"]


def test_idempotent_sequences_are_assigned_at_drain_and_kept_on_retry():
    acc, topic = make(batch_size=200)
    acc.set_producer_id(77, 3)
    for i in range(20):
        acc.send(topic, 0, None, b"x" * 50, None, None)
    now = time.monotonic() + 10
    nodes, _, _ = acc.ready(now)
    first = acc.drain(nodes[1], 1 << 30, now)
    sequences = [b.base_sequence for b in first]
    assert sequences == [0]
    header = RecordBatch(first[0].payload)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 0)
    # A retry keeps the same bytes, hence the same sequence; later batches go after it.
    acc.retry(first[0], now)
    nodes, _, _ = acc.ready(now + 1)
    again = acc.drain(nodes[1], 1 << 30, now + 1)
    assert again[0] is first[0] and again[0].attempts == 2
    acc.complete(again[0], 0)
    rest = drain_all(acc)
    expected = first[0].record_count
    for batch in rest:
        assert batch.base_sequence == expected
        expected += batch.record_count


def test_a_reset_producer_id_restamps_unacknowledged_batches_in_order():
    acc, topic = make(batch_size=200)
    acc.set_producer_id(77, 3)
    for i in range(12):
        acc.send(topic, 0, None, b"%02d" % i + b"x" * 48, None, None)
    now = time.monotonic() + 10
    nodes, _, _ = acc.ready(now)
    (sent,) = acc.drain(nodes[1], 1 << 30, now)     # in flight under producer 77
    with pytest.raises(IllegalStateError):
        acc.reset_producer_id()
    assert acc.producer_identity == (77, 3)
    acc.retry(sent, now)                            # its answer came back: UNKNOWN_PRODUCER_ID
    acc.reset_producer_id()
    assert acc.producer_identity == (-1, -1)
    acc.set_producer_id(78, 0)
    contents = {}
    batches = drain_all(acc, now=now + 2, contents=contents)
    assert batches[0] is sent
    expected = 0
    for batch in batches:
        header = RecordBatch(contents[batch])
        assert header.validate_crc()
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (78, 0, expected)
        expected += batch.record_count
    values = [r.value[:2] for batch in batches for r in RecordBatch(contents[batch])]
    assert values == [b"%02d" % i for i in range(12)]


def test_split_halves_until_single_records_keeping_futures_callbacks_and_sequences():
    acc = RecordAccumulator(batch_size=1 << 20)
    acc.update_topic("t", [1])
    topic = "t"
    acc.set_producer_id(9, 1)
    futures = [acc.send(topic, 0, b"k%d" % i, b"%05d" % i + b"v" * 995, [("i", b"%d" % i)], None)
               for i in range(300)]
    seen = []
    futures[299].add_callback(seen.append)
    now = time.monotonic() + 10
    nodes, _, _ = acc.ready(now)
    (batch,) = acc.drain(nodes[1], 1 << 30, now)
    assert batch.base_sequence == 0 and batch.record_count == 300
    # The broker refuses it as too large: split, and split the first half once more.
    halves = acc.split(batch, now)
    assert [h.record_count for h in halves] == [150, 150]
    nodes, _, _ = acc.ready(now)
    (first_half,) = acc.drain(nodes[1], 1 << 30, now)
    quarters = acc.split(first_half, now)
    assert [q.record_count for q in quarters] == [75, 75]
    contents = {}
    drained = drain_all(acc, contents=contents)
    assert [b.record_count for b in drained] == [75, 75, 150]
    assert [b.base_sequence for b in drained] == [0, 75, 150]
    for child in drained:
        assert RecordBatch(contents[child]).base_sequence == child.base_sequence
    assert [f.get(1).offset for f in futures] == list(range(300))
    assert seen and seen[0].offset == 299
    assert [r.headers for r in RecordBatch(contents[drained[1]])][0] == [("i", b"75")]
    single = acc.send(topic, 0, None, b"v", None, None)
    nodes, _, _ = acc.ready(now)
    (lone,) = acc.drain(nodes[1], 1 << 30, now)
    with pytest.raises(ValueError):
        acc.split(lone, now)
    acc.fail(lone, RuntimeError("too large"))
    assert single.failed()


def test_memory_is_bounded_and_send_blocks_then_times_out():
    acc, topic = make(batch_size=1000, buffer_memory=3100, max_block_ms=200)
    for p in range(3):
        acc.send(topic, p, None, b"x" * 900, None, None)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        acc.send(topic, 3, None, b"x" * 900, None, None)
    assert time.monotonic() - start >= 0.15
    # Freeing memory unblocks a waiting sender.
    result = []
    waiter = threading.Thread(target=lambda: result.append(acc.send(topic, 3, None, b"y", None, None)))
    waiter.start()
    time.sleep(0.05)  # the sender stays blocked however long one waits
    assert not result
    drain_all(acc)
    waiter.join(5)
    assert result and result[0] is not None


def test_done_batches_give_their_storage_back_to_the_arena_for_the_next_ones():
    acc, topic = make(batch_size=1000, buffer_memory=10_000)
    for p in range(4):
        acc.send(topic, p, None, b"x" * 800, None, None)
    touched = acc.arena.touched
    assert acc.arena.in_use == 4 * 4096         # a block (4 KiB) a batch
    drain_all(acc)
    assert (acc.used_memory, acc.arena.in_use) == (0, 0)
    # New batches write into the blocks the done ones left: the arena touches no new memory.
    for p in range(3):
        acc.send(topic, p, None, b"y" * 800, None, None)
    assert acc.arena.touched == touched and acc.arena.in_use == 3 * 4096
    contents = {}
    drain_all(acc, contents=contents)
    assert sorted(records_of(data) for data in contents.values()) == [[(None, b"y" * 800)]] * 3
    # A record larger than the arena's blocks (batch_size) gets storage of its own, freed with its batch.
    acc.send(topic, 0, None, b"z" * 5000, None, None)
    assert acc.arena.outside >= 5000 and acc.used_memory == 5128
    drain_all(acc)
    assert (acc.used_memory, acc.arena.in_use, acc.arena.outside) == (0, 0, 0)


def test_a_payload_still_referenced_is_not_reused():
    acc, topic = make(batch_size=1000)
    acc.send(topic, 0, None, b"x" * 800, None, None)
    now = time.monotonic() + 10
    nodes, _, _ = acc.ready(now)
    (batch,) = acc.drain(nodes[1], 1 << 30, now)
    held = batch.payload                # as a queued socket write would hold it
    acc.complete(batch, 0)
    assert batch.payload is None and acc.arena.in_use == 4096     # the held block is not back yet
    acc.send(topic, 0, None, b"y" * 800, None, None)
    drain_all(acc)
    assert [r.value for r in RecordBatch(held)] == [b"x" * 800]
    del held
    assert acc.arena.in_use == 0


def test_delivery_timeout_expires_unsent_batches():
    acc, topic = make(delivery_timeout_ms=100)
    future = acc.send(topic, 0, None, b"v", None, None)
    assert acc.expire(time.monotonic()) == []
    expired = acc.expire(time.monotonic() + 1)
    assert len(expired) == 1
    with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
        future.get(0)
    assert future.failed() and not future.succeeded() and future.is_done


def test_failure_runs_errbacks_in_order_and_get_raises():
    acc, topic = make()
    futures = [acc.send(topic, 0, None, b"v%d" % i, None, None) for i in range(5)]
    order = []
    for i, future in enumerate(futures):
        future.add_errback(lambda exc, i=i: order.append(i))
        future.add_callback(lambda md: order.append("unexpected"))
    now = time.monotonic() + 10
    nodes, _, _ = acc.ready(now)
    (batch,) = acc.drain(nodes[1], 1 << 30, now)
    acc.fail(batch, NotLeaderForPartitionError())
    assert order == [0, 1, 2, 3, 4]
    with pytest.raises(NotLeaderForPartitionError):
        futures[0].get(0)
    assert futures[0].retriable()


def test_get_waits_for_another_thread():
    acc, topic = make()
    future = acc.send(topic, 0, None, b"v", None, None)
    with pytest.raises(KafkaTimeoutError):
        future.get(0.05)
    threading.Timer(0.05, lambda: drain_all(acc)).start()
    assert future.get(5).offset == 0


def test_abort_fails_everything_unsent_and_refuses_new_records():
    acc, topic = make()
    futures = [acc.send(topic, p % 4, None, b"v", None, None) for p in range(10)]
    acc.abort(IllegalStateError("aborted"))
    assert all(f.failed() for f in futures)
    with pytest.raises(IllegalStateError):
        acc.send(topic, 0, None, b"v", None, None)
    assert not acc.has_incomplete()


def test_concurrent_senders_lose_nothing():
    acc = RecordAccumulator(batch_size=4096, buffer_memory=1 << 20, max_block_ms=5000)
    acc.update_topic("t", [1, 2])
    topic = "t"
    stop = threading.Event()
    offsets = {}

    def sender():
        while not stop.is_set():
            drain_all(acc, offsets=offsets)
            time.sleep(0.001)  # a sender thread draining at its own pace
        drain_all(acc, offsets=offsets)

    drainer = threading.Thread(target=sender)
    drainer.start()
    results = {}

    def producer(n):
        results[n] = [acc.send(topic, n % 2, b"%d" % n, b"%d-%d" % (n, i), None, None) for i in range(3000)]

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    acc.begin_close()
    try:
        wait_for(lambda: not acc.has_incomplete(), 20, message="every batch drained")
    finally:
        stop.set()
        drainer.join(10)
    seen = {}
    for n, futures in results.items():
        for future in futures:
            metadata = future.get(1)
            assert (metadata.partition, metadata.offset) not in seen
            seen[(metadata.partition, metadata.offset)] = n
    assert len(seen) == 12000
    for n in range(4):
        offs = [f.get(0).offset for f in results[n]]
        assert offs == sorted(offs)          # one producer thread's records keep their order


def ready_partitions(acc, now):
    nodes, next_check, _ = acc.ready(now)
    return sorted(q.topic_partition.partition for queues in nodes.values() for q in queues), next_check


def test_lingering_partitions_wait_on_the_timer_not_in_the_due_set():
    acc = RecordAccumulator(batch_size=1000, linger_ms=1000)
    acc.update_topic("t", [1] * 500)
    topic = "t"
    start = time.monotonic()
    for p in range(500):
        acc.send(topic, p, None, b"v", None, None)
    partitions, next_check = ready_partitions(acc, start)
    assert partitions == [] and acc.due_partitions == []
    assert 0.5 < next_check <= 1.1                 # the first linger deadline, not a poll interval
    partitions, next_check = ready_partitions(acc, time.monotonic() + 2)
    assert partitions == list(range(500)) and next_check is None


def test_a_full_batch_is_due_at_once_and_a_drained_partition_leaves_the_due_set():
    acc, topic = make(batch_size=1000, linger_ms=60_000)
    now = time.monotonic()
    for _ in range(12):
        acc.send(topic, 2, None, b"x" * 100, None, None)   # 8 fit in a batch: the 9th opens a second one
    acc.send(topic, 3, None, b"x", None, None)              # lingers
    assert acc.due_partitions == [("t", 2)]
    partitions, _ = ready_partitions(acc, now)
    assert partitions == [2]
    nodes, _, _ = acc.ready(now)
    (batch,) = acc.drain(nodes[1], 1 << 30, now)
    acc.complete(batch, 0)
    # What is left of partition 2 lingers: ready() sends it back to the timer.
    assert ready_partitions(acc, now)[0] == [] and acc.due_partitions == []
    assert ready_partitions(acc, now + 61)[0] == [2, 3]


def test_a_ready_node_takes_its_lingering_partitions_along():
    # Leaders: partitions 0 and 2 on node 1, 1 and 3 on node 2. A full batch of partition 0 makes node 1 send:
    # partition 2's lingering batch joins that request; node 2's partitions keep lingering.
    acc, topic = make(batch_size=1000, linger_ms=60_000)
    now = time.monotonic()
    for p in (2, 1, 3):
        acc.send(topic, p, None, b"x", None, None)
    assert ready_partitions(acc, now) == ([], pytest.approx(60, abs=1))
    for _ in range(9):
        acc.send(topic, 0, None, b"x" * 100, None, None)     # 8 fit in a batch: the first one is full
    nodes, _, _ = acc.ready(now)
    assert {node: [q.topic_partition.partition for q in queues] for node, queues in nodes.items()} == {1: [0, 2]}
    drained = acc.drain(nodes[1], 1 << 30, now)
    assert [(b.topic_partition.partition, b.record_count) for b in drained] == [(0, 8), (2, 1)]
    # Partition 2's retry waits out its backoff; once it is due, node 1's request takes partition 0's lingering
    # second batch along.
    acc.retry(drained[1], now)
    assert ready_partitions(acc, now) == ([], pytest.approx(0.1, abs=0.05))
    acc.complete(drained[0], 0)
    assert ready_partitions(acc, now + 0.2)[0] == [0, 2]
    assert ready_partitions(acc, now + 61)[0] == [0, 1, 2, 3]


def drain_once(acc, now):
    """One ready() and drain() round, as one sender iteration: the batches it sends."""
    nodes, _, _ = acc.ready(now)
    return [batch for queues in nodes.values() for batch in acc.drain(queues, 1 << 30, now)]


def test_idempotent_batches_follow_the_first_batch_once_it_is_answered_and_retries_go_out_in_order():
    acc, topic = make(batch_size=200)
    acc.set_producer_id(77, 3)
    for _ in range(8):
        acc.send(topic, 0, None, b"x" * 50, None, None)     # several full batches of partition 0
    now = time.monotonic() + 10
    (first,) = drain_once(acc, now)
    # Until the partition's first batch is acknowledged, nothing follows it: a broker without state for the
    # producer would take the second batch's sequence as the start.
    assert drain_once(acc, now) == []
    acc.complete(first, 0)
    (second,) = drain_once(acc, now)
    (third,) = drain_once(acc, now)                           # acknowledged before: pipelined
    assert third.base_sequence == second.base_sequence + second.record_count
    # Retries are pipelined as well, in sequence order, before the batches after them (a broker takes a
    # connection's requests in order: one that comes ahead of an earlier batch is refused, not written).
    acc.retry(second, now)
    acc.retry(third, now)
    assert drain_once(acc, now + 1) == [second]
    assert drain_once(acc, now + 1) == [third]
    acc.complete(second, 3)
    # A new producer id starts over: its first batch goes alone again.
    acc.complete(third, 6)
    acc.set_producer_id(78, 0)
    assert len(drain_once(acc, now + 1)) == 1 and drain_once(acc, now + 1) == []


def test_a_retried_batch_waits_out_its_backoff():
    acc, topic = make(retry_backoff_ms=500)
    acc.send(topic, 0, None, b"v", None, None)
    now = time.monotonic() + 1
    nodes, _, _ = acc.ready(now)
    (batch,) = acc.drain(nodes[1], 1 << 30, now)
    acc.retry(batch, now)
    partitions, next_check = ready_partitions(acc, now + 0.1)
    assert partitions == [] and 0.3 < next_check <= 0.41
    assert ready_partitions(acc, now + 0.6)[0] == [0]


def test_flush_and_close_make_every_lingering_partition_due():
    acc, topic = make(linger_ms=60_000)
    for p in range(4):
        acc.send(topic, p, None, b"v", None, None)
    now = time.monotonic()
    assert ready_partitions(acc, now)[0] == []
    acc.begin_flush()
    assert ready_partitions(acc, now)[0] == [0, 1, 2, 3]
    acc.end_flush()
    drain_all(acc)
    acc.send(topic, 1, None, b"v", None, None)
    acc.begin_close()
    assert ready_partitions(acc, now)[0] == [1]


def test_batches_reserve_what_they_hold_not_batch_size():
    # 64 partitions x 256 KiB batches would be 16 MiB: the reservations grow with the records instead.
    acc = RecordAccumulator(batch_size=256 * 1024, buffer_memory=2 << 20, max_block_ms=100, linger_ms=60_000)
    acc.update_topic("t", [1] * 64)
    topic = "t"
    for i in range(64 * 10):
        acc.send(topic, i % 64, None, b"x" * 100, None, None)
    assert acc.used_memory == 64 * 16384
    # A batch grows its reservation step by step up to batch_size, where it closes.
    for _ in range(3000):
        acc.send(topic, 0, None, b"y" * 100, None, None)
    assert 64 * 16384 < acc.used_memory <= 2 << 20
    assert ("t", 0) in acc.due_partitions
    contents = {}
    drain_all(acc, contents=contents)
    assert acc.used_memory == 0
    assert sum(len(records_of(data)) for data in contents.values()) == 64 * 10 + 3000


def test_a_batch_reserves_at_least_the_bytes_it_holds():
    # 1 KiB records fill a 64 KiB batch: its reservation follows them up to batch_size (it stopped at the first
    # step when the builder's size was taken for the last record's), so buffer_memory bounds what batches
    # hold; its storage grew block by block to batch_size.
    acc = RecordAccumulator(batch_size=64 * 1024, buffer_memory=1 << 20, linger_ms=60_000)
    acc.update_topic("t", [1])
    topic = "t"
    for i in range(100):
        acc.send(topic, 0, None, b"x" * 1024, None, None)
        assert acc.used_memory >= (i + 1) * 1024
    now = time.monotonic() + 3600
    nodes, _, _ = acc.ready(now)
    (full,) = acc.drain(nodes[1], 1 << 30, now)
    assert full.reserved == 64 * 1024 >= len(full.payload) and 60 < full.record_count < 64
    assert full.payload.capacity == 64 * 1024
    acc.complete(full, 0)
    (rest,) = drain_all(acc, now=now)
    assert rest.record_count == 100 - full.record_count and acc.used_memory == 0


def test_a_send_waiting_for_memory_writes_into_the_storage_a_finished_batch_leaves():
    # A producer that runs ahead of the brokers: the memory is all in batches, and the next batch takes the
    # storage one that is done left in the arena (its pages are mapped: a busy partition's whole batch_size at
    # once), not fresh memory.
    acc = RecordAccumulator(batch_size=32768, buffer_memory=2 * 32768, max_block_ms=5000, linger_ms=60_000)
    acc.update_topic("t", [1, 1])
    topic = "t"
    for p in (0, 1):
        for _ in range(32):
            acc.send(topic, p, None, b"x" * 1000, None, None)
    assert acc.used_memory == 2 * 32768
    touched = acc.arena.touched
    blocked = threading.Thread(target=acc.send, args=(topic, 0, None, b"y" * 1000, None, None))
    blocked.start()
    wait_for(lambda: ("t", 1) in acc.due_partitions, 5)     # memory pressure made every partition due
    now = time.monotonic() + 3600
    nodes, _, _ = acc.ready(now)
    for batch in acc.drain(nodes[1], 1 << 30, now):
        acc.complete(batch, 0)
    blocked.join(5)
    assert not blocked.is_alive()
    (refilled,) = drain_all(acc, now=now, complete=False)
    assert refilled.record_count == 1 and refilled.reserved == 32768 == acc.used_memory
    assert acc.arena.touched == touched


def test_a_send_waiting_for_memory_wakes_once_a_share_is_free_or_nothing_more_will_come_back():
    # Woken for every finished batch, a send blocked on a full buffer appended one batch's worth and blocked
    # again: it waits for an eighth of buffer_memory (two batches here), unless no answer due would free more.
    acc = RecordAccumulator(batch_size=32768, buffer_memory=16 * 32768, max_block_ms=60_000, linger_ms=60_000)
    acc.update_topic("t", [1] * 17)
    now = time.monotonic() + 3600

    def fill_and_block():
        for p in range(16):
            for _ in range(32):
                acc.send("t", p, None, b"x" * 1000, None, None)
        assert acc.used_memory == 16 * 32768
        sent = []
        blocked = threading.Thread(target=lambda: sent.append(acc.send("t", 16, None, b"y", None, None)), daemon=True)
        blocked.start()
        return blocked, sent

    blocked, sent = fill_and_block()
    in_flight = acc.drain(acc.ready(now)[0][1], 1 << 30, now)
    assert len(in_flight) == 16 and acc.has_in_flight()
    acc.complete(in_flight[0], 0)
    blocked.join(0.2)
    assert blocked.is_alive()           # one batch free of sixteen, fifteen answers to come
    acc.complete(in_flight[1], 0)
    blocked.join(5)
    assert sent and not blocked.is_alive()
    for batch in in_flight[2:]:
        acc.complete(batch, 0)
    assert not acc.has_in_flight()
    drain_all(acc, now=now)
    # Full again, one batch in flight: its answer is the last due, so the send is woken with less free.
    blocked, sent = fill_and_block()
    (batch,) = acc.drain([acc.ready(now)[0][1][0]], 1 << 30, now)
    acc.complete(batch, 0)
    blocked.join(5)
    assert sent and not acc.has_in_flight()


def test_a_send_short_of_memory_makes_every_partition_due_and_wakes_the_sender():
    wakeups = []
    acc = RecordAccumulator(batch_size=16384, buffer_memory=4 * 16384, max_block_ms=5000, linger_ms=60_000,
                            wakeup=lambda: wakeups.append(1))
    acc.update_topic("t", [1] * 8)
    topic = "t"
    for p in range(4):
        acc.send(topic, p, None, b"v", None, None)
    assert acc.due_partitions == []
    blocked = threading.Thread(target=acc.send, args=(topic, 4, None, b"v", None, None))
    wakeups.clear()
    blocked.start()
    deadline = time.monotonic() + 5
    while not wakeups and time.monotonic() < deadline:
        time.sleep(0.001)
    assert wakeups and sorted(p for _, p in acc.due_partitions) == [0, 1, 2, 3]
    drain_all(acc, now=time.monotonic())            # no linger elapsed: pressure alone made them ready
    blocked.join(5)
    assert not blocked.is_alive() and acc.used_memory == 16384


def test_a_partition_whose_batch_filled_up_opens_the_next_one_at_batch_size():
    """A busy partition's next batch reserves batch_size at once (no growth step by step under the lock); other
    partitions' batches start with one reserve step."""
    acc, topic = make(batch_size=64 << 10, buffer_memory=1 << 20, linger_ms=60_000)
    acc.send(topic, 0, None, b"x" * 100, None, None)
    assert acc.used_memory == 16 << 10                  # a first batch: one reserve step
    while len(acc.incomplete) < 2:
        acc.send(topic, 0, None, b"x" * 100, None, None)
    full = acc.used_memory
    assert full >= 2 * (64 << 10)                       # the full one, and the next one whole
    acc.send(topic, 1, None, b"x" * 100, None, None)
    assert acc.used_memory == full + (16 << 10)


def test_a_drained_batch_keeps_only_the_pages_it_filled_and_the_next_batches_grow_into_the_rest():
    """Over many partitions the batches waiting for the broker are most of the producer's memory: a drained
    batch's block gives the arena back the pages past its bytes (a 22 KiB batch held a 32 KiB block), and the
    next batches' first, smaller blocks are taken from them rather than from fresh memory."""
    acc, topic = make(batch_size=256 << 10, buffer_memory=16 << 20, linger_ms=60_000)
    now = time.monotonic() + 3600
    for _ in range(200):
        acc.send(topic, 0, None, b"x" * 100, None, None)
    (batch,) = acc.drain(acc.ready(now)[0][1], 1 << 30, now)
    held = len(batch.payload)
    assert 20 << 10 < held <= 24 << 10 and batch.payload.capacity == 24 << 10 == acc.arena.in_use
    touched = acc.arena.touched
    acc.send(topic, 1, None, b"x" * 100, None, None)    # a first block of one page
    acc.send(topic, 2, None, b"x" * 5000, None, None)   # of two pages
    assert acc.arena.in_use == (24 << 10) + 4096 + 8192 and acc.arena.touched == touched
    acc.complete(batch, 0)
    del batch
    drain_all(acc, now=now)
    assert acc.arena.in_use == 0 and acc.used_memory == 0


def placed(places) -> list[tuple[int, int]]:
    """send_placed()'s places as (batch number, index in the batch) pairs."""
    numbers = memoryview(places).cast("i")
    return list(zip(numbers[::2], numbers[1::2]))


def test_send_placed_says_where_each_record_went_as_send_would():
    acc, topic = make(batch_size=1000)
    values = [b"value-%d" % i for i in range(300)]
    keys = [None if i % 3 == 0 else b"key-%d" % (i % 7) for i in range(300)]
    headers = [[("h", b"%d" % i)] if i % 5 == 0 else None for i in range(300)]
    batches, places = acc.send_placed(topic, None, values, keys, headers, 1234)
    assert len(batches) == len(set(batches)) > 4          # keyed records over 4 partitions, batches filled
    where = placed(places)
    assert len(where) == 300
    contents = {}
    drained = drain_all(acc, contents=contents)
    assert set(batches) <= set(drained)
    for i, (number, index) in enumerate(where):
        batch = batches[number]
        record = list(RecordBatch(contents[batch]))[index]
        assert (record.key, record.value, record.timestamp) == (keys[i], values[i], 1234)
        assert record.headers == (headers[i] or [])
        if keys[i] is not None:
            assert batch.topic_partition.partition == kafka_partition(keys[i], 4)
    assert acc.records_appended == 300


def test_send_placed_checks_its_columns_and_knows_no_unknown_topic():
    acc, topic = make()
    assert acc.send_placed("elsewhere", None, [b"v"], None, None, None) is None
    with pytest.raises(ValueError, match="2 keys for 1 values"):
        acc.send_placed(topic, None, [b"v"], [b"a", b"b"], None, None)
    with pytest.raises(ValueError, match="Unrecognized partition 4"):
        acc.send_placed(topic, 4, [b"v"], None, None, None)
    with pytest.raises(TypeError, match="not str"):
        acc.send_placed(topic, None, [b"v", "text"], None, None, None)
    acc, topic = make()
    (batch,), places = acc.send_placed(topic, 2, [b"v", None, bytearray(b"w")], None, None, None)
    assert batch.topic_partition.partition == 2 and placed(places) == [(0, 0), (0, 1), (0, 2)]
    contents = {}
    drain_all(acc, contents=contents)
    assert [r.value for r in RecordBatch(contents[batch])] == [b"v", None, b"w"]


def test_watch_calls_once_a_batch_is_done_and_follows_a_split_to_its_first_child():
    acc = RecordAccumulator(batch_size=1 << 20)
    acc.update_topic("t", [1])
    (batch,), places = acc.send_placed("t", 0, [b"v" * 1000] * 10, None, None, None)
    calls = []
    acc.watch(batch, lambda done, outcome: calls.append(done))
    now = time.monotonic() + 10
    nodes, _, _ = acc.ready(now)
    (drained,) = acc.drain(nodes[1], 1 << 30, now)
    first, second = acc.split(batch, now)
    assert calls == [] and batch.leaves() == [first, second]
    nodes, _, _ = acc.ready(now)
    acc.complete(acc.drain(nodes[1], 1 << 30, now)[0], 0)
    assert calls == [batch] and not second.is_done     # the first child is done: the caller looks at the leaves
    acc.watch(second, lambda done, outcome: calls.append(done))
    drain_all(acc)
    assert calls == [batch, second]
    acc.watch(second, lambda done, outcome: calls.append(outcome))      # already done: at once
    assert calls[-1] is second
    (failing,), _ = acc.send_placed("t", 0, [b"v"], None, None, None)
    acc.watch(failing, lambda done, outcome: calls.append(outcome))
    nodes, _, _ = acc.ready(now)
    acc.fail(acc.drain(nodes[1], 1 << 30, now)[0], NotLeaderForPartitionError())
    assert isinstance(calls[-1], NotLeaderForPartitionError)


def test_a_send_that_fills_a_batch_calls_batch_full_once_and_no_other_send_does():
    # The producer gives its I/O loop a turn there (IOLoop.give_turn); wakeup() stays for the other wake-ups.
    full, wakeups = [], []
    acc, topic = make(batch_size=1000, linger_ms=60000, wakeup=lambda: wakeups.append(1),
                      batch_full=lambda: full.append(len(acc.due_partitions)))
    sent = 0
    while not full:
        acc.send(topic, 0, None, b"v" * 100, None, None)
        sent += 1
        assert sent < 100, "a 1000-byte batch did not fill with 100-byte records"
    assert full == [1] and acc.due_partitions == [(topic, 0)]     # called once the full batch was made due
    woken = len(wakeups)        # the first batch's linger timer may have woken the sender; the fill did not
    for _ in range(3):
        acc.send(topic, 0, None, b"v" * 100, None, None)          # into the next batch, which is not full
    assert full == [1] and len(wakeups) == woken


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.one_of(
    st.tuples(st.just("send"), st.sampled_from(["a", "b"]), st.integers(0, 39), st.binary(max_size=300)),
    st.tuples(st.just("drain")), st.tuples(st.just("grow"), st.sampled_from(["a", "b"]))), max_size=300))
def test_appends_jumping_between_partitions_keep_every_partitions_records_in_order(steps):
    # The append path keeps, per partition, the addresses of its open batch's objects to prefetch when an append
    # switches partition: they go stale as batches close, grow and are drained, and topics gain partitions.
    acc = RecordAccumulator(batch_size=2048, linger_ms=0, buffer_memory=1 << 26, idempotent=False)
    counts = {"a": 8, "b": 3}
    for topic, count in counts.items():
        acc.update_topic(topic, [1] * count)
    sent, received, contents = {}, {}, {}

    def drain() -> None:
        for batch in drain_all(acc, contents=contents):
            received.setdefault(tuple(batch.topic_partition), []).extend(v for _, v in records_of(contents[batch]))

    for step in steps:
        if step[0] == "send":
            _, topic, partition, value = step
            partition %= counts[topic]
            acc.send(topic, partition, None, value, None, None)
            sent.setdefault((topic, partition), []).append(value)
        elif step[0] == "grow":
            counts[step[1]] += 5
            acc.update_topic(step[1], [1] * counts[step[1]])
        else:
            drain()
    drain()
    assert received == sent
    assert acc.used_memory == 0 and acc.arena.in_use == 0 and acc.arena.outside == 0


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 12_000)), min_size=1, max_size=120),
       held=st.integers(0, 3))
def test_a_producer_short_of_memory_waits_for_the_sender_and_loses_nothing(values, held):
    # 24 KiB of buffer memory for 6 partitions of 8 KiB batches: sends keep waiting for the sender (another
    # thread, which holds `held` drained batches in flight before it completes the oldest), batches move to larger
    # blocks as they grow, records larger than a batch take storage outside the arena. Every record arrives in
    # order, and once everything is done every block is back in the arena.
    acc = RecordAccumulator(batch_size=8192, linger_ms=0, buffer_memory=24 * 1024, max_block_ms=30_000,
                            idempotent=False)
    acc.update_topic("t", [1] * 6)
    sent, received = {}, {}
    stop = threading.Event()

    def sender() -> None:
        flying = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (stop.is_set() and not acc.has_incomplete()):
            now = time.monotonic() + 3600
            nodes, _, _ = acc.ready(now)
            drained = [batch for queues in nodes.values() for batch in acc.drain(queues, 1 << 30, now)]
            for batch in drained:
                received.setdefault(batch.topic_partition.partition, []).extend(
                    v for _, v in records_of(batch.payload))
            flying.extend(drained)
            while flying and (len(flying) > held or not drained):
                acc.complete(flying.pop(0), 0)
            if not drained:
                time.sleep(0.0005)

    thread = threading.Thread(target=sender)
    thread.start()
    try:
        for n, (partition, size) in enumerate(values):
            value = bytes([n % 256]) * size
            acc.send("t", partition, None, value, None, None)
            sent.setdefault(partition, []).append(value)
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
    assert received == sent
    assert (acc.used_memory, acc.arena.in_use, acc.arena.outside) == (0, 0, 0)


def built(acc, values):
    """open_builder()'s builder filled with `values` through aiokafka's BatchBuilder: (builder, count, size,
    key and value bytes), as send_built() takes them."""
    batch = BatchBuilder(acc.open_builder())
    for value in values:
        assert batch.append(key=None, value=value, timestamp=None) is not None
    return batch.take()


def test_a_built_batch_queues_after_the_partitions_records_and_closes_its_open_batch():
    acc, topic = make(batch_size=4000)
    for i in range(3):
        acc.send(topic, 1, None, b"before-%d" % i, None, None)
    builder, count, size, data_bytes = built(acc, [b"built-%d" % i for i in range(20)])
    used = acc.used_memory
    sent = acc.send_built(topic, 1, builder, count, size, data_bytes)
    assert (sent.record_count, sent.topic_partition.partition) == (20, 1)
    assert acc.used_memory == used + size and acc.records_appended == 23
    after = acc.send(topic, 1, None, b"after", None, None)
    assert after.topic_partition.partition == 1
    contents = {}
    drained = drain_all(acc, contents=contents)
    assert [batch.record_count for batch in drained] == [3, 20, 1]
    assert [value for batch in drained for _, value in records_of(contents[batch])] == (
        [b"before-%d" % i for i in range(3)] + [b"built-%d" % i for i in range(20)] + [b"after"])
    assert sent.is_done and after.get(0).offset == 23 and acc.used_memory == 0


def test_send_built_checks_its_partition_and_state_and_knows_no_unknown_topic():
    acc, topic = make()
    args = built(acc, [b"v"])
    assert acc.send_built("elsewhere", 0, *args) is None
    with pytest.raises(ValueError, match="Unrecognized partition 4"):
        acc.send_built(topic, 4, *args)
    with pytest.raises(ValueError, match="at least one record"):
        acc.send_built(topic, 0, args[0], 0, args[2], 0)
    acc.begin_close()
    with pytest.raises(IllegalStateError):
        acc.send_built(topic, 0, *args)


def test_send_built_waits_for_buffer_memory_then_times_out():
    acc, topic = make(batch_size=1000, buffer_memory=2500, max_block_ms=200)
    for p in range(2):
        acc.send(topic, p, None, b"x" * 900, None, None)
    args = built(acc, [b"y" * 300, b"z" * 300])
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        acc.send_built(topic, 2, *args)
    assert time.monotonic() - start >= 0.15
    drain_all(acc)
    assert acc.send_built(topic, 2, *args).record_count == 2


def test_sends_that_alternate_topics_and_name_them_by_equal_strings_reach_each_topic():
    # The last topic is recognised by its name's identity: equal names made anew, and the other topic in between,
    # still find the right partitions.
    acc = RecordAccumulator()
    acc.update_topic("left", [1])
    acc.update_topic("right", [1, 1])
    sent = []
    for i in range(6):
        name = "".join(["left", "right"][i % 2])         # a new str object each time
        sent.append((name, acc.send(name, i % 2, None, b"%d" % i, None, None).topic_partition))
    assert all(tp.topic == name and tp.partition == (0 if name == "left" else 1) for name, tp in sent)
    assert acc.send("missing", None, None, b"x", None, None) is None
    contents = {}
    drain_all(acc, contents=contents)
    assert sorted((b.topic_partition.topic, v) for b in contents for _, v in records_of(contents[b])) == (
        [("left", b"0"), ("left", b"2"), ("left", b"4"), ("right", b"1"), ("right", b"3"), ("right", b"5")])
