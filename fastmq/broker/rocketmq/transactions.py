"""Transactional messages (RocketMQ's TransactionalMessageService and EndTransactionProcessor).

A SEND whose sysFlag says PREPARED (transaction bits 0x4) is a half message: it is stored in RMQ_SYS_TRANS_HALF_TOPIC
queue 0 with its destination in REAL_TOPIC / REAL_QID and its transaction bits cleared, so no consumer of the
topic sees it. The answer is a send's (msgId: where the half message lies; queueOffset: its offset in the half
queue) with transactionId = its UNIQ_KEY.

END_TRANSACTION 37 (usually oneway; producerGroup, tranStateTableOffset, commitLogOffset, commitOrRollback,
fromTransactionCheck, msgId, transactionId) decides a half message: COMMIT (8) writes it to its destination (without
REAL_TOPIC, REAL_QID and TRAN_MSG), ROLLBACK (12) does not; either way an op record (body: the half message's
queue offset, tag "d") goes to RMQ_SYS_TRANS_OP_HALF_TOPIC, which is how a restarted broker knows what was
decided. NOT_TYPE (0) leaves it undecided. The half message must be one, of that producer group, at that offset.

The check-back runs every transaction_check_interval_ms on the loop: it walks the half queue from the oldest
undecided message; one older than transaction_timeout_ms is asked about with CHECK_TRANSACTION_STATE 39 (oneway,
the half message's record as body) on a connection of a producer of its group (PGROUP), at most
transaction_check_max times, then dropped with a log line. The walk stops at the first message too young to ask
about, and scans at most CHECK_BATCH messages per run.
"""
from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from fastmq.broker.rocketmq.remoting import Request, RequestError
from fastmq.broker.rocketmq.schedule import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from fastmq.broker.rocketmq.system_topics import TRANS_HALF_TOPIC, TRANS_OP_TOPIC
from fastmq.rocketmq.protocol import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    RequestCode,
    ResponseCode,
    TransactionType,
)
from fastmq.store import PutMessageResult, StoredMessage
from fastmq.store.message import PROPERTY_TAGS, PROPERTY_UNIQ_KEY

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd

log = logging.getLogger(__name__)

CHECK_BATCH = 256
OP_TAG_DECIDED = "d"


def is_prepared(sys_flag: int) -> bool:
    return sys_flag & TransactionType.MASK == TransactionType.PREPARED


class Transactions:
    """The half messages of one broker: stored aside, decided, checked back."""

    def __init__(self, front: RocketMQFrontEnd) -> None:
        self.front = front
        self.store = front.broker.store
        self.decided: set[int] = set()     # half-queue offsets with an op record
        self.checks: dict[int, int] = {}   # half-queue offset -> times asked
        self.check_from = 0                # half-queue offsets below this are all decided

    def start(self) -> None:
        """Loop thread: read back which half messages were decided before a restart."""
        offset = self.store.get_min_offset(TRANS_OP_TOPIC, 0)
        while True:
            result = self.store.get_messages(TRANS_OP_TOPIC, 0, offset, CHECK_BATCH)
            for message in result.messages:
                if message.body.isdigit():
                    self.decided.add(int(message.body))
            if not result.messages:
                break
            offset = result.next_begin_offset
        self.check_from = self.store.get_min_offset(TRANS_HALF_TOPIC, 0)

    # -- half messages ----------------------------------------------------------------------------------------

    def prepare(self, topic: str, queue_id: int, body: bytes, properties: dict[str, str], flag: int, born: int,
                host: bytes | None, sys_flag: int, reconsume_times: int) -> PutMessageResult:
        """Store a half message (the send's answer is made from the result)."""
        self.front.ensure_system_topic(TRANS_HALF_TOPIC)
        properties = dict(properties, **{PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QUEUE_ID: str(queue_id)})
        return self.front.put(TRANS_HALF_TOPIC, 0, [(body, properties, flag)], born, host,
                              sys_flag & ~TransactionType.MASK, reconsume_times)

    def end(self, request: Request) -> None:
        """END_TRANSACTION."""
        outcome = request.integer("commitOrRollback", 0, 0, 15)
        if outcome == TransactionType.NOT_TYPE:
            request.respond()
            return
        if outcome not in (TransactionType.COMMIT, TransactionType.ROLLBACK):
            raise RequestError(f"commitOrRollback {outcome} is none of 0, 8, 12", ResponseCode.INVALID_PARAMETER)
        half = self.store.get_message_by_offset(request.integer("commitLogOffset", low=0))
        if half is None or half.topic != TRANS_HALF_TOPIC:
            raise RequestError("no half message at that commitLogOffset", ResponseCode.SYSTEM_ERROR)
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != request.text("producerGroup"):
            raise RequestError("the producer group is not the half message's", ResponseCode.SYSTEM_ERROR)
        if half.queue_offset != request.integer("tranStateTableOffset", -1):
            raise RequestError("tranStateTableOffset is not the half message's", ResponseCode.SYSTEM_ERROR)
        if half.queue_offset not in self.decided:
            if outcome == TransactionType.COMMIT:
                self._deliver(half)
            self._decided(half.queue_offset)
        request.respond()

    def _deliver(self, half: StoredMessage) -> None:
        properties = dict(half.properties)
        topic = properties.pop(PROPERTY_REAL_TOPIC, "")
        queue = properties.pop(PROPERTY_REAL_QUEUE_ID, "")
        properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
        if not topic or not queue.isdigit():
            raise RequestError("the half message names no destination", ResponseCode.SYSTEM_ERROR)
        self.front.put(topic, int(queue), [(half.body, properties, half.flag)], half.born_timestamp,
                       half.born_host_bytes, (half.sys_flag & ~TransactionType.MASK) | TransactionType.COMMIT,
                       half.reconsume_times)

    def _decided(self, queue_offset: int) -> None:
        self.front.ensure_system_topic(TRANS_OP_TOPIC)
        self.front.put(TRANS_OP_TOPIC, 0, [(str(queue_offset).encode(), {PROPERTY_TAGS: OP_TAG_DECIDED}, 0)],
                       int(time.time() * 1000), None)
        self.decided.add(queue_offset)
        self.checks.pop(queue_offset, None)

    # -- check-back -------------------------------------------------------------------------------------------

    def check(self) -> None:
        """One walk over the undecided half messages (loop thread)."""
        settings = self.front.settings
        now_ms = int(time.time() * 1000)
        offset = max(self.check_from, self.store.get_min_offset(TRANS_HALF_TOPIC, 0))
        contiguous = True
        for half in self.store.get_messages(TRANS_HALF_TOPIC, 0, offset, CHECK_BATCH).messages:
            if half.queue_offset in self.decided:
                if contiguous:
                    self.check_from = half.queue_offset + 1
                    self.decided.discard(half.queue_offset)
                continue
            if now_ms - half.store_timestamp < settings.transaction_timeout_ms:
                break
            contiguous = False
            asked = self.checks.get(half.queue_offset, 0)
            if asked >= settings.transaction_check_max:
                log.warning("half message %s of group %s undecided after %d checks: dropped", half.msg_id,
                            half.properties.get(PROPERTY_PRODUCER_GROUP), asked)
                self._decided(half.queue_offset)
            elif self._ask(half):
                self.checks[half.queue_offset] = asked + 1

    def _ask(self, half: StoredMessage) -> bool:
        channels = list(self.front.clients.producer_groups.get(half.properties.get(PROPERTY_PRODUCER_GROUP, ""),
                                                                {}).values())
        if not channels:
            return False     # no producer of the group is connected: asked again at the next walk
        uniq = half.properties.get(PROPERTY_UNIQ_KEY) or half.msg_id
        fields = {"topic": half.properties.get(PROPERTY_REAL_TOPIC, ""), "tranStateTableOffset": half.queue_offset,
                  "commitLogOffset": half.commitlog_offset, "msgId": uniq, "transactionId": uniq,
                  "offsetMsgId": half.msg_id, "brokerName": self.front.settings.broker_name}
        data = self.store.get_data(half.commitlog_offset, half.store_size)
        if data is None:
            return False     # its CommitLog file is gone: nothing left to ask about
        self.front.remoting_listeners[0].tell_client(random.choice(channels).connection,
                                                     RequestCode.CHECK_TRANSACTION_STATE, fields, bytes(data))
        return True
