"""Transactional messages (Java's TransactionMQProducer): a half message, a local transaction, then its outcome.

send_in_transaction() sends the message as a half message (properties TRAN_MSG=true and PGROUP=<group>, sysFlag
PREPARED): the broker stores it aside (RMQ_SYS_TRANS_HALF_TOPIC), invisible to consumers. The listener's
execute_local() runs the local transaction and its answer goes to the broker as END_TRANSACTION (37, oneway):
producerGroup, tranStateTableOffset (the half message's queue offset), commitLogOffset (from its offset msgId),
commitOrRollback (COMMIT 8 delivers the message to its topic, ROLLBACK 12 drops it, 0 leaves it undecided),
fromTransactionCheck, msgId and transactionId (the client's UNIQ_KEY).

A half message still undecided after the broker's transaction timeout is checked back: the broker sends
CHECK_TRANSACTION_STATE (39) with the half message to a producer of its group, whose listener's check_local()
answers, again as END_TRANSACTION (fromTransactionCheck true). Checks run on their own thread pool, never on the
I/O thread.
"""
from __future__ import annotations

import enum
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from fastmq.rocketmq._native.messages import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageExt
from fastmq.rocketmq.errors import RocketMQError
from fastmq.rocketmq.message import Message, SendResult, SendStatus
from fastmq.rocketmq.producer import Producer
from fastmq.rocketmq.protocol import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    RequestCode,
    TransactionType,
)

_log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = TransactionType.COMMIT
    ROLLBACK_MESSAGE = TransactionType.ROLLBACK
    UNKNOW = TransactionType.NOT_TYPE       # Java's spelling: the broker asks again later


class TransactionListener(Protocol):
    def execute_local(self, message: Message, arg: Any) -> LocalTransactionState: ...

    def check_local(self, message: MessageExt) -> LocalTransactionState: ...


@dataclass(frozen=True)
class TransactionSendResult:
    send_result: SendResult
    local_state: LocalTransactionState


def commit_log_offset(offset_msg_id: str) -> int:
    """The CommitLog offset inside an offset msgId (store address 8 bytes, then the offset; IPv6: 20 bytes)."""
    if len(offset_msg_id) not in (32, 56):
        raise RocketMQError(f"not an offset msgId: {offset_msg_id!r}")
    return int(offset_msg_id[-16:], 16)


class TransactionProducer(Producer):
    """A Producer whose listener decides the fate of the half messages it sends (and answers the broker's
    checks of those still undecided)."""

    def __init__(self, group: str, namesrv_addr: str | list[str] | None = None, *, listener: TransactionListener,
                 check_threads: int = 1, **options: Any) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.listener = listener
        self._checks = ThreadPoolExecutor(check_threads, thread_name_prefix=f"fastmq-rocketmq-check-{group}")

    def send_in_transaction(self, message: Message, arg: Any = None) -> TransactionSendResult:
        """Send a half message, run the local transaction, and tell the broker its outcome."""
        if message.delay_level:
            raise ValueError("a transactional message cannot have a delay level")
        half = Message(message.topic, message.body, tags=message.tags, keys=message.keys, flag=message.flag,
                       properties={**(message.properties or {}), PROPERTY_TRANSACTION_PREPARED: "true",
                                   PROPERTY_PRODUCER_GROUP: self.group})
        result = self.send(half)
        state = LocalTransactionState.UNKNOW
        remark = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = LocalTransactionState(self.listener.execute_local(message, arg) or state)
            except Exception as exc:     # undecided: the broker's check-back asks check_local() later
                _log.exception("the local transaction of %s failed", result.msg_id)
                remark = f"executeLocalTransactionBranch exception: {exc!r}"
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        self._end(self.instance.master_address(result.message_queue.broker_name, message.topic), {
            "topic": message.topic, "brokerName": result.message_queue.broker_name,
            "tranStateTableOffset": result.queue_offset,
            "commitLogOffset": commit_log_offset(result.offset_msg_id.split(",")[0]),
            "msgId": result.msg_id, "transactionId": result.transaction_id or result.msg_id}, state, False, remark)
        return TransactionSendResult(result, state)

    def check_transaction(self, broker_address: str, fields: dict[str, str], message: MessageExt) -> None:
        """The broker asks about a half message (CHECK_TRANSACTION_STATE): answer from another thread."""
        if not self._closed:
            self._checks.submit(self._check, broker_address, fields, message)

    def _check(self, broker_address: str, fields: dict[str, str], message: MessageExt) -> None:
        remark = None
        try:
            state = LocalTransactionState(self.listener.check_local(message) or LocalTransactionState.UNKNOW)
        except Exception as exc:
            _log.exception("checking the local transaction of %s failed", message.msg_id)
            state, remark = LocalTransactionState.UNKNOW, f"checkLocalTransactionState Exception: {exc!r}"
        self._end(broker_address, {
            "topic": message.real_topic, "tranStateTableOffset": fields.get("tranStateTableOffset", "0"),
            "commitLogOffset": fields.get("commitLogOffset", "0"),
            "msgId": message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or message.msg_id,
            "transactionId": fields.get("transactionId") or message.msg_id}, state, True, remark)

    def _end(self, address: str, fields: dict[str, Any], state: LocalTransactionState, from_check: bool,
             remark: str | None) -> None:
        fields.update(producerGroup=self.group, commitOrRollback=state.value, fromTransactionCheck=from_check)
        frame, opaque = self.remoting.encode(RequestCode.END_TRANSACTION, fields, oneway=True, remark=remark)
        self.remoting.invoke_frame(address, frame, opaque, None, oneway=True)

    def close(self) -> None:
        self._checks.shutdown(wait=True, cancel_futures=True)
        super().close()
