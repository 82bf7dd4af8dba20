"""CommitLog: record placement, the end-of-file blank, physical offsets, reads, scans and replicated appends."""
from __future__ import annotations

import struct

import pytest

from fastmq._native import store_codec
from fastmq.store.commitlog import CommitLog
from fastmq.store.errors import HAProtocolError, MessageIllegalError

from .conftest import small_config


@pytest.fixture
def commit_log(tmp_path):
    log = CommitLog(tmp_path, small_config(mapped_file_size_commit_log=4096))
    dispatched = []
    log.batch_dispatcher = dispatched.append
    log.dispatched = dispatched
    yield log
    log.close()


def put(commit_log: CommitLog, body: bytes, topic="T", queue_id=0, sys_flag=0):
    batch = commit_log.new_batch(topic, queue_id, sys_flag)
    batch.add(body)
    commit_log.put_batch(batch)
    return batch


def test_records_fill_a_file_then_a_blank_closes_it(commit_log):
    batches = [put(commit_log, b"x" * 500) for _ in range(8)]
    sizes = {b.size(0) for b in batches}
    assert sizes == {store_codec.message_length(500, 1, 0)}
    size = sizes.pop()
    per_file = (4096 - 8) // size
    offsets = [b.commitlog_offset(0) for b in batches]
    assert offsets[:per_file] == [i * size for i in range(per_file)]
    assert offsets[per_file] == 4096
    first = commit_log.mapped_file_queue.files[0]
    blank_at = per_file * size
    assert struct.unpack_from(">ii", first.view, blank_at) == (4096 - blank_at, store_codec.BLANK_MAGIC)
    assert first.wrote_position == 4096
    for batch in batches:
        data = commit_log.get_data(batch.commitlog_offset(0), batch.size(0))
        assert struct.unpack_from(">q", data, 28)[0] == batch.commitlog_offset(0)   # PHYSICALOFFSET
        data.release()


def test_queue_offsets_and_dispatch(commit_log):
    for i in range(3):
        batch = put(commit_log, b"m%d" % i, queue_id=i % 2)
        assert batch.first_queue_offset == i // 2
    assert commit_log.topic_queue_table == {("T", 0): 2, ("T", 1): 1}
    assert len(commit_log.dispatched) == 3


def test_prepared_transaction_gets_no_queue_offset(commit_log):
    put(commit_log, b"a")
    batch = put(commit_log, b"b", sys_flag=store_codec.SYSFLAG_PREPARED)
    assert batch.first_queue_offset == 0
    assert commit_log.topic_queue_table == {("T", 0): 1}
    assert commit_log.get_message(batch.commitlog_offset(0)).queue_offset == 0


def test_reads(commit_log):
    batch = put(commit_log, b"hello")
    message = commit_log.get_message(batch.commitlog_offset(0), batch.size(0), check_crc=True)
    assert message.body == b"hello" and message.commitlog_offset == 0
    assert commit_log.get_data(batch.size(0), 1) is None          # not written yet
    assert commit_log.get_message(10_000) is None
    assert commit_log.pick_store_timestamp(0) == batch.store_timestamp
    assert commit_log.pick_store_timestamp(10_000) == -1


def test_scan_crosses_files_through_blanks(commit_log):
    batches = [put(commit_log, b"y" * 700) for _ in range(12)]
    seen = []
    result = commit_log.scan(0, True, lambda request: seen.append(request.commitlog_offset))
    assert seen == [b.commitlog_offset(0) for b in batches]
    assert result.offset == commit_log.get_max_offset()
    assert result.status == store_codec.STATUS_INCOMPLETE   # nothing readable past the written end


def test_message_too_large_for_a_file(commit_log):
    batch = commit_log.new_batch("T", 0)
    with pytest.raises(ValueError):
        batch.add(b"z" * 4096)


def test_append_data_rules(tmp_path):
    log = CommitLog(tmp_path, small_config(mapped_file_size_commit_log=4096))
    with pytest.raises(HAProtocolError):
        log.append_data(100, b"abc")            # an empty slave starts at a file boundary
    log.append_data(8192, b"a" * 4000)
    assert (log.get_min_offset(), log.get_max_offset()) == (8192, 12192)
    with pytest.raises(HAProtocolError):
        log.append_data(12000, b"b")            # must continue exactly at the end
    with pytest.raises(HAProtocolError):
        log.append_data(12192, b"c" * 200)      # crosses the file end
    log.append_data(12192, b"d" * 96)
    log.append_data(12288, b"e")                # next file
    assert [m.file_from_offset for m in log.mapped_file_queue.files] == [8192, 12288]
    log.close()


def test_store_rejects_oversized_message_cleanly(open_store):
    store = open_store(mapped_file_size_commit_log=4096)
    with pytest.raises(MessageIllegalError):
        store.put_message("T", 0, b"z" * 4096)
    with pytest.raises(MessageIllegalError):
        open_store(max_message_size=10, path=store.root.parent / "other").put_message("T", 0, b"z" * 11)
