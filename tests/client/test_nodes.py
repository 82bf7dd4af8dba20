"""fastmq.client.nodes: broker health (bad-node blocking) and the nodes asked for metadata."""
from __future__ import annotations


import pytest

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.client import NodeHealth, metadata_candidates
from fastmq.client.nodes import is_failing
import socket

from fastmq.io import ConnectionPool, IOLoop, ProtocolAdapter
from tests.support.waiting import wait_for


def test_node_health_penalty_and_recovery():
    health = NodeHealth(threshold=3, penalty=10.0)
    assert not health.failed(7, 0.0) and not health.failed(7, 0.1)
    assert health.failed(7, 0.2)                      # third failure in a row: avoided
    assert not health.failed(7, 0.3)                  # already avoided: not announced again
    assert health.avoided(1.0) == {7}
    health.succeeded(8)
    assert health.avoided(10.3) == set()              # the penalty expired
    assert not health.failed(7, 11.0)                 # and the count started over


def test_success_resets_the_count():
    health = NodeHealth(threshold=2, penalty=5.0)
    health.failed(1, 0.0)
    health.succeeded(1)
    assert not health.failed(1, 0.1)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        NodeHealth(threshold=0)


class LengthPrefixedAdapter(ProtocolAdapter):
    """Enough of a protocol to open connections (these tests send nothing)."""

    def make_splitter(self) -> KafkaFrameSplitter:
        return KafkaFrameSplitter()


@pytest.fixture
def pool():
    loop = IOLoop(name="test-nodes")
    loop.start()
    made = ConnectionPool(loop, LengthPrefixedAdapter, reconnect_backoff_ms=60000, reconnect_backoff_max_ms=60000)
    yield made
    loop.run_in_loop(made.close)
    loop.close(5)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_bootstrap_servers_join_once_every_broker_fails(pool):
    dead = _closed_port()
    for node_id in (1, 2, "bootstrap-0"):
        pool.loop.run_in_loop(pool.add_node, node_id, "127.0.0.1", dead)

    def candidates(brokers):
        return pool.loop.run_in_loop(metadata_candidates, pool, brokers, ["bootstrap-0"])

    assert candidates([]) == ["bootstrap-0"]                   # nothing known yet
    assert candidates([1, 2]) == [1, 2]                       # never tried: not failing
    pool.loop.run_in_loop(pool.maybe_connect, 1)
    assert wait_for(lambda: pool.loop.run_in_loop(is_failing, pool, 1), 5)
    assert candidates([1, 2]) == [1, 2]                       # broker 2 may still answer
    assert candidates([1]) == [1, "bootstrap-0"]              # every broker fails: bootstrap too
