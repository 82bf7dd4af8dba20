"""Cleanup (seed 003): expiry at the deletion hour or above 75% disk use, forced deletion above 85%, writes
refused above 90%, ConsumeQueue and index files following the CommitLog's minimum. Clock and disk usage are
injected, so no test waits."""
from __future__ import annotations

import logging
import time

import pytest

from fastmq.store import DiskFullError, GetMessageStatus
from tests.support.waiting import wait_for

from .conftest import DiskUsage, ManualClock

HOUR_MS = 3_600_000


def local_hour(millis: int) -> int:
    return time.localtime(millis / 1000).tm_hour


def at_hour(after_millis: int, hour: int) -> int:
    """The first whole hour at or after `after_millis` whose local hour is `hour`."""
    millis = after_millis - after_millis % HOUR_MS + HOUR_MS
    while local_hour(millis) != hour:
        millis += HOUR_MS
    return millis


@pytest.fixture
def now_clock():
    return ManualClock(time.time_ns() // 1_000_000)


@pytest.fixture
def filled(open_store, now_clock, disk):
    store = open_store(clock=now_clock, disk_usage=disk, mapped_file_size_commit_log=4096,
                       mapped_file_size_consume_queue=10 * 20, max_hash_slot_num=8, max_index_num=20)
    for i in range(200):
        store.put_message("T", i % 2, b"x" * 200, keys=f"k{i}")
    assert len(store.commit_log.mapped_file_queue.files) > 12
    return store


def commitlog_files(store) -> int:
    return len(store.commit_log.mapped_file_queue.files)


def test_nothing_happens_outside_the_deletion_hour(filled, now_clock, disk):
    now_clock.millis = at_hour(now_clock.millis + 73 * HOUR_MS, 10)
    before = commitlog_files(filled)
    assert filled.cleanup.run_once() == (0, 0)
    assert commitlog_files(filled) == before
    assert disk.paths and disk.paths[-1] == str(filled.root)


def test_expired_files_go_at_the_deletion_hour(filled, now_clock):
    before = commitlog_files(filled)
    now_clock.millis = at_hour(now_clock.millis + 72 * HOUR_MS, 4)
    deleted, _ = filled.cleanup.run_once()
    assert deleted == 10                                          # at most ten per round
    deleted, _ = filled.cleanup.run_once()
    assert commitlog_files(filled) == 1 == before - 10 - deleted  # never the newest file
    min_offset = filled.get_min_phy_offset()
    for queue_id in (0, 1):
        consume_queue = filled.find_consume_queue("T", queue_id)
        files = consume_queue.mapped_file_queue.files
        assert files[0].file_from_offset > 0                      # the queue's first files are gone...
        for mapped in files[:-1]:                                 # ...and each one left still matters
            last_unit = consume_queue.get_unit((mapped.file_from_offset + mapped.file_size) // 20 - 1)
            assert last_unit[0] >= min_offset
        first_unit = consume_queue.get_unit(consume_queue.get_min_offset_in_queue())
        assert first_unit[0] >= min_offset
        result = filled.get_messages("T", queue_id, 0)
        assert result.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert result.next_begin_offset == filled.get_min_offset("T", queue_id) > 0
        again = filled.get_messages("T", queue_id, result.next_begin_offset)
        assert again.status is GetMessageStatus.FOUND
    assert len(filled.index_service.files) < 10
    assert filled.query_message("T", "k0") == [] and filled.query_message("T", "k199")[0].body == b"x" * 200


def test_expired_files_go_above_the_used_space_ratio(filled, now_clock, disk):
    now_clock.millis = at_hour(now_clock.millis + 73 * HOUR_MS, 10)
    disk.ratio = 0.80
    assert filled.cleanup.run_once()[0] == 10


def test_young_files_stay_at_the_deletion_hour(filled, now_clock):
    now_clock.millis = at_hour(now_clock.millis, 4)
    assert filled.cleanup.run_once()[0] == 0


def test_young_files_stay_below_the_forcible_ratio(filled, now_clock, disk):
    now_clock.millis = at_hour(now_clock.millis, 4)
    disk.ratio = 0.80
    assert filled.cleanup.run_once()[0] == 0


def test_forced_cleanup_above_85_percent_ignores_age(filled, disk, caplog):
    disk.ratio = 0.86
    with caplog.at_level(logging.WARNING, logger="fastmq.store.cleanup"):
        assert filled.cleanup.run_once()[0] == 10
    # Young files deleted are data lost before their retention: each one is a warning, not an info line.
    assert sum("before its retention ended" in r.getMessage() for r in caplog.records) == 10
    filled.put_message("T", 0, b"still writable")


def test_writes_refused_above_90_percent_until_space_returns(filled, disk):
    disk.ratio = 0.91
    filled.cleanup.run_once()
    with pytest.raises(DiskFullError) as info:
        filled.put_message("T", 0, b"x")
    assert info.value.retriable and info.value.code == 14
    assert len(filled.get_messages("T", 0, filled.get_min_offset("T", 0))) > 0     # reads still work
    disk.ratio = 0.50
    filled.cleanup.run_once()
    assert filled.put_message("T", 0, b"x").ok


def test_manual_deletion_ignores_the_hour(filled, now_clock):
    now_clock.millis = at_hour(now_clock.millis + 73 * HOUR_MS, 10)
    filled.cleanup.clean_commit_log.execute_delete_files_manually(times=1)
    assert filled.cleanup.run_once()[0] == 10
    assert filled.cleanup.run_once()[0] == 0


def test_full_disk_refuses_writes_from_the_start(open_store):
    store = open_store(disk_usage=DiskUsage(0.95))
    with pytest.raises(DiskFullError):
        store.put_message("T", 0, b"x")


def test_cleanup_thread_runs_on_its_interval(open_store, disk):
    store = open_store(disk_usage=disk, clean_resource_interval_ms=20)
    assert not store.disk_full
    disk.ratio = 0.95
    wait_for(lambda: store.disk_full, message="the cleanup thread seeing the full disk")
