"""The TubeMQ broker of the embedded broker: producers send to it, consumers read from it, on the core's store.

A TubeMQ partition is the store's queue of the same number (a topic's partitions come from the core's topics);
a message is stored with its payload as the body, its flag, and its message type as the store's tag (so that
server-side filters are the store's tag filter). Offsets are the store's queue offsets, shown to clients in
TubeMQ's unit (INDEX_ENTRY_BYTES per message); a group's committed offsets are the core's (OffsetStore).

Consumption follows TubeMQ's booking: a consumer registers a partition (opType 31; PARTITION_OCCUPIED while
another consumer of its group holds it), then each getMessage delivers a batch from the partition's offset and
books the offset after it. The next getMessage or commit confirms the booking (lastPackConsumed true: the
offset moves past the batch, and is committed) or drops it (false: the batch comes again).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.offsets import CommittedOffset
from fastmq.broker.tubemq.service import Handler, RpcService
from fastmq.store.results import GetMessageStatus
from fastmq.tubemq import rpc
from fastmq.tubemq._proto import broker_pb2
from fastmq.tubemq.constants import (
    INDEX_ENTRY_BYTES,
    OP_REGISTER,
    OP_UNREGISTER,
    READ_FROM_MAX,
    READ_FROM_MAX_ALWAYS,
)
from fastmq.tubemq.errors import ErrorCode
from fastmq.tubemq.message import NO_CHECKSUM, checksum
from fastmq.tubemq.metadata import BrokerInfo

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

log = logging.getLogger(__name__)

BROKER_ID = 1
MAX_MESSAGES_PER_GET = 512
MAX_BYTES_PER_GET = 512 * 1024
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024


@dataclasses.dataclass
class Registration:
    """One consumer's hold of one partition for its group."""

    client_id: str
    offset: int                        # the next message to deliver once the booking is settled
    booked: int | None = None          # the offset after the batch delivered last, until confirmed or dropped
    filters: list[str] | None = None   # message types to deliver (None: all)


class TubeMQBrokerFrontEnd(FrontEnd):
    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.broker_id = BROKER_ID
        self.services: list[RpcService] = []
        self.registrations: dict[tuple[str, str, int], Registration] = {}
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE

    def start(self) -> None:
        methods: dict[int, tuple[type, Handler]] = {
            rpc.SEND_MESSAGE: (broker_pb2.SendMessageRequestP2B, self.send_message),
            rpc.CONSUMER_REGISTER_TO_BROKER: (broker_pb2.RegisterRequestC2B, self.register_consumer),
            rpc.CONSUMER_HEARTBEAT_TO_BROKER: (broker_pb2.HeartBeatRequestC2B, self.heartbeat),
            rpc.GET_MESSAGE: (broker_pb2.GetMessageRequestC2B, self.get_message),
            rpc.COMMIT_OFFSET: (broker_pb2.CommitOffsetRequestC2B, self.commit_offset),
        }
        for listener in self.listeners:
            self.services.append(RpcService(self.broker.loop, listener, methods))
            self.addresses.append(self.services[-1].address)

    @property
    def info(self) -> BrokerInfo:
        """What the master tells clients about this broker (its first listener)."""
        host, port = self.services[0].advertised
        return BrokerInfo(self.broker_id, host, port)

    def partitions(self, topic: str) -> int:
        """The topic's partition count (0: no such topic)."""
        found = self.broker.topics.get(topic)
        return found.partitions if found is not None else 0

    # ---- producing -----------------------------------------------------------------------------------------

    def bypasses_master(self, request: Any) -> bool:
        """With users, a producer or consumer must show the visit token of this process's master."""
        if not self.broker.config.users:
            return False
        tokens = {getattr(front, "visit_token", None) for front in self.broker.front_ends} - {None}
        return request.authInfo.visitAuthorizedToken not in tokens

    def send_message(self, request: Any, conn: Any) -> Any:
        response = broker_pb2.SendMessageResponseB2P
        if self.bypasses_master(request):
            return response(success=False, errCode=ErrorCode.UNAUTHORIZED, errMsg="no valid visit token")
        if not 0 <= request.partitionId < self.partitions(request.topicName):
            return response(success=False, errCode=ErrorCode.PARTITION_UNPUBLISHABLE,
                            errMsg=f"topic {request.topicName} has no partition {request.partitionId} here")
        data = request.data
        if len(data) > self.max_message_size:
            return response(success=False, errCode=ErrorCode.BAD_REQUEST,
                            errMsg=f"message of {len(data)} bytes exceeds {self.max_message_size}")
        if request.checkSum != NO_CHECKSUM and request.checkSum != checksum(data):
            return response(success=False, errCode=ErrorCode.FORBIDDEN, errMsg="checksum of the data is wrong")
        stored = self.broker.store.put_message(request.topicName, request.partitionId, data,
                                               tags=request.msgType or None, flag=request.flag)
        return response(success=True, errCode=ErrorCode.SUCCESS, errMsg=str(stored.commitlog_offset),
                        messageId=stored.commitlog_offset, appendTime=stored.store_timestamp,
                        appendOffset=stored.queue_offset * INDEX_ENTRY_BYTES)

    # ---- consuming -----------------------------------------------------------------------------------------

    def register_consumer(self, request: Any, conn: Any) -> Any:
        response = broker_pb2.RegisterResponseB2C
        key = (request.groupName, request.topicName, request.partitionId)
        store = self.broker.store
        if request.opType == OP_UNREGISTER:
            held = self.registrations.get(key)
            if held is not None and held.client_id == request.clientId:
                del self.registrations[key]
            return response(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK")
        if self.bypasses_master(request):
            return response(success=False, errCode=ErrorCode.UNAUTHORIZED, errMsg="no valid visit token")
        if request.opType != OP_REGISTER:
            return response(success=False, errCode=ErrorCode.BAD_REQUEST, errMsg=f"unknown opType {request.opType}")
        if not 0 <= request.partitionId < self.partitions(request.topicName):
            return response(success=False, errCode=ErrorCode.PARTITION_UNSUBSCRIBABLE,
                            errMsg=f"topic {request.topicName} has no partition {request.partitionId} here")
        held = self.registrations.get(key)
        if held is not None and held.client_id != request.clientId:
            return response(success=False, errCode=ErrorCode.PARTITION_OCCUPIED,
                            errMsg=f"partition {request.topicName}:{request.partitionId} of group "
                                   f"{request.groupName} is held by {held.client_id}")
        topic, partition = request.topicName, request.partitionId
        max_offset = store.get_max_offset(topic, partition)
        if request.HasField("currOffset") and request.currOffset >= 0:
            offset = min(max(request.currOffset // INDEX_ENTRY_BYTES, store.get_min_offset(topic, partition)),
                         max_offset)
        else:
            committed = self.broker.offsets.fetch(request.groupName, topic, partition)
            if request.readStatus == READ_FROM_MAX_ALWAYS:
                offset = max_offset
            elif committed is not None:
                offset = committed.offset
            elif request.readStatus == READ_FROM_MAX:
                offset = max_offset
            else:
                offset = store.get_min_offset(topic, partition)
        self.registrations[key] = Registration(request.clientId, offset, None, list(request.filterCondStr) or None)
        return response(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK", currOffset=offset * INDEX_ENTRY_BYTES,
                        maxOffset=max_offset * INDEX_ENTRY_BYTES)

    def heartbeat(self, request: Any, conn: Any) -> Any:
        failures = []
        for info in request.partitionInfo:      # "brokerId:host:port#topic:partitionId"
            topic, _, partition = info.rpartition("#")[2].partition(":")
            if partition.isdigit():
                held = self.registrations.get((request.groupName, topic, int(partition)))
                if held is None or held.client_id != request.clientId:
                    failures.append(f"{int(ErrorCode.HB_NO_NODE)}:{info}")
        return broker_pb2.HeartBeatResponseB2C(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK",
                                               hasPartFailure=bool(failures), failureInfo=failures)

    def _held(self, request: Any) -> Registration | None:
        held = self.registrations.get((request.groupName, request.topicName, request.partitionId))
        return held if held is not None and held.client_id == request.clientId else None

    def _settle(self, request: Any, held: Registration, consumed: bool) -> None:
        """Confirm (consumed) or drop the booking; a confirmed offset is committed."""
        if held.booked is None:
            return
        if consumed:
            held.offset = held.booked
            self.broker.offsets.commit(request.groupName, [(request.topicName, request.partitionId,
                                                            CommittedOffset(held.offset))], _ignore_durable)
        held.booked = None

    def get_message(self, request: Any, conn: Any) -> Any:
        response = broker_pb2.GetMessageResponseB2C
        held = self._held(request)
        if held is None:
            return _not_registered(response)
        self._settle(request, held, request.lastPackConsumed)
        topic, partition = request.topicName, request.partitionId
        result = self.broker.store.get_messages(topic, partition, held.offset, MAX_MESSAGES_PER_GET,
                                                tags=held.filters, max_bytes=MAX_BYTES_PER_GET)
        if not result.messages:
            if result.status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_TOO_SMALL):
                held.offset = result.next_begin_offset     # nothing there for this consumer: skip past it
            return response(success=False, errCode=ErrorCode.NOT_FOUND, errMsg="The request offset reached maxOffset!",
                            currOffset=held.offset * INDEX_ENTRY_BYTES,
                            maxOffset=result.max_offset * INDEX_ENTRY_BYTES)
        messages = [broker_pb2.TransferedMessage(messageId=stored.commitlog_offset, checkSum=checksum(stored.body),
                                                 payLoadData=stored.body, flag=stored.flag, partitionId=partition)
                    for stored in result.messages]
        held.booked = result.next_begin_offset
        # How far the consumer lags, in bytes (flow-control rules of type 0 act on it): the messages left,
        # at this batch's average size.
        lag = (result.max_offset - result.next_begin_offset) * sum(len(m.payLoadData) for m in messages) \
            // len(messages)
        return response(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK", messages=messages,
                        currOffset=held.offset * INDEX_ENTRY_BYTES, maxOffset=result.max_offset * INDEX_ENTRY_BYTES,
                        escFlowCtrl=False, currDataDlt=lag,
                        requireSlow=False, minLimitTime=0)

    def commit_offset(self, request: Any, conn: Any) -> Any:
        response = broker_pb2.CommitOffsetResponseB2C
        held = self._held(request)
        if held is None:
            return _not_registered(response)
        self._settle(request, held, request.lastPackConsumed)
        max_offset = self.broker.store.get_max_offset(request.topicName, request.partitionId)
        return response(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK", currOffset=held.offset * INDEX_ENTRY_BYTES,
                        maxOffset=max_offset * INDEX_ENTRY_BYTES)

    def holds(self, group: str, topic: str, partition: int, client_id: str) -> bool:
        held = self.registrations.get((group, topic, partition))
        return held is not None and held.client_id == client_id

    def release_consumer(self, client_id: str) -> None:
        """The master dropped a consumer (closed or silent): its partitions are free."""
        for key, held in list(self.registrations.items()):
            if held.client_id == client_id:
                del self.registrations[key]

    def close(self) -> None:
        for service in self.services:
            service.close()


def _ignore_durable(ok: bool) -> None:
    """Commits are answered before they are on disk, as TubeMQ's broker flushes its offsets periodically."""
    if not ok:
        log.warning("a TubeMQ consumer offset could not be written")


def _not_registered(response_class: type) -> Any:
    """HB_NO_NODE: the consumer lost the partition (the Java client drops it on this code)."""
    return response_class(success=False, errCode=ErrorCode.HB_NO_NODE,
                          errMsg="the partition is not registered to this consumer")
