"""fastmq.rocketmq's client against the embedded namesrv + broker: the client's own tests, written against Apache
RocketMQ (tests/rocketmq/test_producer.py), run unchanged here with `rocketmq_server` standing for our broker, so
that both servers are held to the same expectations."""
from __future__ import annotations

import dataclasses

import pytest

from tests.rocketmq import test_producer as producer_tests

from .conftest import rocketmq_broker


@dataclasses.dataclass(frozen=True)
class EmbeddedRocketMQ:
    """What the client tests use of their server: the namesrv, the broker's address and name."""

    namesrv_addr: str
    broker_addr: str
    broker_name: str = "broker-a"


@pytest.fixture(scope="module")
def rocketmq_server(tmp_path_factory):
    with rocketmq_broker(tmp_path_factory.mktemp("our-client") / "data") as embedded:
        yield EmbeddedRocketMQ(embedded.address("namesrv"), embedded.address("rocketmq"))


producer = producer_tests.producer
test_sync_send_keeps_tags_keys_properties_and_body = producer_tests.test_sync_send_keeps_tags_keys_properties_and_body
test_async_oneway_and_batch_sends_all_arrive = producer_tests.test_async_oneway_and_batch_sends_all_arrive
test_orderly_sends_keep_a_key_on_one_queue = producer_tests.test_orderly_sends_keep_a_key_on_one_queue
test_a_delayed_message_arrives_with_its_level = producer_tests.test_a_delayed_message_arrives_with_its_level
test_sends_that_cannot_go_anywhere_fail_clearly = producer_tests.test_sends_that_cannot_go_anywhere_fail_clearly
