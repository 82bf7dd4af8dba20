"""fastmq.rocketmq's client against the embedded namesrv + broker: the client's own tests, written against Apache
RocketMQ (tests/rocketmq/test_producer.py, test_consumer.py, test_push_consumer.py, test_compat.py), run unchanged here with `rocketmq_server` standing for our broker, so
that both servers are held to the same expectations."""
from __future__ import annotations

import dataclasses

import pytest

from fastmq.rocketmq import Producer
from tests.rocketmq import test_compat as compat_tests
from tests.rocketmq import test_consumer as consumer_tests
from tests.rocketmq import test_producer as producer_tests
from tests.rocketmq import test_push_consumer as push_tests

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


@pytest.fixture(scope="module")
def producer(rocketmq_server):
    with Producer("fastmq-test-producer", rocketmq_server.namesrv_addr, send_timeout=10.0) as p:
        yield p


test_sync_send_keeps_tags_keys_properties_and_body = producer_tests.test_sync_send_keeps_tags_keys_properties_and_body
test_async_oneway_and_batch_sends_all_arrive = producer_tests.test_async_oneway_and_batch_sends_all_arrive
test_orderly_sends_keep_a_key_on_one_queue = producer_tests.test_orderly_sends_keep_a_key_on_one_queue
test_a_delayed_message_arrives_with_its_level = producer_tests.test_a_delayed_message_arrives_with_its_level
test_sends_that_cannot_go_anywhere_fail_clearly = producer_tests.test_sends_that_cannot_go_anywhere_fail_clearly
filled_topic = consumer_tests.filled_topic
test_tag_expressions_filter = consumer_tests.test_tag_expressions_filter
test_commit_seek_and_resume_where_the_group_left = consumer_tests.test_commit_seek_and_resume_where_the_group_left
test_assigned_queues_and_consume_from_last = consumer_tests.test_assigned_queues_and_consume_from_last
test_two_consumers_of_a_group_share_the_queues = consumer_tests.test_two_consumers_of_a_group_share_the_queues
test_broadcasting_consumers_each_get_everything_and_keep_offsets_in_a_file = consumer_tests.test_broadcasting_consumers_each_get_everything_and_keep_offsets_in_a_file
test_consume_from_a_timestamp = consumer_tests.test_consume_from_a_timestamp
test_a_closed_consumer_leaves_its_group = consumer_tests.test_a_closed_consumer_leaves_its_group
test_failed_messages_are_retried_then_dead_lettered = push_tests.test_failed_messages_are_retried_then_dead_lettered
test_orderly_consumption_keeps_each_queues_order = push_tests.test_orderly_consumption_keeps_each_queues_order
test_queues_of_a_member_that_leaves_move_to_the_others = push_tests.test_queues_of_a_member_that_leaves_move_to_the_others
test_the_readme_producer_and_pull_consumer = compat_tests.test_the_readme_producer_and_pull_consumer
test_the_readme_push_consumer_retries_what_the_callback_raises_on = \
    compat_tests.test_the_readme_push_consumer_retries_what_the_callback_raises_on
