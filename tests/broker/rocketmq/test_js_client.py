"""npm ali-ons 3.12.0, a pure JavaScript RocketMQ client, against the embedded namesrv + broker (the scenarios and
their checks: tests/rocketmq_js/scenarios.py; the same run against Apache RocketMQ: tests/rocketmq)."""
from __future__ import annotations

import pytest

from tests.rocketmq_js.scenarios import run_against
from tests.rocketmq_js.scenarios import test_failed_message_is_retried_through_the_broker  # noqa: F401
from tests.rocketmq_js.scenarios import test_produce_and_consume_by_tag  # noqa: F401

from .conftest import rocketmq_broker


@pytest.fixture(scope="module")
def js_run(tmp_path_factory):
    with rocketmq_broker(tmp_path_factory.mktemp("js") / "data") as embedded:
        yield run_against(embedded.address("rocketmq"), embedded.address("namesrv"))
