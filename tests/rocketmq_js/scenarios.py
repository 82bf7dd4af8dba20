"""The ali-ons tests, written once: tests/broker/rocketmq/test_js_client.py (the embedded namesrv + broker) and
tests/rocketmq/test_js_client.py (Apache RocketMQ) import them with a `js_run` fixture of their own, so that a
difference between the two servers shows as one test failing on one side.

The scenarios: sync sends with tags and keys to topics made with UPDATE_AND_CREATE_TOPIC (ali-ons, unlike the
Java client, does not fall back to the TBW102 template when the namesrv has no route), a push consumer with a tag
filter and long-polling pulls, and a consumer whose failures go back through CONSUMER_SEND_MSG_BACK and return
from %RETRY%group."""
from __future__ import annotations

import uuid

from tests import rocketmq_js
from tests.support.rocketmq import create_topics


def run_against(broker: str, namesrv: str) -> tuple[dict[str, dict[str, str]], str]:
    name = f"ali{uuid.uuid4().hex[:8]}"
    create_topics(broker, namesrv, f"{name}-plain", f"{name}-retry")
    return rocketmq_js.run(namesrv, name)


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
