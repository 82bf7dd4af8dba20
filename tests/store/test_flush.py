"""Flushing: synchronous group commit, asynchronous interval / least-pages flushing, ConsumeQueue flushing and
the checkpoint it writes. Every wait is bounded."""
from __future__ import annotations

import struct
import threading
import time

from fastmq.store import FlushDiskType, PutMessageStatus
from tests.support.waiting import WAIT, wait_for


def test_group_commit_shares_fsyncs_between_appenders(open_store):
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20)
    service = store.group_commit_service
    results = []
    lock = threading.Lock()

    def append(thread_id):
        for i in range(50):
            result = store.put_message("T", thread_id, b"x" * 64)
            assert result.ok
            # Acknowledged means durable: the fsynced end is at or past this record.
            assert service.flushed_offset >= result.end_offset
            with lock:
                results.append(result)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 400
    assert service.flush_count < 400


def test_sync_flush_timeout_is_reported(open_store):
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=50)
    store.group_commit_service.shutdown()
    result = store.put_message("T", 0, b"x")
    assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and not result.ok
    assert store.get_messages("T", 0, 0).messages[0].body == b"x"      # stored all the same


def test_async_flush_waits_for_least_pages(open_store):
    store = open_store(flush_commit_log_least_pages=4, flush_commit_log_thorough_interval_ms=3_600_000,
                       mapped_file_size_commit_log=1 << 20)
    store.put_message("T", 0, b"small")
    time.sleep(0.3)                       # six flush intervals: one small message is below 4 pages
    assert store.commit_log.flushed_where == 0
    result = store.put_messages("T", 0, [b"y" * 4000] * 5)
    assert wait_for(lambda: store.commit_log.flushed_where >= 16384)
    assert wait_for(lambda: store.checkpoint.physic_msg_timestamp == result.store_timestamp)


def test_async_thorough_flush_takes_everything(open_store):
    store = open_store(flush_commit_log_least_pages=4, flush_commit_log_thorough_interval_ms=100)
    result = store.put_message("T", 0, b"small")
    assert wait_for(lambda: store.commit_log.flushed_where == result.end_offset)


def test_consume_queue_flush_writes_the_checkpoint(open_store):
    store = open_store(flush_consume_queue_thorough_interval_ms=100)
    result = store.put_message("T", 0, b"x", keys="k")
    consume_queue = store.find_consume_queue("T", 0)
    assert wait_for(lambda: consume_queue.mapped_file_queue.flushed_where == 20)
    assert wait_for(lambda: struct.unpack_from(">qqq", (store.root / "checkpoint").read_bytes())[1:]
                      == (result.store_timestamp, result.store_timestamp))
    assert all(index_file.flushed for index_file in store.index_service.files)


def test_thorough_flush_takes_every_dirty_consume_queue_and_its_new_directory_entry(open_store):
    # An interval that never comes: only the flush called here runs.
    store = open_store(flush_interval_consume_queue_ms=3_600_000)
    for queue_id in range(40):
        for i in range(queue_id % 3 + 1):
            store.put_message("T", queue_id, b"%d" % i)
    queues = store.consume_queues()
    assert all(queue.dirty for queue in queues)
    assert not any(queue.mapped_file_queue.files[0].directory_synced for queue in queues)
    store.flush_consume_queue_service.flush(thorough=True)
    assert not any(queue.dirty for queue in queues)
    for queue in queues:
        (mapped,) = queue.mapped_file_queue.files
        assert mapped.directory_synced and mapped.flushed_position == queue.get_max_offset_in_queue() * 20
    store.put_message("T", 7, b"more")
    assert [queue.queue_id for queue in queues if queue.dirty] == [7]


def test_request_flush_calls_back_once_durable_and_shares_fsyncs(open_store):
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20)
    service = store.group_commit_service
    results = []
    called = threading.Semaphore(0)

    def durable(ok, end_offset):
        results.append((ok, service.flushed_offset >= end_offset))
        called.release()

    for i in range(20):
        batch = store.new_batch("T", 0)
        batch.add(b"y" * 100)
        result = store.append_batch(batch)
        service.request_flush(result.end_offset, lambda ok, end=result.end_offset: durable(ok, end))
    for _ in range(20):
        assert called.acquire(timeout=WAIT)
    assert results == [(True, True)] * 20


def test_request_flush_fails_pending_callbacks_when_the_service_stops(open_store):
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    service = store.group_commit_service
    service.shutdown()
    outcomes = []
    service.request_flush(service.flushed_offset + 100, outcomes.append)
    assert outcomes == [False]


def test_a_flush_round_takes_only_queues_with_enough_dirty_pages(open_store):
    # Thousands of queues holding a page or less each: a round that is not thorough leaves them to the thorough
    # one, without a task each.
    store = open_store(flush_interval_consume_queue_ms=3_600_000, flush_consume_queue_least_pages=2)
    store.put_message("T", 0, b"x")
    for i in range(2 * 4096 // 20 + 1):
        store.put_message("T", 1, b"%d" % i)
    quiet, busy = store.find_consume_queue("T", 0), store.find_consume_queue("T", 1)
    assert quiet.dirty and not quiet.flush_due(2) and quiet.flush_due(0)
    assert busy.flush_due(2)
    store.flush_consume_queue_service.flush(thorough=False)
    assert quiet.dirty and not busy.flush_due(2)
    store.flush_consume_queue_service.flush(thorough=True)
    assert not quiet.dirty and not quiet.flush_due(0)
