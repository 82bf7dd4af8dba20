"""Transactions on the embedded broker (fastmq/broker/rocketmq/transactions.py): the tests of
tests/rocketmq/test_transaction.py (run there against Apache RocketMQ) with a broker that checks back after 0.2 s,
and END_TRANSACTION's refusals and the op records that survive a restart."""
from __future__ import annotations

import types

import pytest

from fastmq.rocketmq import Message, TransactionProducer
from fastmq.rocketmq.transaction import commit_log_offset
from tests.rocketmq.test_transaction import Ledger, read_all, transactions  # noqa: F401 (a fixture)
from tests.rocketmq.test_transaction import test_commit_delivers_and_rollback_drops  # noqa: F401
from tests.rocketmq.test_transaction import test_undecided_transaction_is_checked_back  # noqa: F401
from tests.support.waiting import wait_for

from .conftest import FAST_DELAY_LEVELS, Remoting, broker_address, rocketmq_broker

END_TRANSACTION, SYSTEM_ERROR, INVALID_PARAMETER = 37, 1, 29
QUICK_CHECKS = {"message_delay_level": FAST_DELAY_LEVELS, "transaction_timeout_ms": 200,
                "transaction_check_interval_ms": 200}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    with rocketmq_broker(tmp_path_factory.mktemp("tx") / "data",
                         front_end_options={"rocketmq": QUICK_CHECKS}) as broker:
        yield broker


@pytest.fixture
def server(embedded):
    return types.SimpleNamespace(namesrv_addr=embedded.address("namesrv"))


def test_end_transaction_refuses_what_is_not_its_half_message(embedded):
    ledger = Ledger()
    with TransactionProducer("tx-refusals", embedded.address("namesrv"), listener=ledger) as producer:
        plain = producer.send(Message("tx-refusals", b"plain"))
        half = producer.send_in_transaction(Message("tx-refusals", b"undecided")).send_result
    client = Remoting(broker_address(embedded))
    try:
        base = {"producerGroup": "tx-refusals", "commitOrRollback": 8, "msgId": half.msg_id,
                "tranStateTableOffset": half.queue_offset,
                "commitLogOffset": commit_log_offset(half.offset_msg_id)}
        for change, code in [({"producerGroup": "someone-else"}, SYSTEM_ERROR),
                             ({"tranStateTableOffset": half.queue_offset + 1}, SYSTEM_ERROR),
                             ({"commitLogOffset": commit_log_offset(plain.offset_msg_id)}, SYSTEM_ERROR),
                             ({"commitOrRollback": 5}, INVALID_PARAMETER)]:
            assert client.call(END_TRANSACTION, {**base, **change}).code == code, change
        assert client.call(END_TRANSACTION, base).code == 0
        assert client.call(END_TRANSACTION, base).code == 0      # deciding twice delivers once
    finally:
        client.close()
    assert sorted(m.body for m in read_all(embedded.address("namesrv"), "tx-refusals", 2, 10)) == [b"plain",
                                                                                                 b"undecided"]


def test_decisions_survive_a_restart(tmp_path):
    ledger = Ledger()
    with rocketmq_broker(tmp_path / "data", front_end_options={"rocketmq": QUICK_CHECKS}) as first:
        with TransactionProducer("tx-restart", first.address("namesrv"), listener=ledger) as producer:
            producer.send(Message("tx-restart", b"plain"))
            producer.send_in_transaction(Message("tx-restart", b"commit"))
            producer.send_in_transaction(Message("tx-restart", b"rollback"))
        assert sorted(m.body for m in read_all(first.address("namesrv"), "tx-restart", 2, 10)) == [b"commit",
                                                                                                  b"plain"]
    with rocketmq_broker(tmp_path / "data", front_end_options={"rocketmq": QUICK_CHECKS}) as second:
        with TransactionProducer("tx-restart", second.address("namesrv"), listener=ledger) as producer:
            producer.send(Message("tx-restart", b"after"))
            # the op records tell the restarted broker both were decided: a connected producer of the group is
            # not asked about them, and the committed one is not delivered again
            assert sorted(m.body for m in read_all(second.address("namesrv"), "tx-restart", 3, 10)) == [
                b"after", b"commit", b"plain"]
            wait_for(lambda: second.broker.front_end("rocketmq").transactions.check_from == 2, timeout=5,
                     message="the check-back did not walk past the decided half messages")
        assert ledger.checked == []
