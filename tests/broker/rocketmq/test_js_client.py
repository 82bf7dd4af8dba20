"""npm ali-ons 3.12.0, a pure JavaScript RocketMQ client, against the embedded namesrv + broker and against Apache
RocketMQ (the same scenarios, so that a difference is ours to explain): sync sends with tags
and keys to a topic made with UPDATE_AND_CREATE_TOPIC (ali-ons, unlike the Java client, does not fall back to the
TBW102 template when the namesrv has no route), a push consumer with a tag filter and long-polling pulls, and a
consumer whose failures go back through CONSUMER_SEND_MSG_BACK and return from %RETRY%group. One node process runs
every scenario (tests/rocketmq_js/peer.js); each test checks one scenario's outcome."""
from __future__ import annotations

import uuid

import pytest

from tests import rocketmq_js
from tests.support.rocketmq import create_topics

from tests.rocketmq.conftest import rocketmq_server  # noqa: F401 (the session's Apache RocketMQ)

from .conftest import rocketmq_broker


def run_against(broker: str, namesrv: str) -> tuple[dict[str, dict[str, str]], str]:
    name = f"ali{uuid.uuid4().hex[:8]}"
    create_topics(broker, namesrv, f"{name}-plain", f"{name}-retry")
    return rocketmq_js.run(namesrv, name)


@pytest.fixture(scope="module", params=["embedded", "apache"])
def js_run(request, tmp_path_factory):
    if request.param == "apache":
        server = request.getfixturevalue("rocketmq_server")
        yield run_against(server.broker_addr, server.namesrv_addr)
        return
    with rocketmq_broker(tmp_path_factory.mktemp("js") / "data") as embedded:
        yield run_against(embedded.address("rocketmq"), embedded.address("namesrv"))


def outcome(js_run, scenario: str) -> dict[str, str]:
    results, output = js_run
    assert scenario in results, f"ali-ons' {scenario} scenario failed:\n{output[-8000:]}"
    return results[scenario]


def test_produce_and_consume_by_tag(js_run):
    result = outcome(js_run, "produce_consume")
    assert result["sent"] == "20" and int(result["queues"]) > 1
    # only TagA (the even bodies) reaches the handler, each once, with its tag and key
    assert result["consumed"] == result["distinct"] == result["tagged"] == "10"
    assert result["first"] == "ali-0"


def test_failed_message_is_retried_through_the_broker(js_run):
    result = outcome(js_run, "retry")
    assert result["bad"] == "bad@0,bad@1,bad@2"
    assert result["deliveries"] == "5" and result["errors"] == "2"
