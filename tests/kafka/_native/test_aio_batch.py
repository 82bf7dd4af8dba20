"""aiokafka's BatchBuilder (fastmq/kafka/_native/aio_batch.pyx): what it keeps of its records and hands over."""
from __future__ import annotations

import gc

import pytest

from fastmq.kafka._native.aio_batch import BatchBuilder


def test_keys_are_kept_from_the_first_record_that_has_one():
    batch = BatchBuilder(10_000)
    for i in range(6):
        batch.append(key=b"k%d" % i if i >= 3 else None, value=b"v%d" % i, timestamp=None)
    assert [row[0] for row in batch.rows()] == [None, None, None, b"k3", b"k4", b"k5"]
    values, keys = batch.take()
    assert values == [b"v%d" % i for i in range(6)] and keys == [None, None, None, b"k3", b"k4", b"k5"]


def test_a_batch_without_keys_hands_over_none_for_them():
    batch = BatchBuilder(10_000)
    batch.append(key=None, value=b"a", timestamp=None)
    batch.append(key=None, value=None, timestamp=None)
    assert batch.take() == ([b"a", None], None)


def test_take_hands_the_records_over_once_and_closes_the_batch():
    batch = BatchBuilder(10_000)
    batch.append(key=b"k", value=b"v", timestamp=None)
    batch.take()
    assert not [held for held in gc.get_referents(batch) if isinstance(held, list)]
    assert batch.record_count() == 1
    assert batch.append(key=None, value=b"late", timestamp=None) is None
    with pytest.raises(RuntimeError, match="already taken"):
        batch.take()
    with pytest.raises(RuntimeError, match="already taken"):
        batch.rows()


def test_the_metadata_append_answers_is_not_tracked_by_the_garbage_collector():
    metadata = BatchBuilder(10_000).append(key=None, value=b"v", timestamp=1)
    assert (metadata.offset, metadata.timestamp, metadata.crc) == (0, 1, None) and not gc.is_tracked(metadata)
