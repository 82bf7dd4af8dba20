"""fastmq.kafka._native.fetch_state: the consumer's compiled per-partition fetch bookkeeping, on its own (the
fetcher's tests drive it against brokers). Real metadata (ClusterMetadata fed a MetadataResponse), real Fetch
responses (the protocol's structs) and the real record decoder."""
from __future__ import annotations

import math
from collections import deque

from fastmq.kafka import protocol as kp
from fastmq.kafka._native.fetch_state import (
    CompletedFetch, PartitionState, changed_partitions, complete_fetches, end_fetch, sort_response, sort_visits,
    set_end_offset, start_fetch, take_touched,
)
from fastmq.kafka._native.records import RecordBatchBuilder
from fastmq.kafka.cluster import ClusterMetadata
from fastmq.kafka.fetcher import make_decoder
from fastmq.kafka.structs import TopicPartition

M = kp.MetadataResponse
F = kp.FetchResponse


def metadata(cluster: ClusterMetadata, leaders: dict[int, tuple[int, int]]) -> None:
    """Topic "t" with partition -> (leader, leader epoch)."""
    cluster.update(M(brokers=[M.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9092 + n) for n in (1, 2)],
                     topics=[M.MetadataResponseTopic(name="t", partitions=[
                         M.MetadataResponsePartition(partition_index=p, leader_id=leader, leader_epoch=epoch)
                         for p, (leader, epoch) in leaders.items()])]), 0.0, all_topics=True)


def states(count: int, position: int | None = 0) -> dict[TopicPartition, PartitionState]:
    assignment = {}
    for p in range(count):
        state = assignment[TopicPartition("t", p)] = PartitionState(TopicPartition("t", p))
        state.position = position
    return assignment


def test_a_partition_state_keeps_its_python_meaning():
    state = PartitionState(TopicPartition("t", 3))
    assert (state.position, state.reset_to, state.highwater, state.fetch_offset) == (None, None, None, None)
    assert (state.epoch, state.fetch_epoch, state.reset_epoch, state.queued, state.drained) == (0, -1, -1, 0, 0)
    assert not state.has_position and not state.is_fetchable() and not state.awaiting_reset
    state.position, state.leader_epoch = 7, 4
    state.epoch += 1
    assert state.is_fetchable() and state.epoch == 1 and state.leader_epoch == 4
    assert {state: 1}[state] == 1 and "t-3 position=7 epoch=1" in repr(state)


def test_visits_are_sorted_into_fetches_lookups_and_leaderless_per_leader():
    cluster = ClusterMetadata()
    metadata(cluster, {0: (1, 5), 1: (2, 6), 2: (1, 5), 3: (-1, 0)})
    assignment = states(6)
    s = [assignment[TopicPartition("t", p)] for p in range(6)]
    s[2].reset_to, s[2].position = -2, None          # an offset lookup wanted
    s[4].retry_at = 50.0                             # in a backoff
    s[5].queued = 2                                  # its buffers are full
    revoked = PartitionState(TopicPartition("t", 0))
    fetches, resets, leaderless, retry_due = sort_visits([*s, revoked], assignment, 10.0, cluster, 2)
    assert fetches == {1: [(s[0], 0, 0)], 2: [(s[1], 0, 0)]}
    assert resets == {1: [(s[2], 0)]} and leaderless == [s[3]] and retry_due == 50.0
    # A fetch moves to the position of a new epoch; a lookup on the wire (its epoch) is not sent again.
    s[0].position, s[0].epoch, s[2].reset_epoch = 40, 1, 0
    fetches, resets, _, retry_due = sort_visits(s, assignment, 60.0, cluster, 2)
    assert fetches[1] == [(s[0], 1, 40)] and resets == {} and math.isinf(retry_due)
    # Record sets fetched ahead of their decode count toward the prefetch depth as queued ones.
    s[0].queued, s[0].waiting = 1, 1
    assert s[0] not in [item[0] for item in sort_visits(s, assignment, 60.0, cluster, 2)[0].get(1, [])]
    s[0].waiting = 0
    assert s[0] in [item[0] for item in sort_visits(s, assignment, 60.0, cluster, 2)[0][1]]


def test_a_fetch_marks_its_partitions_in_flight_with_the_leader_epoch_of_the_newest_metadata():
    cluster = ClusterMetadata()
    metadata(cluster, {0: (1, 5), 1: (1, 6)})
    assignment = states(2)
    a, b = assignment.values()
    items = [(a, 0, 10), (b, 0, 20)]
    wanted, sent = start_fetch(items, cluster)
    assert wanted == {a.tp: (10, 5), b.tp: (20, 6)} and sent == {a.tp: items[0], b.tp: items[1]}
    assert a.in_flight and b.in_flight
    assert changed_partitions(wanted, {a.tp: (10, 5), b.tp: (19, 6)}) == [b.tp]
    touched: deque[PartitionState] = deque()
    end_fetch(sent, touched)
    assert not a.in_flight and not b.in_flight and list(touched) == [a, b]
    metadata(cluster, {0: (2, 7), 1: (1, 6)})       # the leader moved: looked up again
    wanted, sent = start_fetch([(a, 0, 10)], cluster)
    assert wanted == {a.tp: (10, 7)}
    end_fetch(sent, deque())
    assert sort_visits([a], assignment, 0.0, cluster, 2)[0] == {2: [(a, 0, 0)]}
    visit: dict[PartitionState, None] = {b: None}
    take_touched(touched, visit)
    assert list(visit) == [b, a] and not touched


def batch(base_offset: int, count: int) -> bytes:
    builder = RecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20, base_offset=base_offset)
    for delta in range(count):
        builder.append(delta, 1_700_000_000_000, None, b"v%d" % (base_offset + delta), [])
    return bytes(builder.build())


def test_a_response_is_matched_to_what_was_sent_and_queued_for_the_user():
    assignment = states(4)
    s = list(assignment.values())
    sent = {state.tp: (state, 0, 5) for state in s}
    s[1].epoch = 1                                  # sought while the fetch was out: its answer is dropped
    parts_data = [F.PartitionData(partition_index=0, high_watermark=8, last_stable_offset=8, log_start_offset=0,
                                  records=batch(5, 3)),
                  F.PartitionData(partition_index=1, high_watermark=9, records=batch(5, 1)),
                  F.PartitionData(partition_index=2, error_code=1, high_watermark=-1),
                  F.PartitionData(partition_index=9, high_watermark=1, records=batch(0, 1))]   # never asked for
    response = [F.FetchableTopicResponse(topic="t", partitions=parts_data)]
    parts, targets, errors, unlearned, nbytes = sort_response(response, False, {}, sent, assignment)
    # The record set's batch headers say it ends at 8: the next fetch may leave from there before it is decoded.
    assert [part[1:4] for part in parts] == [("t", 0, 5)] and targets == [(s[0], 0, 5, len(batch(5, 3)), 8)]
    assert errors == [(s[2], 0, 5, 1)] and nbytes == len(batch(5, 3))
    assert not s[0].in_flight and s[0].fetch_offset == 8 and s[0].waiting == 1 and not s[2].in_flight
    assert (s[0].highwater, s[0].last_stable_offset, s[0].log_start_offset, s[1].highwater) == (8, 8, 0, None)
    assert unlearned                                # partition 3 was left out and never had a high watermark
    s[3].highwater = 4
    s[1].highwater = 0
    assert not sort_response(response, False, {}, sent, assignment)[3]
    # By topic id (Fetch v13+): the name comes from the metadata's map; an unknown id is skipped.
    assert sort_response([F.FetchableTopicResponse(topic_id="id-t", partitions=parts_data)], True, {"id-t": "t"},
                         sent, assignment)[1] == targets
    assert sort_response([F.FetchableTopicResponse(topic_id="other", partitions=parts_data)], True, {"id-t": "t"},
                         sent, assignment)[0] == []

    decoder = make_decoder(check_crcs=True, read_committed=False, key_deserializer=None, value_deserializer=None)
    results, end = decoder.decode_many(parts, 0, 20000)
    completed: deque[CompletedFetch] = deque()
    touched: deque[PartitionState] = deque()
    size = len(batch(5, 3))
    s[0].fetch_offset = 11                          # the next fetch's set was released meanwhile
    s[0].waiting = 1                                # (the sort_response calls above each released this one)
    assert complete_fetches(targets, 0, results, completed, touched, 99.0) == (1, 3, size, size, [])
    assert not s[0].in_flight and list(touched) == [s[0]] and s[0].fetch_offset == 11 and s[0].waiting == 0
    fetch = completed[0]
    assert (fetch.state, fetch.epoch, fetch.position, fetch.next_offset, fetch.error, fetch.index) == (
        s[0], 0, 5, 8, None, 0)
    assert [record.value for record in fetch.records] == [b"v5", b"v6", b"v7"]
    assert fetch.size == size and fetch.bytes_per_record == size / 3
    assert s[0].queued == 1 and s[0].retry_at == 0.0


def test_a_partition_off_scan_ahead_stays_in_flight_until_its_record_set_is_decoded():
    assignment = states(1)
    state = assignment[TopicPartition("t", 0)]
    state.scan_ahead = False
    sent = {state.tp: (state, 0, 5)}
    response = [F.FetchableTopicResponse(topic="t", partitions=[
        F.PartitionData(partition_index=0, high_watermark=8, records=batch(5, 3))])]
    parts, targets, _, _, _ = sort_response(response, False, {}, sent, assignment)
    assert targets == [(state, 0, 5, len(batch(5, 3)), -1)] and state.in_flight
    decoder = make_decoder(check_crcs=True, read_committed=False, key_deserializer=None, value_deserializer=None)
    results, _ = decoder.decode_many(parts, 0, 20000)
    assert complete_fetches(targets, 0, results, deque(), deque(), 99.0)[4] == []
    # a set that decoded as the headers said turns scan_ahead back on
    assert not state.in_flight and state.fetch_offset == 8 and state.scan_ahead


def test_a_record_set_that_decodes_short_of_where_its_headers_end_is_listed_as_disagreed():
    assignment = states(1)
    state = assignment[TopicPartition("t", 0)]
    bad = bytearray(batch(0, 2) + batch(2, 2))
    bad[-1] ^= 0xFF                                 # the second batch's CRC no longer matches
    sent = {state.tp: (state, 0, 0)}
    response = [F.FetchableTopicResponse(topic="t", partitions=[
        F.PartitionData(partition_index=0, high_watermark=4, records=bytes(bad))])]
    parts, targets, _, _, _ = sort_response(response, False, {}, sent, assignment)
    assert targets[0][4] == 4 and state.fetch_offset == 4  # the next fetch may leave from past the bad batch ...
    decoder = make_decoder(check_crcs=True, read_committed=False, key_deserializer=None, value_deserializer=None)
    results, _ = decoder.decode_many(parts, 0, 20000)
    completed: deque[CompletedFetch] = deque()
    assert complete_fetches(targets, 0, results, completed, deque(), 99.0)[4] == [(state, 0)]
    assert not state.scan_ahead and state.waiting == 0  # ... the caller makes that stale; fetches wait for decodes
    assert completed[0].next_offset == 2 and completed[0].error is not None and len(completed[0].records) == 2


def test_record_set_end_reads_v2_batch_headers_only():
    from fastmq.kafka.record.legacy_records import LegacyRecordBatchBuilder
    assert set_end_offset(batch(5, 3) + batch(8, 2), 5) == 10
    assert set_end_offset(batch(5, 3) + batch(8, 2)[:-1], 5) == 8     # the last batch cut short
    assert set_end_offset(batch(5, 3)[:30], 5) == -1                  # no whole batch
    assert set_end_offset(batch(0, 3), 5) == -1                       # nothing past the fetch offset
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    legacy.append(0, 0, None, b"v")
    assert set_end_offset(bytes(legacy.build()), 0) == -1             # legacy message sets: the decoder decides


def test_a_record_set_that_cannot_be_read_is_queued_with_its_error_and_backs_the_partition_off():
    assignment = states(1)
    state = assignment[TopicPartition("t", 0)]
    bad = bytearray(batch(0, 2))
    bad[-1] ^= 0xFF                                 # the CRC no longer matches
    targets = [(state, 0, 0, len(bad), -1)]
    decoder = make_decoder(check_crcs=True, read_committed=False, key_deserializer=None, value_deserializer=None)
    results, _ = decoder.decode_many([(bytes(bad), "t", 0, 0, None)], 0, 20000)
    completed: deque[CompletedFetch] = deque()
    assert complete_fetches(targets, 0, results, completed, deque(), 99.0) == (1, 0, len(bad), len(bad), [])
    assert completed[0].error is not None and completed[0].records == [] and state.retry_at == 99.0
