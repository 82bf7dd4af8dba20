"""Replication (seed 003 1.6) over loopback: the slave's CommitLog stays byte-identical to the master's, late
slaves start at the master's newest file, SYNC_MASTER waits for the slave, and the stream parser survives
anything (fuzz)."""
from __future__ import annotations

import functools
import socket
import struct
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.store import BrokerRole, PutMessageStatus, ReadOnlyStoreError
from fastmq.store.errors import HAProtocolError
from fastmq.store.ha import HAStreamParser, SlaveReportParser
from tests.support import waiting


DEADLINE_SECONDS = 15
# Replication on this loaded machine can take longer than the default wait.
wait_for = functools.partial(waiting.wait_for, timeout=DEADLINE_SECONDS)


def directory_bytes(path) -> dict:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def master(open_store, tmp_path):
    return open_store(tmp_path / "master", ha_listen_port=0, mapped_file_size_commit_log=8192)


def open_slave(open_store, tmp_path, master, name="slave", **overrides):
    """A slave of `master`, returned once the master has decided where its transfer starts."""
    slave = open_store(tmp_path / name, broker_role=BrokerRole.SLAVE, ha_master_address=master.ha_service.address,
                       mapped_file_size_commit_log=8192, ha_send_heartbeat_interval_ms=100, **overrides)
    assert wait_for(lambda: any(c.next_transfer_from >= 0 for c in master.ha_service.connections))
    return slave


def test_slave_is_byte_identical(open_store, tmp_path, master):
    slave = open_slave(open_store, tmp_path, master)
    for i in range(300):
        master.put_message("T", i % 3, b"message %d" % i, tags="TagA", keys=f"k{i}")
    assert wait_for(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
    assert len(master.commit_log.mapped_file_queue.files) > 3
    assert directory_bytes(slave.root / "commitlog") == directory_bytes(master.root / "commitlog")
    assert wait_for(lambda: slave.get_max_offset("T", 2) == 100)
    assert directory_bytes(slave.root / "consumequeue") == directory_bytes(master.root / "consumequeue")
    assert [m.body for m in slave.get_messages("T", 1, 0, 5)] == [b"message %d" % i for i in (1, 4, 7, 10, 13)]
    assert [m.body for m in slave.query_message("T", "k42")] == [b"message 42"]
    assert wait_for(lambda: master.ha_service.push_to_slave_max_offset == master.get_max_phy_offset())
    with pytest.raises(ReadOnlyStoreError):
        slave.put_message("T", 0, b"x")


def test_late_slave_starts_at_the_newest_file(open_store, tmp_path, master):
    for i in range(400):
        master.put_message("T", 0, b"message %d" % i)
    last_file = master.commit_log.mapped_file_queue.files[-1].file_from_offset
    assert last_file > 0
    slave = open_slave(open_store, tmp_path, master)
    # The slave's CommitLog ends where the master's does before the messages it got are dispatched to their
    # ConsumeQueue (as in RocketMQ, where dispatching follows the CommitLog): wait for both.
    assert wait_for(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
    assert wait_for(lambda: slave.get_max_offset("T", 0) == 400)
    assert slave.get_min_phy_offset() == last_file
    name = f"{last_file:020d}"
    assert (slave.root / "commitlog" / name).read_bytes() == (master.root / "commitlog" / name).read_bytes()
    low = slave.get_min_offset("T", 0)
    assert low > 0
    assert [m.queue_offset for m in slave.get_messages("T", 0, low, 3)] == [low, low + 1, low + 2]


def test_restarted_slave_continues_where_it_stopped(open_store, tmp_path, master):
    slave = open_slave(open_store, tmp_path, master)
    master.put_message("T", 0, b"one")
    assert wait_for(lambda: slave.get_max_offset("T", 0) == 1)
    slave.close()
    assert wait_for(lambda: not master.ha_service.connections)
    for i in range(100):
        master.put_message("T", 0, b"more %d" % i)
    slave = open_slave(open_store, tmp_path, master)
    assert wait_for(lambda: slave.get_max_offset("T", 0) == 101)
    assert slave.get_min_phy_offset() == 0
    assert directory_bytes(slave.root / "commitlog") == directory_bytes(master.root / "commitlog")


def test_sync_master_waits_for_the_slave(open_store, tmp_path):
    master = open_store(tmp_path / "master", ha_listen_port=0, broker_role=BrokerRole.SYNC_MASTER,
                        sync_flush_timeout_ms=2_000)
    assert master.put_message("T", 0, b"alone").status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    slave = open_slave(open_store, tmp_path, master)
    assert wait_for(lambda: master.ha_service.connections)
    result = master.put_message("T", 0, b"replicated")
    assert result.status is PutMessageStatus.PUT_OK
    assert slave.get_max_phy_offset() >= result.end_offset


def test_slave_drops_a_master_that_skips_offsets(open_store, tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(DEADLINE_SECONDS)
    reports = []

    def fake_master():
        connection, _ = server.accept()
        with connection:
            connection.settimeout(DEADLINE_SECONDS)
            reports.append(struct.unpack(">q", connection.recv(8))[0])
            connection.sendall(struct.pack(">qi", 0, 3) + b"abc")     # not a boundary-aligned start...
            connection.sendall(struct.pack(">qi", 4096, 0))           # ...fine; then a gap
            connection.recv(8)

    thread = threading.Thread(target=fake_master)
    thread.start()
    slave = open_store(tmp_path / "slave", broker_role=BrokerRole.SLAVE,
                       ha_master_address=server.getsockname()[:2], mapped_file_size_commit_log=8192)
    thread.join(DEADLINE_SECONDS)
    server.close()
    assert reports == [0]
    assert wait_for(lambda: not slave.ha_client.connected.is_set())
    assert slave.get_max_phy_offset() == 3   # what it got at the right offset; nothing after the gap


frames = st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=300)), max_size=8)


@given(frames=frames, cuts=st.lists(st.integers(1, 64), max_size=30))
def test_stream_parser_reassembles_any_chunking(frames, cuts):
    stream = b"".join(struct.pack(">qi", offset, len(body)) + body for offset, body in frames)
    parser = HAStreamParser(1024)
    parsed = []
    position = 0
    for cut in cuts + [len(stream)]:
        parsed += parser.feed(stream[position:position + cut])
        position += cut
    assert parsed == frames


@given(data=st.binary(max_size=200))
def test_stream_parser_on_garbage(data):
    parser = HAStreamParser(64)
    try:
        for offset, body in parser.feed(data):
            assert offset >= 0 and len(body) <= 64
    except HAProtocolError:
        pass


def test_forged_size_is_refused_before_buffering():
    parser = HAStreamParser(1024)
    with pytest.raises(HAProtocolError):
        parser.feed(struct.pack(">qi", 0, 1 << 30))
    with pytest.raises(HAProtocolError):
        HAStreamParser(1024).feed(struct.pack(">qi", -1, 0))


@given(data=st.binary(max_size=100))
def test_report_parser(data):
    parser = SlaveReportParser()
    try:
        value = parser.feed(data)
    except HAProtocolError:
        return
    if len(data) >= 8:
        assert value == struct.unpack_from(">q", data, len(data) - len(data) % 8 - 8)[0]
    else:
        assert value is None
