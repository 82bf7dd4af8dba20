"""fastmq.tubemq: an Apache InLong TubeMQ client.

Producer (register, heartbeat and close with the master, failover across the master list, partition choice by
key or round robin, sync and async send, bad-broker blocking), PullConsumer and PushConsumer (balanced by the
master, filters, exact offsets, manual confirmation), Message (attributes, $msgType$, $msgTime$), errors with
TubeMQ's codes (ErrorCode). RpcClient is the connection set producers and consumers may share.
"""
from __future__ import annotations

from fastmq.tubemq.consumer import (
    FROM_FIRST_OFFSET,
    FROM_LATEST_OFFSET,
    FROM_MAX_OFFSET_ALWAYS,
    ConsumeResult,
    PullConsumer,
    PushConsumer,
)
from fastmq.tubemq.errors import ErrorCode, NoMasterError, RemoteException, StandbyError, TubeMQError
from fastmq.tubemq.message import Message
from fastmq.tubemq.metadata import Partition
from fastmq.tubemq.producer import Producer, SendResult
from fastmq.tubemq.rpc_client import RpcClient

__all__ = ["ConsumeResult", "ErrorCode", "FROM_FIRST_OFFSET", "FROM_LATEST_OFFSET", "FROM_MAX_OFFSET_ALWAYS",
           "Message", "NoMasterError", "Partition", "Producer", "PullConsumer", "PushConsumer", "RemoteException",
           "RpcClient", "SendResult", "StandbyError", "TubeMQError"]
