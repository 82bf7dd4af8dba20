"""fastmq.broker.kafka._native.kafka_store: Kafka batches -> CommitLog messages -> Kafka batches, exactly, for any record;
bad input raises fastmq's errors only. The oracle for the batches is fastmq's kafka-python-compatible record
layer and, for the stored messages, the store's own decoder."""
from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker.kafka._native import kafka_store
from fastmq._native.store_codec import MessageBatch
from fastmq.errors import FastMQError
from fastmq.kafka import errors as kerrors
from fastmq.kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from fastmq.store import MessageStore, MessageStoreConfig

HOST = b"\x7f\x00\x00\x01\x00\x00\x00\x01"
FILE = 1 << 20


def new_batch(topic: str = "t", queue_id: int = 0) -> MessageBatch:
    return MessageBatch(topic, queue_id, HOST, 4 << 20, FILE)


def kafka_batch(records, producer=(-1, -1, -1), codec: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, producer[0], producer[1], producer[2], 1 << 30)
    for i, (key, value, headers, timestamp) in enumerate(records):
        builder.append(i, timestamp, key, value, headers)
    return bytes(builder.build())


@pytest.fixture
def store(tmp_path):
    with MessageStore(tmp_path, MessageStoreConfig(mapped_file_size_commit_log=FILE,
                                                   message_index_enable=False)) as opened:
        yield opened


def round_trip(store: MessageStore, records, **options) -> list:
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, kafka_batch(records, **options), 1 << 30)
    start = store.append_batch(batch).queue_offset
    units = store.scan_queue("t", 0, start, len(records))
    data, count = store.read_records(units)
    out, taken, next_offset = kafka_store.build_batches(data, count, 1 << 30)
    assert taken == len(records) and next_offset == start + len(records)
    return list(DefaultRecordBatch(out))


texts = st.text(max_size=20)
blobs = st.one_of(st.none(), st.binary(max_size=40), texts.map(lambda s: s.encode("utf-8")))
headers = st.lists(st.tuples(texts, st.one_of(st.none(), st.binary(max_size=20),
                                              texts.map(lambda s: s.encode("utf-8")))), max_size=4)
record = st.tuples(blobs, blobs, headers, st.integers(0, 2 ** 45))


@settings(max_examples=150)
@given(st.lists(record, min_size=1, max_size=8))
def test_every_record_round_trips_exactly(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("rt")
    with MessageStore(path, MessageStoreConfig(mapped_file_size_commit_log=FILE, message_index_enable=False)) as s:
        got = round_trip(s, records)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == [
        (key, value, list(hs), ts) for key, value, hs, ts in records]
    assert [r.offset for r in got] == list(range(len(records)))


def test_plain_records_become_readable_properties(store):
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, kafka_batch([(b"user-1", b"v", [("trace", b"abc")], 5)]), 1 << 30)
    store.append_batch(batch)
    (message,) = store.get_messages("t", 0, 0).messages
    assert message.body == b"v" and message.born_timestamp == 5
    assert message.properties == {"KEYS": "user-1", "trace": "abc"}


def test_binary_keys_go_to_kafka_record_and_text_keys_stay_visible(store):
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, kafka_batch([(b"k", None, [("h", None)], 1)]), 1 << 30)
    store.append_batch(batch)
    (message,) = store.get_messages("t", 0, 0).messages
    assert message.properties["KEYS"] == "k"
    raw = base64.b64decode(message.properties["KAFKA_RECORD"])
    assert raw[0] == 1                       # null value


def test_idempotent_batches_are_described_and_marked(store):
    records = [(None, b"a", [], 1), (None, b"b", [], 2), (None, b"c", [], 9)]
    batch = store.new_batch("t", 0)
    produced = kafka_store.fill_batch(batch, kafka_batch(records, producer=(42, 3, 2 ** 31 - 2)), 1 << 30)
    assert produced == [(42, 3, 2 ** 31 - 2, 2 ** 31, 3, 9, False)]
    store.append_batch(batch)
    units = store.scan_queue("t", 0, 0, 10)
    data, count = store.read_records(units)
    # The marker is on the last record only; the last sequence wrapped past Int.MaxValue.
    assert kafka_store.producer_markers(data, count) == [(2, 42, 3, 2 ** 31 - 2, 0)]
    offsets, timestamps = kafka_store.record_timestamps(data, count)
    assert list(offsets) == [0, 1, 2] and list(timestamps) == [1, 2, 9]
    # The marker does not become a header.
    out, _, _ = kafka_store.build_batches(data, count, 1 << 30)
    assert [list(r.headers) for r in DefaultRecordBatch(out)] == [[], [], []]


def test_several_batches_in_one_record_set(store):
    data = kafka_batch([(None, b"1", [], 1)]) + kafka_batch([(None, b"2", [], 2), (None, b"3", [], 3)])
    batch = store.new_batch("t", 0)
    assert [p[4] for p in kafka_store.fill_batch(batch, data, 1 << 30)] == [1, 2]
    assert batch.count == 3


def stored_values(store: MessageStore, start: int, count: int) -> list:
    data, taken = store.read_records(store.scan_queue("t", 0, start, count))
    out, _, _ = kafka_store.build_batches(data, taken, 1 << 30)
    return [r.value for r in DefaultRecordBatch(out)]


def test_values_are_held_in_the_produced_record_set_until_they_are_in_the_commit_log(store):
    # The batch points into the request's bytes instead of copying the values: it keeps that buffer exported (it
    # cannot be resized, so cannot move) until every message is written, and lets it go at once then.
    data = bytearray(kafka_batch([(None, b"v%d" % i * 50, [], i) for i in range(20)]))
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, data, 1 << 30)
    with pytest.raises(BufferError):
        data.extend(b"more")
    start = store.append_batch(batch).queue_offset
    data[:] = bytes(len(data))          # resizable again, and nothing stored depends on these bytes any more
    data.extend(b"more")
    assert stored_values(store, start, 20) == [b"v%d" % i * 50 for i in range(20)]


def test_a_refused_batch_lets_the_record_set_go_when_it_is_dropped(store):
    data = bytearray(kafka_batch([(None, b"x", [], 1)]))
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, data, 1 << 30)
    del batch
    data.extend(b"more")


@pytest.mark.parametrize("codec", [1, 2])      # gzip, snappy
def test_values_of_several_compressed_batches_each_stay_in_their_own_buffer(store, codec):
    first = [(None, b"a%d" % i * 30, [], i) for i in range(50)]
    second = [(b"k", b"b%d" % i * 30, [("h", b"v")], i) for i in range(70)]
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, kafka_batch(first, codec=codec) + kafka_batch(second, codec=codec), 1 << 30)
    start = store.append_batch(batch).queue_offset
    assert stored_values(store, start, 120) == [value for _, value, _, _ in first + second]


def test_build_batches_respects_max_bytes_but_takes_a_first_record(store):
    records = [(None, b"x" * 100, [], i) for i in range(10)]
    batch = store.new_batch("t", 0)
    kafka_store.fill_batch(batch, kafka_batch(records), 1 << 30)
    store.append_batch(batch)
    data, count = store.read_records(store.scan_queue("t", 0, 0, 10))
    out, taken, next_offset = kafka_store.build_batches(data, count, 350)
    assert len(out) <= 350 and 1 <= taken < 10 and next_offset == taken
    out, taken, _ = kafka_store.build_batches(data, count, 1)
    assert taken == 1 and len(list(DefaultRecordBatch(out))) == 1
    assert kafka_store.build_batches(data, count, 1, take_first=False) == (b"", 0, -1)
    assert kafka_store.build_batches(data, 0, 100) == (b"", 0, -1)


def transactional_batch(records, producer_id: int, epoch: int, sequence: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, epoch, sequence, 1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, 1000 + i, key, value, [])
    return bytes(builder.build())


def read_back(store: MessageStore, start: int = 0, count: int = 100, max_bytes: int = 1 << 30):
    data, taken = store.read_records(store.scan_queue("t", 0, start, count))
    return kafka_store.build_batches(data, taken, max_bytes)


def batches_of(data: bytes) -> list[DefaultRecordBatch]:
    out = []
    while data:
        size = struct.unpack(">i", data[8:12])[0] + 12
        out.append(DefaultRecordBatch(data[:size]))
        data = data[size:]
    return out


def test_transactional_records_and_markers_come_back_as_their_own_batches(store):
    def append(records):
        batch = store.new_batch("t", 0)
        produced = kafka_store.fill_batch(batch, records, 1 << 30)
        store.append_batch(batch)
        return produced

    assert append(kafka_batch([(None, b"plain-1", [], 1)])) == [(-1, -1, -1, -1, 1, 1, False)]
    assert append(transactional_batch([(b"k", b"txn-1"), (None, b"txn-2")], 7, 2)) == [
        (7, 2, 0, 1, 2, 1001, True)]
    append(kafka_batch([(None, b"plain-2", [], 2)]))
    marker = store.new_batch("t", 0)
    kafka_store.add_control_record(marker, 7, 2, True, 5, 3000)
    kafka_store.add_control_record(marker, 7, 2, False, 5, 3001)
    store.append_batch(marker)

    data, taken, next_offset = read_back(store)
    assert (taken, next_offset) == (6, 6)
    batches = batches_of(data)
    shapes = [(b.base_offset, b.is_transactional, b.is_control_batch, b.producer_id, b.producer_epoch)
              for b in batches]
    # A marker is a control batch of its own, as Kafka writes them.
    assert shapes == [(0, False, False, -1, -1), (1, True, False, 7, 2), (3, False, False, -1, -1),
                      (4, True, True, 7, 2), (5, True, True, 7, 2)]
    records = [list(b) for b in batches]
    assert [r.value for r in records[1]] == [b"txn-1", b"txn-2"] and records[1][0].key == b"k"
    assert [list(r.headers) for r in records[1]] == [[], []]        # KAFKA_TXN is not a header
    (commit,), (abort,) = records[3], records[4]
    assert (commit.key, commit.value) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")
    assert abort.key == b"\x00\x00\x00\x00" and abort.timestamp == 3001
    # Cut anywhere, every batch still says whose records it holds.
    data, taken, next_offset = read_back(store, start=2, count=1)
    assert taken == 1 and next_offset == 3
    (only,) = batches_of(data)
    assert only.is_transactional and only.producer_id == 7 and [r.value for r in only] == [b"txn-2"]
    # The byte budget counts every batch header.
    data, taken, _ = read_back(store, max_bytes=140)
    assert len(data) <= 140 and taken == sum(len(list(b)) for b in batches_of(data)) < 6


def test_a_transactional_batch_needs_a_producer_id():
    with pytest.raises(kerrors.InvalidRecordError):
        kafka_store.fill_batch(new_batch(), transactional_batch([(None, b"v")], -1, -1, -1), 1 << 30)


def test_markers_need_a_producer():
    with pytest.raises(ValueError):
        kafka_store.add_control_record(new_batch(), -1, 0, True, 0, 1)


def test_lookalike_producer_properties_from_other_front_ends_are_plain_messages(store):
    batch = store.new_batch("t", 0)
    batch.add(b"v", b"KAFKA_TXN\x01not-a-producer\x02")                 # malformed: no producer
    batch.add(b"123456", b"KAFKA_CONTROL\x011\x02")                       # a marker needs KAFKA_TXN too
    store.append_batch(batch)
    data, taken, _ = read_back(store)
    (only,) = batches_of(data)
    assert taken == 2 and not only.is_transactional and not only.is_control_batch
    assert [r.value for r in only] == [b"v", b"123456"]


def test_produce_errors_are_kafka_errors():
    ok = kafka_batch([(None, b"v", [], 1)])
    with pytest.raises(kerrors.MessageSizeTooLargeError):
        kafka_store.fill_batch(new_batch(), ok, 10)
    corrupt = bytearray(ok)
    corrupt[-1] ^= 1
    with pytest.raises(kerrors.CorruptRecordError):
        kafka_store.fill_batch(new_batch(), bytes(corrupt), 1 << 30)
    with pytest.raises(kerrors.InvalidRecordError):
        kafka_store.fill_batch(new_batch(), b"", 1 << 30)
    huge_header = kafka_batch([(None, b"v", [("h", b"x" * 40000)], 1)])
    with pytest.raises(kerrors.InvalidRecordError):
        kafka_store.fill_batch(new_batch(), huge_header, 1 << 30)
    too_big = MessageBatch("t", 0, HOST, 10, FILE)       # a store whose max message size is 10 bytes
    with pytest.raises(kerrors.MessageSizeTooLargeError):
        kafka_store.fill_batch(too_big, kafka_batch([(None, b"y" * 20, [], 1)]), 1 << 30)
    # A batch announcing more records than it holds.
    short = bytearray(kafka_batch([(None, b"v", [], 1)]))
    struct.pack_into(">i", short, 57, 2)
    from fastmq._native.checksum import crc32c
    struct.pack_into(">I", short, 17, crc32c(bytes(short[21:])))
    with pytest.raises(kerrors.CorruptRecordError):
        kafka_store.fill_batch(new_batch(), bytes(short), 1 << 30)


@settings(max_examples=300)
@given(st.binary(max_size=300), st.integers(0, 200), st.binary(max_size=8))
def test_fill_batch_fuzz_raises_only_fastmq_errors(blob, cut, garbage):
    valid = kafka_batch([(b"k", b"value", [("h", b"v")], 7)], codec=3)
    for data in (blob, valid[:cut], valid[:cut] + garbage + valid[cut + len(garbage):]):
        batch = new_batch()
        try:
            kafka_store.fill_batch(batch, data, 1 << 20)
        except FastMQError:
            pass


@settings(max_examples=200)
@given(st.binary(min_size=0, max_size=400), st.integers(0, 5))
def test_build_batches_fuzz_raises_only_fastmq_errors(blob, count):
    try:
        kafka_store.build_batches(blob, count, 1 << 20)
        kafka_store.record_timestamps(blob, count)
        kafka_store.producer_markers(blob, count)
    except FastMQError:
        pass


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=30))
def test_corrupt_kafka_record_property_is_reported(store, text):
    # "!" is not base64: whatever precedes it, the property cannot decode.
    batch = store.new_batch("t", 0)
    batch.add(b"v", b"KAFKA_RECORD\x01" + text.replace("\x01", "").replace("\x02", "").encode() + b"!\x02")
    store.append_batch(batch)
    data, count = store.read_records(store.scan_queue("t", 0, store.get_max_offset("t", 0) - 1, 1))
    with pytest.raises(FastMQError):
        kafka_store.build_batches(data, count, 1 << 20)


producer_texts = st.one_of(
    st.builds(lambda pid, epoch: f"{pid}.{epoch}", st.integers(-5, 2 ** 63), st.integers(-5, 40000)),
    st.text(alphabet="0123456789.-x", max_size=25))


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.binary(max_size=12), st.one_of(st.none(), producer_texts),
                          st.sampled_from([None, "0", "1", "2", "", "01"])), min_size=1, max_size=6))
def test_any_producer_properties_build_valid_batches(store, messages):
    # Whatever KAFKA_TXN / KAFKA_CONTROL hold (they may come from other front ends), the batches built are
    # well-formed, with their CRCs, and only well-formed producer fields make transactional batches.
    start = store.get_max_offset("t", 0)
    batch = store.new_batch("t", 0)
    for body, txn, control in messages:
        props = b""
        if txn is not None:
            props += b"KAFKA_TXN\x01" + txn.encode() + b"\x02"
        if control is not None:
            props += b"KAFKA_CONTROL\x01" + control.encode() + b"\x02"
        batch.add(body, props)
    store.append_batch(batch)
    data, taken, next_offset = read_back(store, start=start)
    assert taken == len(messages) and next_offset == start + len(messages)
    seen = 0
    for built in batches_of(data):
        assert built.validate_crc()
        records = list(built)
        seen += len(records)
        if built.is_transactional:
            pid, epoch = messages[built.base_offset - start][1].split(".")
            assert (built.producer_id, built.producer_epoch) == (int(pid), int(epoch))
        if built.is_control_batch:
            assert len(records) == 1 and records[0].key in (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01")
    assert seen == len(messages)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(record, min_size=1, max_size=4), st.integers(0, 2 ** 45)), min_size=1,
                max_size=4))
def test_log_append_time_stamps_each_produced_set_with_its_append_time(store, produced):
    start = store.get_max_offset("t", 0)
    for records, append_time in produced:
        batch = store.new_batch("t", 0)
        kafka_store.fill_batch(batch, kafka_batch(records), 1 << 30, log_append_time=append_time)
        store.append_batch(batch)
    units = store.scan_queue("t", 0, start, 100)
    data, count = store.read_records(units)
    out, taken, _ = kafka_store.build_batches(data, count, 1 << 30, log_append_time=True)
    batches = batches_of(out)
    expected = [(append_time, (key, value, headers)) for records, append_time in produced
                for key, value, headers, _ in records]
    got = []
    for batch in batches:
        assert batch.validate_crc() and batch.timestamp_type == 1
        for r in batch:
            # Every record of a LogAppendTime batch reads as the batch's (append) time.
            assert r.timestamp == batch.max_timestamp and r.timestamp_type == 1
            got.append((r.timestamp, (r.key, r.value, [(k, v) for k, v in r.headers])))
    assert taken == len(expected) and got == [(t, (k, v, [(n, h) for n, h in hs])) for t, (k, v, hs) in expected]
    # Runs split where the append time changes (adjacent sets with equal times may share a batch).
    assert len(batches) == 1 + sum(1 for a, b in zip(produced, produced[1:]) if a[1] != b[1])
