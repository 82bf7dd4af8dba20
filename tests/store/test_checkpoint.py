"""StoreCheckpoint: RocketMQ's layout, the recovery margin, and damaged checkpoint files (fuzz)."""
from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.store.checkpoint import StoreCheckpoint


def test_layout_and_round_trip(tmp_path):
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp, checkpoint.index_msg_timestamp = 30, 20, 10
    checkpoint.close()
    data = (tmp_path / "checkpoint").read_bytes()
    assert len(data) == 4096
    assert struct.unpack_from(">qqq", data) == (30, 20, 10) and not any(data[24:])
    again = StoreCheckpoint(tmp_path / "checkpoint", read_only=True)
    assert (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp) == (30, 20, 10)


def test_min_timestamp_keeps_a_margin(tmp_path):
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp, checkpoint.index_msg_timestamp = (
        10_000, 9_000, 5_000)
    assert checkpoint.min_timestamp(include_index=False) == 6_000
    assert checkpoint.min_timestamp(include_index=True) == 2_000
    checkpoint.physic_msg_timestamp = 1_000
    assert checkpoint.min_timestamp(include_index=False) == 0
    checkpoint.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=64))
def test_any_checkpoint_content_loads_safely(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cp") / "checkpoint"
    path.write_bytes(data)
    checkpoint = StoreCheckpoint(path)
    values = (checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp, checkpoint.index_msg_timestamp)
    assert all(value >= 0 for value in values)
    if len(data) < 24:
        assert values == (0, 0, 0)          # unreadable: replay everything, which is always safe
    checkpoint.close()
    assert path.stat().st_size >= 4096
