"""fastmq.client: what every client (Kafka now; RocketMQ, TubeMQ, NSQ next) shares, and no protocol.

One module per concern: bootstrap (server lists), metadata (when to refresh the cluster's metadata, and
waiting for it), nodes (node health: blocking brokers that keep failing), retry (which failures are worth
another attempt, and when), calls (calls from any thread waiting for a node, with their deadlines), ratelimit
(token buckets). A protocol package builds its client on these and adds its codec and its
producer/consumer state machines. Imports only fastmq.io, fastmq._native and fastmq.errors.
"""
from __future__ import annotations

from fastmq.client.bootstrap import parse_servers
from fastmq.client.calls import CallHooks, CallQueue, PendingCall
from fastmq.client.metadata import MetadataRefresh, MetadataVersion
from fastmq.client.nodes import NodeHealth, metadata_candidates
from fastmq.client.ratelimit import RateLimiter
from fastmq.client.retry import RetryPolicy

__all__ = ["CallHooks", "CallQueue", "MetadataRefresh", "MetadataVersion", "NodeHealth", "PendingCall",
           "RateLimiter", "RetryPolicy", "metadata_candidates", "parse_servers"]
