"""Apache RocketMQ's Java client (rocketmq-client 4.9.8) against the embedded namesrv + broker: sync, oneway,
async and batch sends to a topic created on first send, a lite pull consumer, a push consumer whose failures are
retried through the delay levels and then dead-lettered, broadcasting, and orderly consumption with queue locks.
One JVM runs every scenario (tests/rocketmq_java/RocketMQPeer.java); each test checks one scenario's outcome."""
from __future__ import annotations

import uuid

import pytest

from tests import rocketmq_java

from .conftest import rocketmq_broker


@pytest.fixture(scope="module")
def java_run(tmp_path_factory):
    with rocketmq_broker(tmp_path_factory.mktemp("java") / "data") as embedded:
        results, output = rocketmq_java.run(embedded.address("namesrv"),
                                            tmp_path_factory.mktemp(f"run{uuid.uuid4().hex[:8]}"))
        yield embedded, results, output


def outcome(java_run, scenario: str) -> dict[str, str]:
    """The scenario's results, without the time it took (ms)."""
    _embedded, results, output = java_run
    assert scenario in results, f"the Java client's {scenario} scenario failed:\n{output[-8000:]}"
    return {key: value for key, value in results[scenario].items() if key != "ms"}


def test_produce_and_pull(java_run):
    result = outcome(java_run, "produce_pull")
    assert result["sent"] == result["pulled"] == "30"
    assert result["queues"] == "4" and result["tagA"] == "15"
    embedded = java_run[0]
    message = embedded.broker.store.get_message_by_id(result["first_offset_msg_id"])
    assert message is not None and message.body == b"sync-0" and message.topic == result["topic"]


def test_push_retries_then_dead_letters(java_run):
    result = outcome(java_run, "push_retry_dlq")
    assert result["good"] == "5"
    # first delivery + maxReconsumeTimes (2) retries, then %DLQ%: never a fourth delivery
    assert result["bad_deliveries"] == "3" and result["max_reconsume_times"] == "2"
    dead = java_run[0].broker.store.get_messages(f"%DLQ%{result['group']}", 0, 0).messages
    assert [(m.body, m.properties["TAGS"]) for m in dead] == [(b"bad-0", "bad")]


def test_broadcast(java_run):
    assert outcome(java_run, "broadcast") == {"first": "11", "second": "11"}


def test_orderly(java_run):
    assert outcome(java_run, "orderly") == {"consumed": "20", "orders": "4", "in_order": "true"}
