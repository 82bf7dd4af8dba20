"""The offsets a streaming query keeps in its checkpoint (fastmq.spark.offsets.to_json / from_json): they come
back as they went, and a damaged checkpoint raises CorruptDataError, nothing else."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import CorruptDataError
from fastmq.kafka.structs import TopicPartition
from fastmq.spark.offsets import from_json, to_json

OFFSETS = st.dictionaries(st.builds(TopicPartition, st.text(min_size=1, max_size=8), st.integers(0, 4096)),
                          st.integers(-2, 1 << 62), max_size=8)


@settings(max_examples=200, deadline=None)
@given(OFFSETS)
def test_offsets_come_back_from_the_checkpoint_as_they_went(offsets) -> None:
    assert from_json(json.loads(json.dumps(to_json(offsets)))) == offsets


@pytest.mark.parametrize("damaged", [None, [], "t", {"t": None}, {"t": [1]}, {"t": {"x": 1}}, {"t": {"0": "x"}},
                                     {"t": {"0": {}}}])
def test_a_damaged_checkpoint_says_so(damaged) -> None:
    with pytest.raises(CorruptDataError, match="are not {topic: {partition: offset}}"):
        from_json(damaged)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=3), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_any_json_gives_offsets_or_corrupt_data_error(value) -> None:
    try:
        offsets = from_json(value)
    except CorruptDataError:
        return
    assert all(isinstance(tp, TopicPartition) and isinstance(o, int) for tp, o in offsets.items())
