"""The RocketMQ client tests run against the session's Apache RocketMQ (`rocketmq_server`, tests/conftest.py)."""
from __future__ import annotations

import pytest

from fastmq.rocketmq import Producer


@pytest.fixture(scope="session")
def producer(rocketmq_server):
    """One Producer for the session's tests (topics are created by their first message)."""
    with Producer("fastmq-test-producer", rocketmq_server.namesrv_addr, send_timeout=10.0) as p:
        yield p
