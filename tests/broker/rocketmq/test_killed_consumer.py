"""A consumer killed mid-batch (tests/rocketmq/test_killed_consumer.py, written against Apache RocketMQ) against
the embedded namesrv + broker."""
from __future__ import annotations

import types

import pytest

from tests.rocketmq.test_killed_consumer import (  # noqa: F401
    test_killed_consumer_queues_move_and_only_uncommitted_messages_come_again,
)


@pytest.fixture(scope="module")
def rocketmq_server(rmq):
    return types.SimpleNamespace(namesrv_addr=rmq.address("namesrv"), broker_addr=rmq.address("rocketmq"))
