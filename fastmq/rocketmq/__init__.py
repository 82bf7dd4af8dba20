"""fastmq.rocketmq: a RocketMQ remoting client (namesrv routes, brokers, producer, consumers) on fastmq.io.

Producer sends (sync, async, oneway, batches, ordered by key); PullConsumer polls assigned or subscribed queues
and commits offsets to the broker; PushConsumer runs a listener over long-polling pulls. The compiled codec is
fastmq.rocketmq._native (remoting commands, messages); fastmq.rocketmq.compat has the API of PyPI `rocketmq`.
"""
from __future__ import annotations

from fastmq.rocketmq.acl import Credentials
from fastmq.rocketmq.client import ClientInstance
from fastmq.rocketmq.consumer import PullConsumer
from fastmq.rocketmq.errors import (
    BrokerError,
    RocketMQError,
    SendBufferFullError,
    SendFailedError,
    TopicNotFoundError,
)
from fastmq.rocketmq.message import Message, MessageExt, SendResult, SendStatus
from fastmq.rocketmq.producer import Producer, select_by_hash
from fastmq.rocketmq.protocol import ConsumeFromWhere, MessageModel
from fastmq.rocketmq.push_consumer import ConsumeStatus, PushConsumer
from fastmq.rocketmq.route import MessageQueue, TopicRoute
from fastmq.rocketmq.transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "BrokerError", "ClientInstance", "ConsumeFromWhere", "ConsumeStatus", "Credentials", "LocalTransactionState",
    "Message", "MessageExt", "MessageModel", "MessageQueue", "Producer", "PullConsumer", "PushConsumer",
    "RocketMQError", "SendBufferFullError", "SendFailedError", "SendResult", "SendStatus", "TopicNotFoundError",
    "TopicRoute", "TransactionListener", "TransactionProducer", "TransactionSendResult", "select_by_hash",
]
