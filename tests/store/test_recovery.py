"""Recovery: torn tails and corrupt records are cut (never turned into messages), stale bytes never come back,
lost ConsumeQueue units and index entries are rebuilt, and the checkpoint picks the replay start."""
from __future__ import annotations

import shutil
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.store import MessageStore
from fastmq.store.recovery import find_recovery_start

from .conftest import small_config


def fill(root, count=30, config=None, **put):
    with MessageStore(root, config or small_config()) as store:
        return [store.put_message("T", i % 2, b"message-%03d" % i, keys=f"k{i}", **put) for i in range(count)]


def commitlog_file(root):
    return root / "commitlog" / "00000000000000000000"


def patch(path, position, data):
    content = bytearray(path.read_bytes())
    content[position:position + len(data)] = data
    path.write_bytes(content)


def all_bodies(store):
    bodies = []
    for queue_id in (0, 1):
        bodies += [m.body for m in store.get_messages("T", queue_id, 0, 1000)]
    return sorted(bodies)


def test_torn_tail_is_cut(tmp_path):
    results = fill(tmp_path)
    end = results[-1].end_offset
    record = commitlog_file(tmp_path).read_bytes()[results[0].commitlog_offset:results[0].end_offset]
    # A record written up to its properties but whose size was never published, then random bytes.
    patch(commitlog_file(tmp_path), end, b"\x00\x00\x00\x00" + record[4:60] + b"\x5a" * 40)
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, small_config()) as store:
        assert store.get_max_phy_offset() == end
        assert len(all_bodies(store)) == 30
        result = store.put_message("T", 0, b"after")
        assert result.commitlog_offset == end
    assert not any(commitlog_file(tmp_path).read_bytes()[result.end_offset:])


def test_torn_record_with_size_but_bad_body_is_cut(tmp_path):
    results = fill(tmp_path)
    end = results[-1].end_offset
    record = bytearray(commitlog_file(tmp_path).read_bytes()[results[0].commitlog_offset:results[0].end_offset])
    struct.pack_into(">q", record, 28, end)          # a correct PHYSICALOFFSET...
    record[-20:] = b"\x00" * 20                      # ...but the tail never reached the page
    patch(commitlog_file(tmp_path), end, record)
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, small_config()) as store:
        assert store.get_max_phy_offset() == end and len(all_bodies(store)) == 30


def test_corrupt_record_cuts_everything_after_it(tmp_path):
    results = fill(tmp_path)
    victim = results[12]
    patch(commitlog_file(tmp_path), victim.commitlog_offset + 90, b"X")     # inside the body: CRC fails
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, small_config()) as store:
        assert store.get_max_phy_offset() == victim.commitlog_offset
        assert all_bodies(store) == [b"message-%03d" % i for i in range(12)]
        assert store.get_max_offset("T", 0) == 6 and store.get_max_offset("T", 1) == 6
        assert store.query_message("T", "k20") == []


def test_stale_bytes_past_a_cut_never_come_back(tmp_path):
    results = fill(tmp_path, count=10)
    victim = results[5]
    patch(commitlog_file(tmp_path), victim.commitlog_offset + 90, b"X")
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, small_config()) as store:
        # A record of exactly the victim's size lands where the victim was; records 6..9 were behind it.
        replacement = store.put_message("T", 1, b"replaced-05", keys="k5")
        assert (replacement.commitlog_offset, replacement.size) == (victim.commitlog_offset, victim.size)
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, small_config()) as store:
        assert all_bodies(store) == sorted([b"message-%03d" % i for i in range(5)] + [b"replaced-05"])


def test_lost_consume_queues_are_rebuilt(tmp_path):
    fill(tmp_path)
    shutil.rmtree(tmp_path / "consumequeue")
    with MessageStore(tmp_path, small_config()) as store:
        assert all_bodies(store) == [b"message-%03d" % i for i in range(30)]
        assert store.put_message("T", 0, b"next").queue_offset == 15


def test_lost_units_after_a_crash_are_rebuilt(tmp_path):
    fill(tmp_path)
    queue_file = tmp_path / "consumequeue" / "T" / "1" / "00000000000000000000"
    patch(queue_file, 5 * 20, b"\x00" * 200)           # units 5.. never reached the disk
    (tmp_path / "abort").touch()
    with MessageStore(tmp_path, small_config()) as store:
        assert [m.body for m in store.get_messages("T", 1, 0, 100)] == [
            b"message-%03d" % i for i in range(1, 30, 2)]


def test_damaged_units_are_rebuilt_even_after_a_clean_shutdown(tmp_path):
    fill(tmp_path)
    queue_file = tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000"
    patch(queue_file, 3 * 20, b"\xff" * 20)
    with MessageStore(tmp_path, small_config()) as store:
        assert [m.queue_offset for m in store.get_messages("T", 0, 0, 100)] == list(range(15))


def test_index_is_rebuilt_after_a_crash(tmp_path):
    fill(tmp_path)
    shutil.rmtree(tmp_path / "index")
    (tmp_path / "abort").touch()
    (tmp_path / "checkpoint").unlink()
    with MessageStore(tmp_path, small_config()) as store:
        assert [m.body for m in store.query_message("T", "k17")] == [b"message-017"]


def test_missing_commitlog_empties_the_queues(tmp_path):
    fill(tmp_path)
    shutil.rmtree(tmp_path / "commitlog")
    with MessageStore(tmp_path, small_config()) as store:
        assert store.get_max_offset("T", 0) == 0 and store.query_message("T", "k3") == []
        assert store.put_message("T", 0, b"fresh").queue_offset == 0


def test_checkpoint_picks_the_replay_start(tmp_path, clock):
    config = small_config(clock=clock, mapped_file_size_commit_log=4096)
    with MessageStore(tmp_path, config) as store:
        for i in range(60):
            clock.advance(1000)
            store.put_message("T", 0, b"x" * 300)
        files = store.commit_log.mapped_file_queue.files
        assert len(files) >= 5
        store.checkpoint.physic_msg_timestamp = clock.millis
        store.checkpoint.logics_msg_timestamp = clock.millis - 30_000
        store.checkpoint.index_msg_timestamp = clock.millis
        start = find_recovery_start(store, last_exit_ok=False)
        margin_point = clock.millis - 30_000 - 3_000
        first_stamps = [store.commit_log.pick_store_timestamp(f.file_from_offset) for f in files]
        expected = max(i for i, stamp in enumerate(first_stamps) if stamp <= margin_point)
        assert start is files[expected]
        assert find_recovery_start(store, last_exit_ok=True) is files[-3]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=64), position=st.integers(0, 60_000), crash=st.booleans())
def test_damaged_commitlog_never_yields_garbage(tmp_path_factory, data, position, crash):
    root = tmp_path_factory.mktemp("damaged")
    results = fill(root, count=40)
    written = {b"message-%03d" % i for i in range(40)}
    size = commitlog_file(root).stat().st_size
    patch(commitlog_file(root), min(position, results[-1].end_offset + 100), data)
    content = commitlog_file(root).read_bytes()[:size]
    commitlog_file(root).write_bytes(content)
    if crash:
        (root / "abort").touch()
    with MessageStore(root, small_config()) as store:
        bodies = all_bodies(store)
        assert set(bodies) <= written and len(bodies) == len(set(bodies))
        store.put_message("T", 0, b"after")
        assert store.get_messages("T", 0, store.get_max_offset("T", 0) - 1).messages[0].body == b"after"


def test_deleted_topic_stays_deleted_after_a_crash_replay(tmp_path):
    with MessageStore(tmp_path, small_config()) as store:
        for i in range(5):
            store.put_message("T", 0, b"old-%d" % i)
            store.put_message("V", 0, b"gone-%d" % i)
        store.put_message("U", 0, b"other")
        store.delete_topic("T")
        store.delete_topic("V")
        assert store.find_consume_queue("T", 0) is None and store.get_max_offset("T", 0) == 0
        assert not (tmp_path / "consumequeue" / "T").exists()
        assert store.put_message("T", 0, b"new").queue_offset == 0
    (tmp_path / "abort").touch()           # the next opening replays the CommitLog as after a crash
    with MessageStore(tmp_path, small_config()) as store:
        assert [m.body for m in store.get_messages("T", 0, 0)] == [b"new"]
        assert store.find_consume_queue("V", 0) is None
        assert [m.body for m in store.get_messages("U", 0, 0)] == [b"other"]
