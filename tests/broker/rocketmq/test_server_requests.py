"""The embedded broker relays an administrator's GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY to the
client over its connection, and turns an offset reset into RESET_CONSUMER_CLIENT_OFFSET to the group's consumers
(fastmq/broker/rocketmq/admin.py): the tests of tests/rocketmq/test_server_requests.py,
which run them against Apache RocketMQ, here against the embedded namesrv + broker."""
from __future__ import annotations

import types

import pytest

from fastmq.rocketmq import Producer
from tests.rocketmq.test_server_requests import consumer_and_seen  # noqa: F401 (a fixture)
from tests.rocketmq.test_server_requests import test_consume_message_directly_through_the_broker  # noqa: F401
from tests.rocketmq.test_server_requests import test_offset_reset_of_a_group_without_offsets  # noqa: F401
from tests.rocketmq.test_server_requests import test_offset_reset_through_the_broker  # noqa: F401
from tests.rocketmq.test_server_requests import test_running_info_counts_failed_messages  # noqa: F401
from tests.rocketmq.test_server_requests import test_running_info_of_a_client_not_connected  # noqa: F401
from tests.rocketmq.test_server_requests import test_running_info_through_the_broker  # noqa: F401
from tests.support.rocketmq import call

from .conftest import broker_address

CONSUME_MESSAGE_DIRECTLY, SYSTEM_ERROR, INVALID_PARAMETER = 309, 1, 29


@pytest.fixture(scope="module")
def server(rmq):
    return types.SimpleNamespace(namesrv_addr=rmq.address("namesrv"), broker_addr=rmq.address("rocketmq"))


@pytest.fixture(scope="module")
def sender(server):
    with Producer("server-requests-producer", server.namesrv_addr) as producer:
        yield producer


@pytest.mark.parametrize(("msg_id", "code"), [("not-hex", INVALID_PARAMETER), ("7F000001" + "00000000" + "00007FFFFFFFFFFF", SYSTEM_ERROR)])
def test_consume_directly_a_message_that_is_not_here(rmq, consumer_and_seen, msg_id, code):  # noqa: F811
    _topic, consumer, _seen = consumer_and_seen
    address = "%s:%d" % broker_address(rmq)
    answer = call(address, CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": consumer.group, "msgId": msg_id,
                                                      "clientId": consumer.instance.client_id})
    assert answer.code == code
