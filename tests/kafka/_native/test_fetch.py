"""The consumer's compiled record decoder (fastmq/kafka/_native/fetch.pyx), against kafka-python's pure-Python
record reader as the oracle, plus transactions, legacy message sets and bad input."""
from __future__ import annotations

import copy
import gc
import pickle
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import MemoryRecords as PeerMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as PeerBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as PeerLegacyBuilder

from fastmq.kafka._native.fetch import NO_HEADERS, RecordDecoder
from fastmq.kafka._native.records import RecordBatchBuilder
from fastmq.errors import FastMQError
from fastmq.kafka.errors import CorruptRecordError
from fastmq.kafka.structs import ConsumerRecord

TS = 1_700_000_000_000


def peer_batch(base_offset: int, records: list, codec: int = 0) -> bytes:
    """A v2 batch written by kafka-python (independent of fastmq's builder), moved to base_offset."""
    builder = PeerBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for delta, (timestamp, key, value, headers) in enumerate(records):
        builder.append(delta, timestamp, key, value, headers)
    data = bytearray(builder.build())
    data[0:8] = struct.pack(">q", base_offset)
    return bytes(data)


def fastmq_batch(base_offset: int, count: int, *, producer_id: int = -1, transactional: bool = False,
                 control_type: int | None = None, value: bytes = b"v") -> bytes:
    builder = RecordBatchBuilder(2, 0, transactional, producer_id, 0 if producer_id >= 0 else -1,
                                 0 if producer_id >= 0 else -1, 1 << 30, base_offset=base_offset,
                                 control=control_type is not None)
    if control_type is not None:
        builder.append(0, TS, struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, 0), [])
    else:
        for delta in range(count):
            builder.append(delta, TS + delta, None, value + str(base_offset + delta).encode(), [])
    return bytes(builder.build())


def expected(record_set: bytes, topic: str, partition: int, fetch_offset: int) -> list[tuple]:
    """What kafka-python's reader finds, as ConsumerRecord field tuples (headers as lists)."""
    out = []
    records = PeerMemoryRecords(record_set)
    while records.has_next():
        batch = records.next_batch()
        for record in batch:
            if record.offset < fetch_offset:
                continue
            headers = list(record.headers)
            out.append((topic, partition, batch.leader_epoch, record.offset, record.timestamp,
                        record.timestamp_type, record.key, record.value, headers, None,
                        -1 if record.key is None else len(record.key), -1 if record.value is None else len(record.value),
                        sum(len(k.encode()) + (len(v) if v is not None else 0) for k, v in headers) if headers else -1))
    return out


def as_tuples(records: list) -> list[tuple]:
    return [tuple(list(r.headers) if i == 8 else field for i, field in enumerate(r)) for r in records]


header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8)))
record = st.tuples(st.integers(0, 10_000).map(lambda d: TS + d), st.one_of(st.none(), st.binary(max_size=20)),
                   st.one_of(st.none(), st.binary(max_size=60)), st.lists(header, max_size=3))


@given(st.lists(st.lists(record, min_size=1, max_size=8), min_size=1, max_size=4),
       st.sampled_from([0, 1, 2, 3, 4]), st.integers(0, 40), st.booleans())
def test_decodes_what_kafka_python_reads(batches, codec, fetch_offset, tuple_headers):
    offset, parts = 0, []
    for batch in batches:
        parts.append(peer_batch(offset, batch, codec))
        offset += len(batch)
    record_set = b"".join(parts)
    decoder = RecordDecoder(ConsumerRecord, tuple_headers=tuple_headers)
    records, next_offset, error = decoder.decode(memoryview(record_set), "t", 3, fetch_offset)
    assert error is None
    assert as_tuples(records) == expected(record_set, "t", 3, fetch_offset)
    assert next_offset == max(offset, fetch_offset)
    assert all(type(r) is ConsumerRecord for r in records)
    assert all(isinstance(r.headers, tuple if tuple_headers else list) for r in records)


def test_records_are_untracked_by_the_collector_only_when_nothing_in_them_can_form_a_cycle():
    record_set = peer_batch(0, [(TS, b"k", b"v", [("h", b"x")]), (TS, None, b"v", [])])
    immutable, _, _ = RecordDecoder(ConsumerRecord, tuple_headers=True).decode(record_set, "t", 0, 0)
    assert not any(gc.is_tracked(r) for r in immutable)
    assert not gc.is_tracked(immutable[0].headers)
    listed, _, _ = RecordDecoder(ConsumerRecord, tuple_headers=False).decode(record_set, "t", 0, 0)
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.headers) for r in listed)
    deserialized, _, _ = RecordDecoder(ConsumerRecord, tuple_headers=True,
                                       value_deserializer=lambda v: [v]).decode(record_set, "t", 0, 0)
    assert all(gc.is_tracked(r) for r in deserialized)
    keyed, _, _ = RecordDecoder(ConsumerRecord, key_deserializer=lambda k: [k],
                                deserialize_null=True).decode(record_set, "t", 0, 0)
    assert all(gc.is_tracked(r) for r in keyed)
    atoms, _, _ = RecordDecoder(ConsumerRecord, key_deserializer=bytes,
                                value_deserializer=bytes.decode).decode(record_set, "t", 0, 0)
    assert not any(gc.is_tracked(r) for r in atoms) and atoms[0].key == b"k" and atoms[0].value == "v"


def test_records_without_headers_share_one_read_only_empty_list_whose_copies_are_plain_lists():
    record_set = peer_batch(0, [(TS, None, b"a", []), (TS, None, b"b", []), (TS, None, b"c", [("h", b"x")])])
    records, _, _ = RecordDecoder(ConsumerRecord, tuple_headers=False).decode(record_set, "t", 0, 0)
    empty = records[0].headers
    assert empty is records[1].headers is NO_HEADERS and empty == [] and isinstance(empty, list)
    assert type(records[2].headers) is list and records[2].headers == [("h", b"x")]
    for change in (lambda h: h.append(("k", b"v")), lambda h: h.extend([]), lambda h: h.insert(0, 1),
                   lambda h: h.__setitem__(slice(None), [1]), lambda h: h.__iadd__([1]), lambda h: h.clear()):
        with pytest.raises(TypeError, match="list\\(record.headers\\)"):
            change(empty)
    assert NO_HEADERS == []
    for copied in (copy.copy(empty), copy.deepcopy(empty), pickle.loads(pickle.dumps(empty)), list(empty)):
        assert type(copied) is list and copied == []
        copied.append(("k", b"v"))
    assert type(pickle.loads(pickle.dumps(records[0])).headers) is list


def test_truncated_last_batch_is_left_for_the_next_fetch():
    first, second = fastmq_batch(0, 5), fastmq_batch(5, 5)
    decoder = RecordDecoder(ConsumerRecord)
    for cut in (1, 11, 12, 60, len(second) - 1):
        records, next_offset, error = decoder.decode(first + second[:cut], "t", 0, 0)
        assert error is None
        assert [r.offset for r in records] == list(range(5))
        assert next_offset == 5


def test_a_set_without_one_whole_batch_is_an_error():
    batch = fastmq_batch(0, 5)
    records, next_offset, error = RecordDecoder(ConsumerRecord).decode(batch[:40], "t", 0, 0)
    assert records == [] and next_offset == 0
    assert isinstance(error, CorruptRecordError)
    assert "max_partition_fetch_bytes" in str(error)


def test_empty_and_null_record_sets():
    decoder = RecordDecoder(ConsumerRecord)
    assert decoder.decode(b"", "t", 0, 7) == ([], 7, None)
    assert decoder.decode(None, "t", 0, 7) == ([], 7, None)


def test_crc_failure_hands_out_the_batches_before_it():
    good, bad, after = fastmq_batch(0, 3), bytearray(fastmq_batch(3, 3)), fastmq_batch(6, 3)
    bad[-2] ^= 0x01                     # inside the last value: only the CRC can tell
    record_set = good + bytes(bad) + after
    records, next_offset, error = RecordDecoder(ConsumerRecord).decode(record_set, "orders", 2, 0)
    assert [r.offset for r in records] == [0, 1, 2]
    assert next_offset == 3
    assert isinstance(error, CorruptRecordError)
    assert "orders-2" in str(error) and "CRC" in str(error)
    unchecked, next_offset, error = RecordDecoder(ConsumerRecord, check_crcs=False).decode(record_set, "t", 0, 0)
    assert error is None and next_offset == 9 and len(unchecked) == 9


def test_control_batches_are_skipped_but_counted():
    record_set = fastmq_batch(0, 2, producer_id=7, transactional=True) + fastmq_batch(2, 0, producer_id=7,
                                                                                       control_type=1)
    records, next_offset, error = RecordDecoder(ConsumerRecord).decode(record_set, "t", 0, 0)
    assert error is None
    assert [r.offset for r in records] == [0, 1]
    assert next_offset == 3


class Aborted:
    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset


def test_read_committed_drops_aborted_transactions_only():
    record_set = b"".join([
        fastmq_batch(0, 2, producer_id=1, transactional=True, value=b"a"),   # producer 1: aborted below
        fastmq_batch(2, 2, producer_id=2, transactional=True, value=b"c"),   # producer 2: committed below
        fastmq_batch(4, 0, producer_id=1, control_type=0),                   # ABORT of producer 1
        fastmq_batch(5, 0, producer_id=2, control_type=1),                   # COMMIT of producer 2
        fastmq_batch(6, 2, producer_id=1, transactional=True, value=b"n"),   # producer 1's next transaction
        fastmq_batch(8, 2, value=b"p"),                                      # not transactional
    ])
    aborted = [Aborted(1, 0)]
    committed, next_offset, error = RecordDecoder(ConsumerRecord, read_committed=True).decode(
        record_set, "t", 0, 0, aborted)
    assert error is None and next_offset == 10
    assert [r.offset for r in committed] == [2, 3, 6, 7, 8, 9]
    everything, _, _ = RecordDecoder(ConsumerRecord).decode(record_set, "t", 0, 0, aborted)
    assert [r.offset for r in everything] == [0, 1, 2, 3, 6, 7, 8, 9]


def test_legacy_message_sets():
    for magic in (0, 1):
        builder = PeerLegacyBuilder(magic, 0, 1 << 20)
        for offset in range(3):
            builder.append(offset, TS if magic else None, b"k%d" % offset, b"v%d" % offset)
        record_set = bytes(builder.build())
        records, next_offset, error = RecordDecoder(ConsumerRecord).decode(record_set, "t", 1, 1)
        assert error is None and next_offset == 3
        assert [(r.offset, r.key, r.value, r.serialized_value_size) for r in records] == \
            [(1, b"k1", b"v1", 2), (2, b"k2", b"v2", 2)]
        assert records[0].checksum is not None


def test_deserializers():
    record_set = peer_batch(0, [(TS, b"k", b"1", [("h", b"x")]), (TS, None, None, [])])
    plain = RecordDecoder(ConsumerRecord, key_deserializer=bytes.decode, value_deserializer=int)
    records, _, error = plain.decode(record_set, "t", 0, 0)
    assert error is None
    assert [(r.key, r.value, r.serialized_value_size) for r in records] == [("k", 1, 1), (None, None, -1)]
    seen = []
    with_context = RecordDecoder(ConsumerRecord, value_deserializer=lambda *args: seen.append(args) or "x",
                                 with_context=True, deserialize_null=True, tuple_headers=False)
    records, _, error = with_context.decode(record_set, "t", 0, 0)
    assert error is None and [r.value for r in records] == ["x", "x"]
    assert seen == [("t", [("h", b"x")], b"1"), ("t", [], None)]


def test_a_failing_deserializer_is_returned_after_the_good_batches():
    record_set = peer_batch(0, [(TS, None, b"1", [])]) + peer_batch(1, [(TS, None, b"bad", [])])
    records, next_offset, error = RecordDecoder(ConsumerRecord, value_deserializer=int).decode(record_set, "t", 0, 0)
    assert [r.value for r in records] == [1]
    assert next_offset == 1
    assert isinstance(error, ValueError)


def test_record_class_must_look_like_consumer_record():
    with pytest.raises(TypeError):
        RecordDecoder(tuple)


@given(st.binary(max_size=300))
def test_random_bytes_give_records_or_a_clear_error(data):
    records, next_offset, error = RecordDecoder(ConsumerRecord).decode(data, "t", 0, 0)
    assert error is None or isinstance(error, FastMQError)
    assert next_offset >= 0


@given(st.data())
def test_corrupted_and_truncated_sets_give_records_or_a_clear_error(data):
    record_set = bytearray(fastmq_batch(0, 4) + peer_batch(4, [(TS, b"k", b"v" * 30, [("a", b"b")])] * 3, 3))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(record_set) - 1))
        record_set[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(record_set)))
    check_crcs = data.draw(st.booleans())
    records, next_offset, error = RecordDecoder(ConsumerRecord, check_crcs=check_crcs).decode(
        bytes(record_set[:cut]), "t", 0, 0)
    assert error is None or isinstance(error, FastMQError)
    assert all(type(r) is ConsumerRecord for r in records)


def test_forged_lengths_do_not_allocate():
    batch = bytearray(fastmq_batch(0, 1))
    batch[57:61] = struct.pack(">i", 0x7FFFFFFF)        # record count
    records, _, error = RecordDecoder(ConsumerRecord, check_crcs=False).decode(bytes(batch), "t", 0, 0)
    assert records == [] and isinstance(error, CorruptRecordError)


@given(st.lists(st.integers(0, 30), min_size=1, max_size=6), st.integers(1, 40))
def test_decode_many_gives_what_decode_gives_part_by_part(counts, max_records):
    decoder = RecordDecoder(ConsumerRecord)
    parts = [(fastmq_batch(10 * i, count) if count else b"", f"t{i}", i, 10 * i + count // 2, None)
             for i, count in enumerate(counts)]
    results, index = [], 0
    while index < len(parts):
        chunk, end = decoder.decode_many(parts, index, max_records)
        # Whole parts only, and no more once max_records came out of them.
        assert end == index + len(chunk) and chunk
        assert sum(len(records) for records, _, _ in chunk[:-1]) < max_records
        results.extend(chunk)
        index = end
    assert [(as_tuples(r), n, e) for r, n, e in results] == [
        (as_tuples(r), n, e) for r, n, e in (decoder.decode(*part) for part in parts)]


@pytest.mark.parametrize("enabled", [True, False])
def test_decoding_leaves_the_garbage_collector_as_it_found_it(enabled):
    decoder = RecordDecoder(ConsumerRecord)
    parts = [(fastmq_batch(0, 2000), "t", 0, 0, None)] * 3
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        collections = gc.get_stats()[0]["collections"]
        results, index = decoder.decode_many(parts, 0, 10_000)
        decoder.decode(*parts[0])
        # 8000 records (11 collections' worth): at most the one after each call, none during them.
        assert gc.get_stats()[0]["collections"] <= collections + 2
        assert gc.isenabled() is enabled
        with pytest.raises(TypeError):
            decoder.decode_many([(b"", None, 0, 0, None)], 0, 1)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert index == 3 and sum(len(records) for records, _, _ in results) == 6000


def test_large_and_small_record_sets_are_decoded_with_the_collector_held_off():
    """A collection while a call decodes could free no record; run during one partition's large sets, they set off
    young collections every 700 records and with them the older generations' walks over the whole process."""
    decoder = RecordDecoder(ConsumerRecord)
    large = (fastmq_batch(0, 2000, value=bytes(100)), "t", 0, 0, None)      # ~230 KB
    small = [(fastmq_batch(10 * i, 10, value=bytes(100)), "t", i, 10 * i, None) for i in range(200)]
    was = gc.isenabled()
    gc.enable()
    runs: list[int] = []

    def count(phase, info):
        if phase == "start":
            runs.append(info["generation"])
    gc.callbacks.append(count)
    try:
        (records, _, _), = decoder.decode_many([large], 0, 10_000)[0]
        during_large = len(runs)
        assert gc.isenabled()
        runs.clear()
        results, index = decoder.decode_many(small, 0, 10_000)
        during_small = len(runs)
        assert gc.isenabled()
        runs.clear()
        decoder.decode(*large)
        during_decode = len(runs)
    finally:
        gc.callbacks.remove(count)
        (gc.enable if was else gc.disable)()
    # 2000 records each time, about three young collections' worth: at most the one after the call.
    assert during_large <= 1 and len(records) == 2000
    assert during_small <= 1 and index == 200 and sum(len(r) for r, _, _ in results) == 2000
    assert during_decode <= 1
