"""MessageStore's API: put/get, statuses, tag filters, batches, validation, waiting, the zero-copy path,
read-only opening, locking and concurrent use."""
from __future__ import annotations

import hashlib
import threading
import time

import pytest

from fastmq.errors import CorruptDataError
from fastmq.store import (FlushDiskType, GetMessageStatus, Message, MessageIllegalError, MessageStore,
                          MessageStoreConfig, PutMessageStatus, ReadOnlyStoreError, StoreClosedError,
                          StoreConfigError, StoreLockedError, decode_message_id, decode_messages)
from fastmq.store.store import parse_tag_filter

from .conftest import descriptors_of, maps_of, small_config


def test_put_and_get_round_trip(open_store, clock):
    store = open_store(clock=clock)
    result = store.put_message("Orders", 3, b"payload", tags="created", keys=["o-1", "c-9"],
                               properties={"trace": "abc"}, born_timestamp=1234, born_host=("10.1.2.3", 5555),
                               flag=7)
    assert result.ok and result.status is PutMessageStatus.PUT_OK
    assert (result.queue_offset, result.commitlog_offset, result.message_count) == (0, 0, 1)
    assert decode_message_id(result.msg_id) == (("127.0.0.1", 10911), 0)
    (message,) = store.get_messages("Orders", 3, 0).messages
    assert (message.topic, message.queue_id, message.queue_offset, message.commitlog_offset) == ("Orders", 3, 0, 0)
    assert (message.body, message.tags, message.keys) == (b"payload", "created", ["o-1", "c-9"])
    assert message.properties["trace"] == "abc"
    assert (message.born_timestamp, message.store_timestamp) == (1234, clock.millis)
    assert message.born_host == ("10.1.2.3", 5555) and message.store_host == ("127.0.0.1", 10911)
    assert message.flag == 7 and message.msg_id == result.msg_id and message.store_size == result.size
    assert store.get_message_by_id(result.msg_id).body == b"payload"
    assert store.get_message_by_offset(result.commitlog_offset).body == b"payload"


def test_long_topic_is_stored_as_v2(open_store):
    store = open_store()
    topic = "t" * 200
    store.put_message(topic, 0, b"x")
    (message,) = store.get_messages(topic, 0, 0).messages
    assert message.topic == topic and message.magic == -626843477


def test_get_statuses(open_store):
    store = open_store()
    assert store.get_messages("T", 0, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(5):
        store.put_message("T", 0, b"%d" % i, tags="a" if i < 4 else "b")
    found = store.get_messages("T", 0, 1, max_count=2)
    assert found.status is GetMessageStatus.FOUND and [m.body for m in found] == [b"1", b"2"]
    assert (found.next_begin_offset, found.min_offset, found.max_offset) == (3, 0, 5)
    assert store.get_messages("T", 0, 5).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_messages("T", 0, 9)
    assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and badly.next_begin_offset == 0
    no_match = store.get_messages("T", 0, 0, max_count=3, tags="b")
    assert [m.body for m in no_match] == [b"4"] and no_match.next_begin_offset == 5
    nothing = store.get_messages("T", 0, 0, max_count=3, tags="zzz")
    assert nothing.status is GetMessageStatus.NO_MATCHED_MESSAGE and nothing.next_begin_offset == 5


def test_tag_filter_forms_and_hash_collisions(open_store):
    # "Aa" and "BB" share Java's hashCode (2112): the ConsumeQueue cannot tell them apart, the message can.
    store = open_store()
    for tag in ("Aa", "BB", "C", "Aa"):
        store.put_message("T", 0, tag.encode(), tags=tag)
    assert [m.body for m in store.get_messages("T", 0, 0, tags="Aa")] == [b"Aa", b"Aa"]
    assert [m.body for m in store.get_messages("T", 0, 0, tags="BB || C")] == [b"BB", b"C"]
    assert [m.body for m in store.get_messages("T", 0, 0, tags=["C"])] == [b"C"]
    assert len(store.get_messages("T", 0, 0, tags="*")) == 4
    assert list(store.scan_queue("T", 0, 0, 10, tags="Aa").queue_offsets) == [0, 1, 3]
    assert parse_tag_filter(" * ") == (None, None) and parse_tag_filter(None) == (None, None)


def test_max_bytes(open_store):
    store = open_store()
    sizes = [store.put_message("T", 0, b"x" * 100).size for _ in range(5)]
    assert len(store.get_messages("T", 0, 0, max_bytes=2 * sizes[0])) == 2
    assert len(store.get_messages("T", 0, 0, max_bytes=1)) == 1


def test_put_messages_batch(open_store):
    store = open_store()
    store.put_message("T", 0, b"first")
    result = store.put_messages("T", 0, [b"a", Message(b"b", tags="t", keys="kb"), bytearray(b"c")])
    assert result.queue_offsets == [1, 2, 3] and result.message_count == 3
    assert len(result.msg_ids) == 3 and result.end_offset == store.get_max_phy_offset()
    assert [m.body for m in store.get_messages("T", 0, 0)] == [b"first", b"a", b"b", b"c"]
    assert store.query_message("T", "kb")[0].body == b"b"
    with pytest.raises(MessageIllegalError):
        store.put_messages("T", 0, [])
    with pytest.raises(MessageIllegalError):
        store.put_messages("T", 0, [b"ok", Message(b"bad", properties={"a\x01": "b"})])
    assert store.get_max_offset("T", 0) == 4      # nothing of the refused batch was written


@pytest.mark.parametrize("topic", ["", "a/b", "..", ".", "with space", "x" * 256, "名前"])
def test_bad_topics(open_store, topic):
    with pytest.raises(MessageIllegalError):
        open_store().put_message(topic, 0, b"x")


def test_other_validation(open_store):
    store = open_store()
    with pytest.raises(MessageIllegalError):
        store.put_message("T", -1, b"x")
    with pytest.raises(MessageIllegalError):
        store.put_message("T", 0, b"x", properties={"k": "v\x02"})
    with pytest.raises(MessageIllegalError):
        store.put_message("T", 0, b"x" * (64 * 1024))


def test_wait_for_messages_and_listeners(open_store):
    store = open_store()
    arrivals = []

    def listener(topic, queue_id, max_offset):
        arrivals.append((topic, queue_id, max_offset))

    store.add_arrival_listener(listener)
    assert not store.wait_for_messages("T", 0, 0, timeout=0.05)
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(store.wait_for_messages("T", 0, 0, timeout=10)))
    waiter.start()
    time.sleep(0.05)  # the waiter is asleep when the message arrives
    store.put_message("T", 0, b"x")
    waiter.join(10)
    assert woke == [True]
    store.put_messages("T", 1, [b"a", b"b"])
    store.remove_arrival_listener(listener)
    store.put_message("T", 1, b"unheard")
    assert arrivals == [("T", 0, 1), ("T", 1, 2)]
    assert store.wait_for_messages("T", 1, 1, timeout=0)


def test_zero_copy_path_matches_get_messages(open_store):
    store = open_store()
    for i in range(300):
        store.put_message("T", i % 3, b"m%d" % i, tags="even" if i % 2 == 0 else "odd")
    units = store.scan_queue("T", 1, 10, 50)
    assert units.next_offset == 60 and len(units) == 50
    buffer, count = store.read_records(units)
    assert count == 50
    decoded = decode_messages(buffer)
    expected = store.get_messages("T", 1, 10, max_count=50).messages
    assert [(m.queue_offset, m.body) for m in decoded] == [(m.queue_offset, m.body) for m in expected]
    view = store.get_data(units[0][0], units[0][1])
    assert bytes(view) == bytes(buffer[:units[0][1]])
    view.release()
    assert len(store.scan_queue("missing", 0, 0, 10)) == 0


def test_damaged_unit_never_returns_another_queues_message(open_store):
    store = open_store()
    store.put_message("T", 0, b"q0")
    other = store.put_message("T", 1, b"q1")
    consume_queue = store.find_consume_queue("T", 0)
    mapped = consume_queue.mapped_file_queue.files[0]
    mapped.view[0:12] = other.commitlog_offset.to_bytes(8, "big") + other.size.to_bytes(4, "big")
    assert store.get_messages("T", 0, 0).messages == []
    with pytest.raises(CorruptDataError):
        store.read_records(store.scan_queue("T", 0, 0, 10))


def test_lock_and_close(tmp_path):
    store = MessageStore(tmp_path, small_config())
    with pytest.raises(StoreLockedError):
        MessageStore(tmp_path, small_config())
    store.close()
    store.close()
    with pytest.raises(StoreClosedError):
        store.put_message("T", 0, b"x")
    with pytest.raises(StoreClosedError):
        store.get_messages("T", 0, 0)
    MessageStore(tmp_path, small_config()).close()


def tree_digest(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_read_only_opening_of_a_rocketmq_layout(tmp_path):
    # A store written with RocketMQ's 1:4 index geometry and other file sizes, left "running" (abort present),
    # with fastjson's offset file: read-only opening with default settings infers the sizes from the files.
    config = small_config(mapped_file_size_commit_log=128 * 1024, mapped_file_size_consume_queue=100 * 20,
                          max_hash_slot_num=50, max_index_num=200)
    with MessageStore(tmp_path, config) as store:
        for i in range(2000):
            store.put_message("TopicTest", i % 4, b"msg-%d" % i, tags="TagA", keys=f"k{i}")
    (tmp_path / "config" / "consumerOffset.json").write_text('{"offsetTable":{"TopicTest@g":{0:250,1:250}}}')
    (tmp_path / "abort").touch()
    (tmp_path / "lock").unlink()
    before = tree_digest(tmp_path)
    with MessageStore(tmp_path, MessageStoreConfig(read_only=True)) as store:
        assert store.get_max_offset("TopicTest", 2) == 500
        assert [m.body for m in store.get_messages("TopicTest", 2, 498)] == [b"msg-1994", b"msg-1998"]
        assert [m.body for m in store.query_message("TopicTest", "k1234")] == [b"msg-1234"]
        assert store.consumer_offset_manager.query_offset("g", "TopicTest", 1) == 250
        with pytest.raises(ReadOnlyStoreError):
            store.put_message("TopicTest", 0, b"x")
    assert tree_digest(tmp_path) == before


def test_read_only_needs_an_existing_directory(tmp_path):
    with pytest.raises(StoreConfigError):
        MessageStore(tmp_path / "missing", MessageStoreConfig(read_only=True))


@pytest.mark.parametrize("bad", [{"commit_log_reserve_ahead": -1}, {"max_open_mapped_files": 0}])
def test_disk_and_mapping_settings_are_checked(tmp_path, bad):
    with pytest.raises(StoreConfigError):
        MessageStore(tmp_path, small_config(**bad))


def test_sync_flush_returns_after_fsync(open_store):
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    result = store.put_message("T", 0, b"durable")
    assert result.ok
    assert store.commit_log.flushed_where >= result.end_offset


def test_concurrent_appenders_and_readers(open_store):
    store = open_store()
    errors = []
    per_thread = 300

    def append(thread_id):
        try:
            for i in range(per_thread):
                store.put_message("T", thread_id % 2, b"%d:%d" % (thread_id, i))
        except Exception as exc:   # pragma: no cover - reported below
            errors.append(exc)

    def read():
        try:
            for _ in range(200):
                for queue_id in (0, 1):
                    result = store.get_messages("T", queue_id, 0, 64)
                    assert [m.queue_offset for m in result] == list(range(len(result)))
        except Exception as exc:   # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    for queue_id in (0, 1):
        bodies = []
        offset = 0
        while True:
            result = store.get_messages("T", queue_id, offset, 128)
            if not result.messages:
                break
            assert [m.queue_offset for m in result] == list(range(offset, offset + len(result)))
            bodies += [m.body for m in result]
            offset = result.next_begin_offset
        for thread_id in (queue_id, queue_id + 2):
            mine = [b for b in bodies if b.startswith(b"%d:" % thread_id)]
            assert mine == [b"%d:%d" % (thread_id, i) for i in range(per_thread)]


def test_append_batch_returns_before_the_flush_and_when_flushed_reports_durability(open_store):
    # ASYNC_FLUSH with a flush interval far away: only when_flushed() can make the records durable.
    store = open_store(flush_interval_commit_log_ms=3_600_000, mapped_file_size_commit_log=1 << 20)
    arrivals = []
    store.add_arrival_listener(lambda topic, queue_id, max_offset: arrivals.append((topic, queue_id, max_offset)))
    batch = store.new_batch("T", 2)
    for i in range(3):
        batch.add(b"m%d" % i, born_timestamp=1000 + i)
    result = store.append_batch(batch)
    assert result.ok and result.queue_offsets == [0, 1, 2]
    assert arrivals == [("T", 2, 3)]
    assert store.commit_log.flushed_where < result.end_offset
    outcomes = []
    done = threading.Event()
    store.when_flushed(result.end_offset, lambda ok: (outcomes.append(ok), done.set()))
    assert done.wait(10)
    assert outcomes == [True] and store.commit_log.flushed_where >= result.end_offset
    store.when_flushed(result.end_offset, outcomes.append)      # already durable: answered at once
    assert outcomes == [True, True]
    assert [m.body for m in store.get_messages("T", 2, 0)] == [b"m0", b"m1", b"m2"]
    with pytest.raises(MessageIllegalError):
        store.append_batch(store.new_batch("T", 2))


def test_when_flushed_after_close_reports_failure(open_store):
    store = open_store()
    batch = store.new_batch("T", 0)
    batch.add(b"x")
    result = store.append_batch(batch)
    store.close()
    outcomes = []
    store.when_flushed(result.end_offset + 1, outcomes.append)
    assert outcomes == [False]


def test_read_records_into_a_reused_buffer(open_store):
    store = open_store()
    for i in range(5):
        store.put_message("T", 0, b"m%d" % i)
    fresh, count = store.read_records(store.scan_queue("T", 0, 0, 5))
    buffer = bytearray()
    view, reused_count = store.read_records(store.scan_queue("T", 0, 0, 5), buffer)
    assert (bytes(view), reused_count) == (bytes(fresh), count) and count == 5
    view.release()
    smaller, _ = store.read_records(store.scan_queue("T", 0, 3, 5), buffer)   # the same buffer, no growth
    assert bytes(smaller) == bytes(fresh)[len(fresh) * 3 // 5:] and len(buffer) == len(fresh)
    smaller.release()


def test_many_queues_within_the_open_mapping_bound(open_store, tmp_path):
    bound = 8
    # Besides two per mapping: the lock, the checkpoint, and a flush thread's own descriptor while it syncs.
    descriptors = 2 * bound + 3
    store = open_store(tmp_path / "s", max_open_mapped_files=bound, message_index_enable=False)
    for round_number in range(3):
        for queue_id in range(300):
            store.put_message("Many", queue_id, b"%d/%d" % (queue_id, round_number))
    assert maps_of(tmp_path / "s") <= bound and descriptors_of(tmp_path / "s") <= descriptors
    for queue_id in range(0, 300, 7):
        assert [m.body for m in store.get_messages("Many", queue_id, 0)] == [b"%d/%d" % (queue_id, r)
                                                                             for r in range(3)]
    store.close()
    store = open_store(tmp_path / "s", max_open_mapped_files=bound, message_index_enable=False)
    assert maps_of(tmp_path / "s") <= bound
    for queue_id in range(300):
        assert store.get_max_offset("Many", queue_id) == 3
        assert store.get_messages("Many", queue_id, 2).messages[0].body == b"%d/2" % queue_id
    assert maps_of(tmp_path / "s") <= bound and descriptors_of(tmp_path / "s") <= descriptors
