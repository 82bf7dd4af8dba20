"""fastmq.nsq: an NSQ client (nsqd's TCP protocol V2, with Youzan's partition, ordering and trace extensions).

Producer publishes (PUB, MPUB, DPUB, PUB_TRACE, PUB_EXT) batched on the io loop; Consumer reads a channel with
max_in_flight spread as RDY over one connection per nsqd (per partition); both find nsqd through nsqlookupd or take
nsqd addresses directly. NSQSettings holds what IDENTIFY negotiates (TLS, snappy, deflate, heartbeats, ...).
"""
from fastmq.nsq._native.codec import Message
from fastmq.nsq.connection import NSQSettings
from fastmq.nsq.consumer import Consumer
from fastmq.nsq.errors import (
    NSQConfigurationError,
    NSQError,
    NSQNoConnectionsError,
    NSQServerError,
)
from fastmq.nsq.lookup import NSQDAddress, NSQLookupError, TopicLookup
from fastmq.nsq.producer import Producer, TraceReply

__all__ = [
    "Consumer", "Message", "NSQConfigurationError", "NSQDAddress", "NSQError", "NSQLookupError",
    "NSQNoConnectionsError", "NSQServerError", "NSQSettings", "Producer", "TopicLookup", "TraceReply",
]
