"""The session's Apache RocketMQ (tests/support/rocketmq.py): one namesrv and one broker for every client test."""
from __future__ import annotations

import pytest

from fastmq.rocketmq import Producer
from tests.support.rocketmq import RocketMQCluster
from tests.support.servers import SERVER_LOGS


@pytest.fixture(scope="session")
def rocketmq_server(tmp_path_factory):
    """Apache RocketMQ 5.x on 127.0.0.1: .namesrv_addr, .broker_addr, .broker_name."""
    with RocketMQCluster(tmp_path_factory.mktemp("apache-rocketmq")) as cluster:
        SERVER_LOGS["rocketmq_server"] = cluster.log_tails
        try:
            yield cluster
        finally:
            del SERVER_LOGS["rocketmq_server"]


@pytest.fixture(scope="session")
def producer(rocketmq_server):
    """One Producer for the session's tests (topics are created by their first message)."""
    with Producer("fastmq-test-producer", rocketmq_server.namesrv_addr, send_timeout=10.0) as p:
        yield p
