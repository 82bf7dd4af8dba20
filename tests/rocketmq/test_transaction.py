"""fastmq/rocketmq/transaction.py against Apache RocketMQ (check-back after one second in the test kit): a half
message is invisible until committed, a rolled-back one never arrives, and an undecided one is checked back with
the producer, whose check decides it. tests/broker/rocketmq/test_transactions.py runs the same tests against the
embedded broker, with a `server` fixture of its own."""
from __future__ import annotations

import threading

import pytest

from fastmq.rocketmq import LocalTransactionState, Message, PullConsumer, TransactionProducer
from tests.support.rocketmq import unique
from tests.support.waiting import wait_for


class Ledger:
    """The local transactions: execute_local answers by the body, check_local from what was decided since."""

    def __init__(self) -> None:
        self.decided: dict[bytes, LocalTransactionState] = {}
        self.checked: list[bytes] = []
        self.lock = threading.Lock()

    def execute_local(self, message, arg):
        return {b"commit": LocalTransactionState.COMMIT_MESSAGE,
                b"rollback": LocalTransactionState.ROLLBACK_MESSAGE}.get(message.body, LocalTransactionState.UNKNOW)

    def check_local(self, message):
        with self.lock:
            self.checked.append(message.body)
            return self.decided.get(message.body, LocalTransactionState.UNKNOW)


def read_all(namesrv: str, topic: str, want: int, timeout: float) -> list:
    with PullConsumer(unique("tx-reader"), namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET") as reader:
        reader.subscribe(topic)
        messages: list = []
        wait_for(lambda: messages.extend(reader.poll(0.2)) or len(messages) >= want, timeout=timeout,
                 message=lambda: f"read {[m.body for m in messages]}")
        messages.extend(reader.poll(0.5))        # anything beyond what was wanted
        return messages


@pytest.fixture
def server(rocketmq_server):
    return rocketmq_server


@pytest.fixture
def transactions(server):
    ledger = Ledger()
    with TransactionProducer(unique("tx-producer"), server.namesrv_addr, listener=ledger,
                             send_timeout=10.0) as producer:
        yield producer, ledger


def test_commit_delivers_and_rollback_drops(server, transactions):
    producer, _ledger = transactions
    topic = unique("tx")
    producer.send(Message(topic, b"plain"))          # creates the topic
    committed = producer.send_in_transaction(Message(topic, b"commit", tags="T", keys="k1"))
    rolled_back = producer.send_in_transaction(Message(topic, b"rollback"))
    assert committed.local_state is LocalTransactionState.COMMIT_MESSAGE
    assert rolled_back.local_state is LocalTransactionState.ROLLBACK_MESSAGE
    messages = read_all(server.namesrv_addr, topic, 2, timeout=20)
    assert sorted(m.body for m in messages) == [b"commit", b"plain"]
    delivered = next(m for m in messages if m.body == b"commit")
    assert delivered.msg_id == committed.send_result.msg_id and delivered.tags == "T" and delivered.keys == "k1"


def test_undecided_transaction_is_checked_back(server, transactions):
    producer, ledger = transactions
    topic = unique("tx-check")
    producer.send(Message(topic, b"plain"))
    result = producer.send_in_transaction(Message(topic, b"undecided"))
    assert result.local_state is LocalTransactionState.UNKNOW
    wait_for(lambda: b"undecided" in ledger.checked, timeout=30, message="the broker never checked back")
    assert [m.body for m in read_all(server.namesrv_addr, topic, 1, timeout=10)] == [b"plain"]
    with ledger.lock:
        ledger.decided[b"undecided"] = LocalTransactionState.COMMIT_MESSAGE      # the next check commits it
    messages = read_all(server.namesrv_addr, topic, 2, timeout=30)
    assert sorted(m.body for m in messages) == [b"plain", b"undecided"]
