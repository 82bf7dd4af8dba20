"""aiokafka's BatchBuilder (fastmq/kafka/_native/aio_batch.pyx): records encoded as they are appended, handed over
once."""
from __future__ import annotations

import gc
import time

import pytest

from fastmq.kafka._native.accumulator import RecordAccumulator
from fastmq.kafka._native.aio_batch import BatchBuilder
from fastmq.kafka._native.records import RecordBatch

BATCH_HEADER_SIZE = 61          # a v2 batch header


def new_batch(batch_size: int = 10_000, **serializers) -> BatchBuilder:
    return BatchBuilder(RecordAccumulator(batch_size=batch_size).open_builder(), **serializers)


def test_records_are_encoded_as_appended_with_their_keys_values_headers_and_timestamps():
    batch = new_batch()
    before = time.time() * 1000
    answers = [batch.append(key=b"k%d" % i if i >= 3 else None, value=b"v%d" % i, timestamp=None) for i in range(5)]
    answers.append(batch.append(key=None, value=None, timestamp=1_700_000_000_000, headers=[("h", b"1"), ("n", None)]))
    assert [a.offset for a in answers] == list(range(6))
    assert batch.size() == BATCH_HEADER_SIZE + sum(a.size for a in answers)
    assert before - 1 <= answers[0].timestamp == answers[4].timestamp <= time.time() * 1000 + 1
    builder, count, size, data_bytes = batch.take()
    assert (count, size, data_bytes) == (6, batch.size(), 2 * 2 + 2 * 5)
    records = list(RecordBatch(bytes(finish(builder, count, size))))
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == (
        [(i, b"k%d" % i if i >= 3 else None, b"v%d" % i, []) for i in range(5)]
        + [(5, None, None, [("h", b"1"), ("n", None)])])
    assert [r.timestamp for r in records] == [answers[0].timestamp] * 5 + [1_700_000_000_000]


def test_a_batch_refuses_a_record_past_its_size_but_always_takes_its_first():
    batch = new_batch(batch_size=200)
    assert batch.append(key=None, value=b"x" * 500, timestamp=None) is not None
    assert batch.append(key=None, value=b"y", timestamp=None) is None
    small = new_batch(batch_size=200)
    taken = 0
    while small.append(key=None, value=b"z" * 30, timestamp=None) is not None:
        taken += 1
    assert 3 <= taken < 6 and small.record_count() == taken and small.size() <= 200


def test_serializers_run_at_append_and_bad_values_are_refused_clearly():
    batch = new_batch(key_serializer=str.encode, value_serializer=str.encode)
    assert batch.append(key="k", value="v", timestamp=None).size > 0
    plain = new_batch()
    with pytest.raises(TypeError, match="value must be bytes-like, not str"):
        plain.append(key=None, value="text", timestamp=None)
    with pytest.raises(TypeError, match="key must be bytes-like, not int"):
        plain.append(key=5, value=b"v", timestamp=None)
    assert plain.record_count() == 0
    # A key read through a buffer view is let go when the value is refused (a bytearray with a view on it cannot
    # grow).
    key = bytearray(b"k")
    with pytest.raises(TypeError, match="value must be bytes-like, not int"):
        plain.append(key=key, value=5, timestamp=None)
    key.extend(b"ey")
    assert plain.append(key=key, value=memoryview(b"v"), timestamp=None).size > 0


def test_take_hands_the_records_over_once_and_closes_the_batch():
    batch = new_batch()
    batch.append(key=b"k", value=b"v", timestamp=None)
    batch.take()
    assert batch.record_count() == 1
    assert batch.append(key=None, value=b"late", timestamp=None) is None
    with pytest.raises(RuntimeError, match="already taken"):
        batch.take()


def test_the_metadata_append_answers_is_not_tracked_by_the_garbage_collector():
    metadata = new_batch().append(key=None, value=b"v", timestamp=1)
    assert (metadata.offset, metadata.timestamp, metadata.crc) == (0, 1, None) and not gc.is_tracked(metadata)


def finish(builder, count: int, size: int):
    """The payload the sender writes for a built batch queued on an accumulator."""
    accumulator = RecordAccumulator(batch_size=10_000)
    accumulator.update_topic("t", [0])
    sent = accumulator.send_built("t", 0, builder, count, size, 0)
    nodes = accumulator.ready(time.monotonic())[0]
    (drained,) = accumulator.drain(nodes[0], 1 << 20, time.monotonic())
    assert drained is sent and accumulator.used_memory == size
    return drained.payload
