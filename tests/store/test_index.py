"""IndexService / IndexFile: query by key and time, rolling files, the on-disk layout RocketMQ reads, and
damaged index files (fuzz)."""
from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native import index_codec
from fastmq.errors import FastMQError
from fastmq.store import MessageStore
from fastmq.store.index import index_file_name

from .conftest import small_config


def test_query_by_key_and_unique_key(open_store):
    store = open_store()
    for i in range(20):
        store.put_message("Orders", 0, b"order %d" % i, keys=[f"order-{i}", f"customer-{i % 3}"])
    store.put_message("Orders", 1, b"u", properties={"UNIQ_KEY": "C0A8000100002A9F0000"})
    store.put_message("Other", 0, b"same key, other topic", keys="order-5")
    assert [m.body for m in store.query_message("Orders", "order-5")] == [b"order 5"]
    assert sorted(m.body for m in store.query_message("Orders", "customer-1")) == sorted(
        b"order %d" % i for i in range(1, 20, 3))
    assert [m.body for m in store.query_message("Orders", "C0A8000100002A9F0000")] == [b"u"]
    assert [m.body for m in store.query_message("Other", "order-5")] == [b"same key, other topic"]
    assert store.query_message("Orders", "nope") == []
    assert len(store.query_message("Orders", "customer-1", max_num=2)) == 2


def test_query_by_time_range(open_store, clock):
    store = open_store(clock=clock)
    stamps = []
    for i in range(6):
        clock.advance(10_000)
        stamps.append(store.put_message("T", 0, b"%d" % i, keys="k").store_timestamp)
    found = store.query_message("T", "k", begin=stamps[2], end=stamps[4])
    assert [m.body for m in found] == [b"4", b"3", b"2"]


def test_keys_spill_into_new_index_files(open_store):
    store = open_store(max_hash_slot_num=8, max_index_num=10)
    for i in range(40):
        store.put_message("T", 0, b"%d" % i, keys=f"k{i}")
    assert len(list((store.root / "index").iterdir())) >= 4
    for i in (0, 17, 39):
        assert [m.body for m in store.query_message("T", f"k{i}")] == [b"%d" % i]


def test_damaged_middle_file_is_rebuilt_with_its_successors(tmp_path):
    config = small_config(max_hash_slot_num=8, max_index_num=10)
    with MessageStore(tmp_path, config) as store:
        for i in range(40):
            store.put_message("T", 0, b"%d" % i, keys=f"k{i}")
    files = sorted((tmp_path / "index").iterdir())
    middle = files[len(files) // 2]
    content = bytearray(middle.read_bytes())
    content[0:8] = (-5).to_bytes(8, "big", signed=True)       # beginTimestamp
    content[36:40] = (3).to_bytes(4, "big")                   # indexCount > 1 with a negative begin: damage
    middle.write_bytes(content)
    with MessageStore(tmp_path, config) as store:
        for i in range(40):
            assert [m.body for m in store.query_message("T", f"k{i}")] == [b"%d" % i]


def test_index_file_left_empty_by_a_crash_is_rebuilt(tmp_path):
    # The process died between creating the newest index file and sizing it.
    config = small_config(max_hash_slot_num=8, max_index_num=10)
    with MessageStore(tmp_path, config) as store:
        for i in range(40):
            store.put_message("T", 0, b"%d" % i, keys=f"k{i}")
    newest = sorted((tmp_path / "index").iterdir())[-1]
    newest.write_bytes(b"")
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, config) as store:
        for i in range(40):
            assert [m.body for m in store.query_message("T", f"k{i}")] == [b"%d" % i]


def test_file_layout_is_rocketmq_layout(open_store, clock):
    store = open_store(clock=clock, max_hash_slot_num=16, max_index_num=32)
    first = store.put_message("TopicA", 0, b"x", keys="key1")
    second = store.put_message("TopicA", 0, b"y", keys="key1")
    (path,) = (store.root / "index").iterdir()
    assert path.name == index_file_name(clock.millis) and len(path.name) == 17
    data = path.read_bytes()
    assert len(data) == 40 + 16 * 4 + 32 * 20
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = struct.unpack_from(">qqqqii", data)
    assert (begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count) == (
        clock.millis, clock.millis, first.commitlog_offset, second.commitlog_offset, 1, 3)
    key_hash = index_codec.index_key_hash("TopicA#key1")
    assert struct.unpack_from(">i", data, 40 + (key_hash % 16) * 4)[0] == 2
    entries = 40 + 16 * 4
    assert struct.unpack_from(">iqii", data, entries + 20) == (key_hash, first.commitlog_offset, 0, 0)
    assert struct.unpack_from(">iqii", data, entries + 40) == (key_hash, second.commitlog_offset, 0, 1)


def test_wrong_geometry_is_a_clear_error(tmp_path):
    with MessageStore(tmp_path, small_config()) as store:
        store.put_message("T", 0, b"x", keys="k")
    try:
        MessageStore(tmp_path, small_config(max_hash_slot_num=65))
    except FastMQError as exc:
        assert "does not match" in str(exc)
    else:
        raise AssertionError("an index file of another geometry was accepted")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), position=st.integers(0, 40 + 64 * 4 + 256 * 20), crash=st.booleans())
def test_damaged_index_file_never_crashes(tmp_path_factory, data, position, crash):
    root = tmp_path_factory.mktemp("index")
    config = small_config()
    with MessageStore(root, config) as store:
        for i in range(30):
            store.put_message("T", 0, b"m%d" % i, keys=f"k{i % 7}")
    (path,) = (root / "index").iterdir()
    content = bytearray(path.read_bytes())
    size = len(content)
    content[position:position + len(data)] = data
    path.write_bytes(bytes(content[:size]))
    if crash:
        (root / "abort").touch()
    with MessageStore(root, config) as store:
        for key in ("k0", "k3", "zz"):
            for message in store.query_message("T", key):
                assert key in message.keys          # collisions and garbage never come back as hits
        store.put_message("T", 0, b"after", keys="k3")
        assert b"after" in [m.body for m in store.query_message("T", "k3")]
