"""ConsumeQueue: unit layout, file size rounding, scans across files, filler units, truncation, time search,
disk blocks that follow the units, and damaged ConsumeQueue files (fuzz)."""
from __future__ import annotations

import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native import queue_codec, store_codec
from fastmq._native.queue_codec import QueueUnits
from fastmq._native.store_codec import DispatchRequest
from fastmq.errors import FastMQError
from fastmq.store import GetMessageStatus, MessageStore
from fastmq.store.consumequeue import ConsumeQueue

from fastmq.store.mapped_file import OS_PAGE_SIZE

from .conftest import allocated, small_config


def test_file_size_rounds_up_to_whole_units(open_store):
    # Seed 003: a requested size of 1024 becomes ceil(1024 / 20) * 20 = 1040, files named 0, 1040, 2080.
    store = open_store(mapped_file_size_consume_queue=1024)
    for i in range(110):
        store.put_message("T", 0, b"m%d" % i)
    names = sorted(p.name for p in (store.root / "consumequeue" / "T" / "0").iterdir())
    assert names == ["00000000000000000000", "00000000000000001040", "00000000000000002080"]
    assert store.get_max_offset("T", 0) == 110


def test_units_hold_offset_size_and_tags_hash(open_store):
    store = open_store()
    results = [store.put_message("T", 2, b"body", tags=tag) for tag in ("TagA", None, "TagB")]
    data = (store.root / "consumequeue" / "T" / "2" / "00000000000000000000").read_bytes()
    for i, (result, tag) in enumerate(zip(results, ("TagA", None, "TagB"))):
        offset, size, code = struct.unpack_from(">qiq", data, i * 20)
        assert (offset, size) == (result.commitlog_offset, result.size)
        assert code == (store_codec.java_hash(tag) if tag else 0)


def test_scan_across_files_and_get_messages(open_store):
    store = open_store()
    for i in range(180):
        store.put_message("T", 0, b"m%d" % i, tags="even" if i % 2 == 0 else "odd")
    units = store.scan_queue("T", 0, 30, 100)
    assert list(units.queue_offsets) == list(range(30, 130)) and units.next_offset == 130
    result = store.get_messages("T", 0, 95, max_count=10, tags="odd")
    assert [m.queue_offset for m in result] == list(range(95, 115, 2))
    assert [m.body for m in result] == [b"m%d" % i for i in range(95, 115, 2)]
    assert result.next_begin_offset == 114


def test_queue_starting_mid_file_gets_filler_units(tmp_path):
    queue = ConsumeQueue("T", 0, tmp_path, 50 * 20)
    assert queue.put_message_position_info(DispatchRequest("T", 0, 5000, 100, 0, 1, 120))
    first = queue.mapped_file_queue.files[0]
    assert first.file_from_offset == 100 * 20
    assert struct.unpack_from(">qiq", first.view, 0) == (0, queue_codec.CQ_BLANK_SIZE, 0)
    assert (queue.get_min_offset_in_queue(), queue.get_max_offset_in_queue()) == (120, 121)
    assert queue.get_unit(120) == (5000, 100, 0)
    # A repeat is ignored; the next one follows.
    assert not queue.put_message_position_info(DispatchRequest("T", 0, 5000, 100, 0, 1, 120))
    assert queue.put_message_position_info(DispatchRequest("T", 0, 5100, 100, 0, 1, 121))
    units = QueueUnits(10)
    queue.scan(0, units)
    assert list(units.queue_offsets) == [120, 121]
    queue.close()


def test_truncate_dirty_logic_files(tmp_path):
    queue = ConsumeQueue("T", 0, tmp_path, 10 * 20)
    for i in range(25):
        queue.put_message_position_info(DispatchRequest("T", 0, 100 * i, 100, 0, 1, i))
    queue.truncate_dirty_logic_files(100 * 13 + 50)      # the CommitLog was cut inside message 13
    assert queue.get_max_offset_in_queue() == 14
    assert queue.max_physic_offset == 1400
    assert len(queue.mapped_file_queue.files) == 2
    queue.truncate_dirty_logic_files(0)
    assert queue.get_max_offset_in_queue() == 0
    queue.close()


def test_recover_finds_the_end_of_written_units(tmp_path):
    queue = ConsumeQueue("T", 0, tmp_path, 10 * 20)
    for i in range(15):
        queue.put_message_position_info(DispatchRequest("T", 0, 100 * i, 100, 0, 1, i))
    queue.close()
    again = ConsumeQueue("T", 0, tmp_path, 10 * 20)
    again.load()
    again.recover()
    assert again.get_max_offset_in_queue() == 15 and again.max_physic_offset == 1500
    again.close()


def test_offset_by_time(open_store, clock):
    store = open_store(clock=clock)
    stamps = []
    for i in range(40):
        clock.advance(1000)
        stamps.append(store.put_message("T", 0, b"x").store_timestamp)
    assert store.get_offset_by_time("T", 0, 0) == 0
    assert store.get_offset_by_time("T", 0, stamps[17]) == 17
    assert store.get_offset_by_time("T", 0, stamps[17] - 1) == 17
    assert store.get_offset_by_time("T", 0, stamps[-1] + 1) == 40
    assert store.get_offset_by_time("missing", 0, 0) == 0
    assert store.get_message_store_timestamp("T", 0, 5) == stamps[5]


def test_cold_queues_hold_a_page_and_a_busy_one_its_units(open_store):
    store = open_store(mapped_file_size_consume_queue=300_000 * 20)
    for queue_id in range(100):
        store.put_message("Cold", queue_id, b"one")
    for i in range(5000):
        store.put_message("Busy", 0, b"m%d" % i)
    cold = [allocated(path) for path in (store.root / "consumequeue" / "Cold").rglob("0" * 20)]
    assert len(cold) == 100 and max(cold) <= OS_PAGE_SIZE
    (busy,) = (store.root / "consumequeue" / "Busy" / "0").iterdir()
    assert os.stat(busy).st_size == 300_000 * 20
    assert 5000 * 20 <= allocated(busy) <= 5000 * 20 + 2 * (5000 * 20) + OS_PAGE_SIZE


def test_recovery_finds_damage_past_a_hole(open_store, tmp_path):
    # Units of T/0 lost from 10 on and garbage in a block after a hole: the garbage shows the file is damaged,
    # so T/0 is dispatched again from the CommitLog although T/1 (dispatched further) is intact.
    config = small_config(mapped_file_size_consume_queue=2000 * 20)
    store = open_store(tmp_path / "s", config)
    for i in range(30):
        store.put_message("T", 0, b"zero %d" % i)
        store.put_message("T", 1, b"one %d" % i)
    store.close()
    path = tmp_path / "s" / "consumequeue" / "T" / "0" / ("0" * 20)
    with open(path, "r+b") as file:
        file.seek(10 * 20)
        file.write(bytes(20 * 20))
        file.seek(5 * OS_PAGE_SIZE)
        file.write(b"\xff" * 20)
    store = open_store(tmp_path / "s", config)
    assert store.get_max_offset("T", 0) == 30
    assert [m.body for m in store.get_messages("T", 0, 8, 4)] == [b"zero %d" % i for i in range(8, 12)]
    assert allocated(path) <= 2 * OS_PAGE_SIZE      # the garbage's block went with the cut


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=0, max_size=50 * 20), cut=st.integers(0, 50 * 20))
def test_damaged_consume_queue_file_never_crashes(tmp_path_factory, data, cut):
    root = tmp_path_factory.mktemp("cq")
    config = small_config()
    with MessageStore(root, config) as store:
        for i in range(30):
            store.put_message("T", 0, b"m%d" % i)
    path = root / "consumequeue" / "T" / "0" / "00000000000000000000"
    original = bytearray(path.read_bytes())
    original[cut:cut + len(data)] = data
    path.write_bytes(bytes(original[:50 * 20]).ljust(50 * 20, b"\x00"))
    (root / "abort").touch()     # as after a crash
    try:
        with MessageStore(root, config) as store:
            result = store.get_messages("T", 0, 0, 64)
            assert result.status in set(GetMessageStatus)
            for message in result:
                assert message.topic == "T" and message.body.startswith(b"m")
            buffer, count = store.read_records(store.scan_queue("T", 0, 0, 64))
            assert len(buffer) >= 0 and count >= 0
    except FastMQError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=64), page=st.integers(0, 9), offset=st.integers(0, OS_PAGE_SIZE - 1))
def test_bytes_anywhere_in_a_sparse_consume_queue_file_never_crash_recovery(tmp_path_factory, data, page, offset):
    # Written with pwrite into a file of holes, before or after the units: reopening never crashes, and what is
    # read is the messages the units point at.
    root = tmp_path_factory.mktemp("sparse-cq")
    config = small_config(mapped_file_size_consume_queue=2000 * 20)
    with MessageStore(root, config) as store:
        for i in range(30):
            store.put_message("T", 0, b"m%d" % i)
    path = root / "consumequeue" / "T" / "0" / ("0" * 20)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, page * OS_PAGE_SIZE + offset)
    finally:
        os.close(fd)
    try:
        with MessageStore(root, config) as store:
            for message in store.get_messages("T", 0, 0, 64):
                assert message.body == b"m%d" % message.queue_offset
    except FastMQError:
        pass


def test_offset_range_is_the_min_and_max_offsets(tmp_path):
    store = MessageStore(tmp_path, small_config(mapped_file_size_consume_queue=200))
    try:
        assert store.get_offset_range("T", 0) == (0, 0)
        for i in range(25):
            store.put_message("T", 0, b"m%d" % i)
        consume_queue = store.find_consume_queue("T", 0)
        consume_queue.min_logic_offset = 12 * 20
        assert store.get_offset_range("T", 0) == (store.get_min_offset("T", 0), store.get_max_offset("T", 0)) == (12, 25)
    finally:
        store.close()
