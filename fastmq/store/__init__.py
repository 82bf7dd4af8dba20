"""fastmq.store: a RocketMQ 4.x / SmartGo compatible message store (CommitLog, ConsumeQueue, IndexFile).

    from fastmq.store import MessageStore, MessageStoreConfig
    with MessageStore("/var/lib/fastmq/store") as store:
        result = store.put_message("orders", 0, b"...", tags="created", keys="order-42")
        for message in store.get_messages("orders", 0, offset=0, max_count=32):
            ...
"""
from fastmq._native.queue_codec import QueueUnits
from fastmq._native.store_codec import DispatchRequest
from fastmq.store.config import (ConsumerOffsetManager, SubscriptionGroupConfig, SubscriptionGroupManager,
                                 TopicConfig, TopicConfigManager)
from fastmq.store.errors import (CorruptStoreError, DiskFullError, HAProtocolError, MessageIllegalError,
                                 ReadOnlyStoreError, ServiceNotAvailableError, StoreClosedError, StoreConfigError,
                                 StoreError, StoreLockedError)
from fastmq.store.message import (Message, StoredMessage, create_message_id, decode_message_id, decode_messages,
                                  iter_messages)
from fastmq.store.results import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus
from fastmq.store.store import MessageStore
from fastmq.store.store_config import BrokerRole, FlushDiskType, MessageStoreConfig

__all__ = [
    "BrokerRole", "ConsumerOffsetManager", "CorruptStoreError", "DiskFullError", "DispatchRequest",
    "FlushDiskType", "GetMessageResult", "GetMessageStatus", "HAProtocolError", "Message", "MessageIllegalError",
    "MessageStore", "MessageStoreConfig", "PutMessageResult", "PutMessageStatus", "QueueUnits",
    "ReadOnlyStoreError", "ServiceNotAvailableError", "StoreClosedError", "StoreConfigError", "StoreError",
    "StoreLockedError", "StoredMessage", "SubscriptionGroupConfig", "SubscriptionGroupManager", "TopicConfig",
    "TopicConfigManager", "create_message_id", "decode_message_id", "decode_messages", "iter_messages",
]
