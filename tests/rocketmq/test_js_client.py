"""npm ali-ons 3.12.0 against Apache RocketMQ: the scenarios of tests/rocketmq_js/scenarios.py, as they run against
the embedded broker in tests/broker/rocketmq (so that both servers are held to the same checks)."""
from __future__ import annotations

import pytest

from tests.rocketmq_js.scenarios import run_against
from tests.rocketmq_js.scenarios import test_failed_message_is_retried_through_the_broker  # noqa: F401
from tests.rocketmq_js.scenarios import test_produce_and_consume_by_tag  # noqa: F401


@pytest.fixture(scope="module")
def js_run(rocketmq_server):
    return run_against(rocketmq_server.broker_addr, rocketmq_server.namesrv_addr)
