"""fastmq.kafka.record: the kafka-python-compatible record layer on the compiled codecs.

Oracles: kafka-python 3.x's pure-Python record layer and aiokafka's Cython one read what we build, and we
read what they build, for every codec; a golden batch pins the bytes and the CRC.
"""
from __future__ import annotations

import inspect
import os

import aiokafka.record.default_records as aiokafka_default
import kafka.record.default_records as kp_default
import kafka.record.legacy_records as kp_legacy
import kafka.record.memory_records as kp_memory
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastmq.kafka.record as fm_record
from fastmq.errors import FastMQError
from fastmq.kafka import codec as fm_codec
from fastmq.kafka.errors import CorruptRecordError, UnsupportedCodecError
from fastmq.kafka.record import abc as fm_abc
from fastmq.kafka.record import default_records as fm_default
from fastmq.kafka.record import legacy_records as fm_legacy
from fastmq.kafka.record import memory_records as fm_memory
from fastmq.kafka.record import util as fm_util

CODECS = [0, 1, 2, 3, 4]

# Three records (a null key, a null value, two headers one of them null, a timestamp below the first),
# producer id 1234, epoch 5, base sequence 100: built by kafka-python 3.0.12 and pinned here.
GOLDEN_BATCH = bytes.fromhex(
    "00000000000000000000006f0000000002f3c477900000000000020000018bcfe568000000018bcfe568050000000000"
    "0004d200050000006400000003240000000a6b65792d300e76616c75652d30003c000a02010e76616c75652d31040a74"
    "72616365066162630a656d70747901160013040a6b65792d320100"
)
GOLDEN_CRC = 0xF3C47790
GOLDEN_RECORDS = [
    (0, 1700000000000, b"key-0", b"value-0", []),
    (1, 1700000000005, None, b"value-1", [("trace", b"abc"), ("empty", None)]),
    (2, 1699999999990, b"key-2", None, []),
]


def build_golden(builder_class):
    builder = builder_class(2, 0, False, 1234, 5, 100, 1 << 20)
    for offset, timestamp, key, value, headers in GOLDEN_RECORDS:
        builder.append(offset, timestamp, key, value, headers)
    return bytes(builder.build())


def fields(record):
    return (record.offset, record.timestamp, record.key, record.value, list(record.headers))


# --------------------------------------------------------------------------------------------------------
# golden bytes
# --------------------------------------------------------------------------------------------------------

def test_golden_batch_bytes_and_crc():
    assert build_golden(fm_default.DefaultRecordBatchBuilder) == GOLDEN_BATCH
    batch = fm_default.DefaultRecordBatch(GOLDEN_BATCH)
    assert batch.crc == GOLDEN_CRC and batch.validate_crc()
    assert [fields(r) for r in batch] == GOLDEN_RECORDS
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, 100)
    assert (batch.first_timestamp, batch.max_timestamp) == (1700000000000, 1700000000005)
    assert (batch.last_offset_delta, batch.records_count, batch.size_in_bytes) == (2, 3, len(GOLDEN_BATCH))
    assert batch.last_sequence == 102 and batch.has_sequence and batch.has_producer_id()


def test_golden_batch_crc_detects_a_flipped_bit():
    corrupted = bytearray(GOLDEN_BATCH)
    corrupted[-3] ^= 0x01
    assert not fm_default.DefaultRecordBatch(bytes(corrupted)).validate_crc()
    # The partition leader epoch is outside the CRC: the broker may rewrite it.
    epoch_changed = bytearray(GOLDEN_BATCH)
    epoch_changed[12:16] = (7).to_bytes(4, "big")
    assert fm_default.DefaultRecordBatch(bytes(epoch_changed)).validate_crc()


# --------------------------------------------------------------------------------------------------------
# oracles: kafka-python and aiokafka, both directions, every codec
# --------------------------------------------------------------------------------------------------------

def sample_records(count=300, large=False):
    # Values repeat their random half so every codec shrinks the batch: the builder keeps a batch uncompressed
    # when compression does not pay (test_incompressible_batches_are_sent_uncompressed), and pure noise would
    # make the codec these tests ask for a coin toss.
    records = []
    for i in range(count):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else os.urandom(50 + i % 25) * 2
        headers = [("h%d" % i, b"x" * (i % 5)), ("null", None), ("ünï", b"\x00\xff")] if i % 5 == 0 else []
        records.append((i, 1700000000000 + i * 3 - (i % 4), key, value, headers))
    if large:
        records.append((count, 1700000000999, b"big", os.urandom(1024) * 2048, [("k", b"v")]))
    return records


PEERS = {
    "kafka-python": (kp_default.DefaultRecordBatchBuilder, kp_default.DefaultRecordBatch),
    "aiokafka": (aiokafka_default.DefaultRecordBatchBuilder, aiokafka_default.DefaultRecordBatch),
}


def build_with(builder_class, codec, records):
    builder = builder_class(2, codec, False, -1, -1, -1, 64 * 1024 * 1024)
    for record in records:
        assert builder.append(*record) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("codec", CODECS)
def test_peers_read_what_we_build(peer, codec):
    records = sample_records(large=codec == 0 or peer == "aiokafka")
    data = build_with(fm_default.DefaultRecordBatchBuilder, codec, records)
    reader = PEERS[peer][1](data)
    assert reader.validate_crc()
    assert reader.compression_type == codec
    assert [fields(r) for r in reader] == [(o, t, k, v, h) for o, t, k, v, h in records]


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("codec", CODECS)
def test_we_read_what_peers_build(peer, codec):
    records = sample_records(large=True)
    data = build_with(PEERS[peer][0], codec, records)
    batch = fm_default.DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.compression_type == codec
    assert [fields(r) for r in batch] == [(o, t, k, v, h) for o, t, k, v, h in records]


@pytest.mark.parametrize("peer", PEERS)
def test_uncompressed_output_is_byte_identical_to_peers(peer):
    records = sample_records()
    ours, theirs = build_with(fm_default.DefaultRecordBatchBuilder, 0, records), build_with(PEERS[peer][0], 0, records)
    # The partition leader epoch (bytes 12-15) is the broker's to set: kafka-python writes 0 (as we do),
    # aiokafka and the Java client -1. It is outside the CRC, so everything else must match.
    assert ours[:12] + ours[16:] == theirs[:12] + theirs[16:]
    if peer == "kafka-python":
        assert ours == theirs


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_message_sets_both_ways(magic, codec):
    records = [(i, 1700000000000 + i, None if i % 3 == 0 else b"k%d" % i, None if i % 9 == 4 else os.urandom(40))
               for i in range(60)]
    ours, theirs = fm_legacy.LegacyRecordBatchBuilder(magic, codec, 1 << 20), kp_legacy.LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for record in records:
        mine, reference = ours.append(*record), theirs.append(*record)
        assert (mine.offset, mine.crc, mine.size, mine.timestamp) == (
            reference.offset, reference.crc, reference.size, reference.timestamp)
    ours_bytes, theirs_bytes = bytes(ours.build()), bytes(theirs.build())
    if codec == 0:
        assert ours_bytes == theirs_bytes
    expected = [(o, None if magic == 0 else t, k, v) for o, t, k, v in records]
    for data in (ours_bytes, theirs_bytes):
        for records_class in (fm_memory.MemoryRecords, kp_memory.MemoryRecords):
            got = [(r.offset, r.timestamp, r.key, r.value) for batch in records_class(data) for r in batch]
            assert got == expected
        assert all(r.validate_crc() for batch in fm_memory.MemoryRecords(data) for r in batch)
    # aiokafka's Cython legacy reader reads ours too (it refuses Kafka 0.8's LZ4 framing outright).
    if not (magic == 0 and codec == 3):
        from aiokafka.record.memory_records import MemoryRecords as AiokafkaMemoryRecords

        reader, got = AiokafkaMemoryRecords(ours_bytes), []
        while reader.has_next():
            got += [(r.offset, r.key, r.value) for r in reader.next_batch()]
        assert got == [(o, k, v) for o, _, k, v in expected]


def test_memory_records_mixes_magics_and_stops_before_a_truncated_batch():
    legacy = fm_legacy.LegacyRecordBatchBuilder(1, 0, 1 << 20)
    legacy.append(0, 1700000000000, None, b"old")
    v2 = build_with(fm_default.DefaultRecordBatchBuilder, 3, sample_records(20))
    data = bytes(legacy.build()) + v2 + v2[:40]
    records = fm_memory.MemoryRecords(data)
    batches = list(records)
    assert [b.magic for b in batches] == [1, 2]
    assert records.valid_bytes() == len(data) - 40
    assert records.size_in_bytes() == len(data)
    assert not records.has_next() and records.next_batch() is None
    peer = [type(b).__name__ for b in kp_memory.MemoryRecords(data)]
    assert peer == ["LegacyRecordBatch", "DefaultRecordBatch"]


def test_memory_records_builder_matches_kafka_python():
    for magic, codec in ((2, 0), (2, 4), (1, 2), (0, 1)):
        producer = dict(producer_id=7, producer_epoch=1, base_sequence=0) if magic == 2 else {}
        ours = fm_memory.MemoryRecordsBuilder(magic, codec, 1 << 20, offset=5, **producer)
        theirs = kp_memory.MemoryRecordsBuilder(magic, codec, 1 << 20, offset=5, **producer)
        for i in range(20):
            assert (ours.append(1700000000000 + i, b"k", b"v%d" % i) is None) == (
                theirs.append(1700000000000 + i, b"k", b"v%d" % i) is None)
        ours.close(), theirs.close()
        ours.close()   # idempotent, as retries call it again
        assert ours.next_offset() == theirs.next_offset() == 25
        expected = [(r.offset, r.value) for b in kp_memory.MemoryRecords(theirs.buffer()) for r in b]
        assert [(r.offset, r.value) for b in ours.records() for r in b] == expected
        assert [(r.offset, r.value) for b in kp_memory.MemoryRecords(bytes(ours.buffer())) for r in b] == expected
        assert ours.is_full() and ours.append(0, None, b"late") is None


# --------------------------------------------------------------------------------------------------------
# the builder's contract
# --------------------------------------------------------------------------------------------------------

def test_batch_size_limits_all_but_the_first_record():
    ours = fm_default.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 200)
    theirs = kp_default.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 200)
    assert ours.append(0, 1, None, b"x" * 500, []) is not None     # first record always fits
    results = [(ours.append(i, 1, None, b"y" * 10, []) is None, theirs.append(i, 1, None, b"y" * 10, []) is None)
               for i in range(1, 20)]
    theirs_first = theirs.append(0, 1, None, b"x" * 500, [])
    assert theirs_first is None    # kafka-python's builder already holds 19 records here
    assert [r[0] for r in results].count(True) > 0


def test_append_validates_types_like_kafka_python():
    builder = fm_default.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    with pytest.raises(TypeError):
        builder.append(0, None, "str key", b"v", [])
    with pytest.raises(TypeError):
        builder.append(0, None, None, 12, [])
    with pytest.raises(TypeError):
        builder.append(0, None, None, b"v", [(b"bytes-key", b"v")])
    with pytest.raises(TypeError):
        builder.append("0", None, None, b"v", [])
    assert builder.record_count == 0
    meta = builder.append(0, None, bytearray(b"k"), memoryview(b"v"), [])
    assert meta.crc is None and meta.size == 9 and abs(meta.timestamp - __import__("time").time() * 1000) < 60000


def test_set_producer_state_and_transactional_batches():
    builder = fm_default.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    with pytest.raises(ValueError):
        builder.set_producer_state(-1, -1, -1, True)
    builder.set_producer_state(99, 3, 2**31 - 2, True)
    builder.append(0, 1, None, b"a", [])
    builder.append(1, 2, None, b"b", [])
    builder.append(2, 3, None, b"c", [])
    data = bytes(builder.build())
    for reader_class in (fm_default.DefaultRecordBatch, kp_default.DefaultRecordBatch):
        batch = reader_class(data)
        assert batch.is_transactional and not batch.is_control_batch
        assert batch.last_sequence == 0          # sequences wrap past INT32_MAX


def test_control_batches_are_exposed():
    from fastmq.kafka._native.records import RecordBatchBuilder

    for marker_type, name in ((0, "abort"), (1, "commit")):
        builder = RecordBatchBuilder(2, 0, True, 42, 0, -1, 1 << 20, control=True, base_offset=10)
        builder.append(0, 1700000000000, (0).to_bytes(2, "big") + marker_type.to_bytes(2, "big"),
                       b"\x00\x00\x00\x00\x00\x00", [])
        data = bytes(builder.build())
        (ours,) = fm_default.DefaultRecordBatch(data)
        (theirs,) = kp_default.DefaultRecordBatch(data)
        assert isinstance(ours, fm_default.ControlRecord)
        assert (ours.offset, ours.version, ours.type, getattr(ours, name)) == (10, 0, marker_type, True)
        assert (theirs.type, theirs.offset) == (marker_type, 10)


def test_log_append_time_batches_use_the_max_timestamp():
    from fastmq.kafka._native.records import RecordBatchBuilder

    builder = RecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20, timestamp_type=1)
    for i in range(3):
        builder.append(i, 1700000000000 + i, None, b"v", [])
    data = bytes(builder.build())
    for reader_class in (fm_default.DefaultRecordBatch, kp_default.DefaultRecordBatch):
        assert [(r.timestamp, r.timestamp_type) for r in reader_class(data)] == [(1700000000002, 1)] * 3


def test_codec_availability_is_consulted_at_build(monkeypatch):
    monkeypatch.setattr(fm_codec, "has_snappy", lambda: False)
    builder = fm_default.DefaultRecordBatchBuilder(2, 2, False, -1, -1, -1, 1 << 20)
    builder.append(0, 1, None, b"v", [])
    with pytest.raises(UnsupportedCodecError):
        builder.build()
    legacy = fm_legacy.LegacyRecordBatchBuilder(1, 2, 1 << 20)
    legacy.append(0, 1, None, b"v")
    with pytest.raises(UnsupportedCodecError):
        legacy.build()


def test_incompressible_batches_are_sent_uncompressed():
    data = build_with(fm_default.DefaultRecordBatchBuilder, 3, [(0, 1, None, os.urandom(5000), [])])
    assert fm_default.DefaultRecordBatch(data).compression_type == 0


def test_size_helpers_match_kafka_python():
    for key, value, headers in ((None, None, []), (b"k", b"v" * 300, [("a", b"b"), ("n", None)])):
        for name in ("size_of", "estimate_size_in_bytes"):
            assert getattr(fm_default.DefaultRecordBatchBuilder, name)(key, value, headers) == getattr(
                kp_default.DefaultRecordBatchBuilder, name)(key, value, headers)
        assert fm_default.DefaultRecordBatchBuilder.size_in_bytes(5, 1000, key, value, headers) == \
            kp_default.DefaultRecordBatchBuilder.size_in_bytes(5, 1000, key, value, headers)
        for magic in (0, 1):
            for codec in (0, 1):
                assert fm_legacy.LegacyRecordBatchBuilder.estimate_size_in_bytes(magic, codec, key, value) == \
                    kp_legacy.LegacyRecordBatchBuilder.estimate_size_in_bytes(magic, codec, key, value)
    assert fm_default.DefaultRecordBatchBuilder.header_size_in_bytes() == 61


# --------------------------------------------------------------------------------------------------------
# the API surface kafka-python code relies on
# --------------------------------------------------------------------------------------------------------

SURFACE = [
    (kp_default.DefaultRecordBatchBuilder, fm_default.DefaultRecordBatchBuilder),
    (kp_default.DefaultRecordBatch, fm_default.DefaultRecordBatch),
    (kp_default.DefaultRecord, fm_default.DefaultRecord),
    (kp_default.ControlRecord, fm_default.ControlRecord),
    (kp_default.DefaultRecordMetadata, fm_default.DefaultRecordMetadata),
    (kp_legacy.LegacyRecordBatchBuilder, fm_legacy.LegacyRecordBatchBuilder),
    (kp_legacy.LegacyRecordBatch, fm_legacy.LegacyRecordBatch),
    (kp_legacy.LegacyRecord, fm_legacy.LegacyRecord),
    (kp_legacy.LegacyRecordMetadata, fm_legacy.LegacyRecordMetadata),
    (kp_memory.MemoryRecords, fm_memory.MemoryRecords),
    (kp_memory.MemoryRecordsBuilder, fm_memory.MemoryRecordsBuilder),
]


@pytest.mark.parametrize(("theirs", "ours"), SURFACE, ids=lambda c: c.__name__)
def test_every_public_name_exists(theirs, ours):
    public = {name for name in dir(theirs) if not name.startswith("_")}
    missing = {name for name in public if not hasattr(ours, name)}
    assert not missing


def test_module_layout_and_util():
    import kafka.record as kp_record
    import kafka.record.util as kp_util

    assert set(kp_record.__all__) <= set(fm_record.__all__)
    for name in ("encode_varint", "decode_varint", "size_of_varint", "calc_crc32c", "calc_crc32"):
        assert list(inspect.signature(getattr(kp_util, name)).parameters)[:1] == \
            list(inspect.signature(getattr(fm_util, name)).parameters)[:1]
    assert fm_util.calc_crc32c(b"123456789") == kp_util.calc_crc32c(b"123456789")
    assert fm_util.calc_crc32(memoryview(b"abc")) == kp_util.calc_crc32(memoryview(b"abc"))
    assert isinstance(fm_default.DefaultRecordBatch(GOLDEN_BATCH), fm_abc.ABCRecordBatch)
    assert isinstance(next(iter(fm_default.DefaultRecordBatch(GOLDEN_BATCH))), fm_abc.ABCRecord)


# --------------------------------------------------------------------------------------------------------
# properties and fuzzing
# --------------------------------------------------------------------------------------------------------

record_strategy = st.tuples(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=3000)),
    st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50))), max_size=4),
)


@given(st.lists(record_strategy, min_size=1, max_size=40), st.sampled_from(CODECS),
       st.integers(min_value=0, max_value=2**50))
def test_round_trip_through_ours_and_kafka_python(records, codec, base_timestamp):
    full = [(i, base_timestamp + ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(records)]
    data = build_with(fm_default.DefaultRecordBatchBuilder, codec, full)
    assert [fields(r) for r in fm_default.DefaultRecordBatch(data)] == full
    assert [fields(r) for r in kp_default.DefaultRecordBatch(data)] == full


def read_everything(data: bytes) -> None:
    for batch in fm_memory.MemoryRecords(data):
        batch.validate_crc()
        for record in batch:
            record.headers, record.key, record.value


@given(st.binary(max_size=2000))
def test_random_bytes_give_only_fastmq_errors(data):
    try:
        read_everything(data)
    except FastMQError:
        pass
    try:
        list(fm_default.DefaultRecordBatch(data))
    except FastMQError:
        pass


VALID_SETS = [build_with(fm_default.DefaultRecordBatchBuilder, codec, sample_records(30)) for codec in CODECS]


@given(st.sampled_from(VALID_SETS), st.integers(min_value=0, max_value=10**6),
       st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), max_size=6))
def test_truncated_and_corrupted_batches_give_only_fastmq_errors(data, cut, flips):
    corrupted = bytearray(data[: cut % (len(data) + 1)])
    for position, mask in flips:
        if corrupted:
            corrupted[position % len(corrupted)] ^= mask
    try:
        read_everything(bytes(corrupted))
    except FastMQError:
        pass
    try:
        list(fm_default.DefaultRecordBatch(bytes(corrupted)))
    except FastMQError:
        pass


def test_forged_counts_do_not_allocate():
    import tracemalloc

    forged = bytearray(GOLDEN_BATCH)
    forged[57:61] = (2**31 - 1).to_bytes(4, "big")              # record count
    one_record = bytearray(build_with(fm_default.DefaultRecordBatchBuilder, 0, [(0, 1, None, b"v", [])]))
    one_record[-1] = 0x7E                                       # header count 63 in a 1-byte region
    tracemalloc.start()
    try:
        for data in (bytes(forged), bytes(one_record)):
            with pytest.raises(CorruptRecordError):
                list(fm_default.DefaultRecordBatch(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


def test_unconsumed_bytes_after_the_last_record_are_corrupt():
    data = bytearray(GOLDEN_BATCH)
    data[57:61] = (2).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="unconsumed"):
        list(fm_default.DefaultRecordBatch(bytes(data)))


def test_decompression_is_bounded():
    from fastmq.kafka._native.records import RecordBatch

    data = build_with(fm_default.DefaultRecordBatchBuilder, 4, [(0, 1, None, bytes(4 * 1024 * 1024), [])])
    with pytest.raises(CorruptRecordError, match="more than"):
        list(RecordBatch(data, max_decompressed_size=1024 * 1024))
    assert len(next(iter(RecordBatch(data))).value) == 4 * 1024 * 1024


def test_a_producer_batch_is_finished_without_a_second_buffer_of_its_capacity():
    # A producer builds one batch per partition and request: at thousands of partitions, a fresh buffer of the
    # batch's capacity per batch (allocated only to be freed unused: the batch's storage goes to the pool) was a
    # cost of its own. (The kafka-python face's build() keeps one on purpose: see RecordBatchBuilder.build.)
    import time
    import tracemalloc

    from fastmq.kafka._native.accumulator import RecordAccumulator
    accumulator = RecordAccumulator(batch_size=1 << 20, linger_ms=0)
    accumulator.update_topic("t", [1])
    topic = "t"
    later = time.monotonic() + 60
    for _ in range(9000):               # a batch of about 0.9 MiB: its storage has grown to that much
        accumulator.send(topic, 0, None, b"v" * 100, None, None)
    nodes, _, _ = accumulator.ready(later)
    tracemalloc.start()
    try:
        [batch] = accumulator.drain(nodes[1], 1 << 30, later)       # finishes the batch
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batch.record_count == 9000
    assert peak < 256 << 10, f"finishing a batch of 0.9 MiB allocated {peak} bytes"
