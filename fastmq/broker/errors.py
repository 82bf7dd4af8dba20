"""Why the broker core refuses an operation, in no protocol's terms.

The core's services (groups, producer state, transactions, topics) answer with a CoreError, or None when the
operation succeeded; each front end maps these onto its protocol's error codes (fastmq.broker.kafka.errors for
Kafka). The rules behind them are the ones the services' docstrings give.
"""
from __future__ import annotations

import enum

from fastmq.errors import FastMQError


class CoreError(enum.Enum):
    # Any service
    NOT_AVAILABLE = enum.auto()                # shutting down, or a state change could not be made durable: retry
    # Groups (groups.py)
    INVALID_GROUP_ID = enum.auto()             # an empty group id
    GROUP_NOT_FOUND = enum.auto()              # no such group (members, offsets or a registration)
    INVALID_SESSION_TIMEOUT = enum.auto()      # outside the broker's minimum and maximum
    INCONSISTENT_GROUP_PROTOCOL = enum.auto()  # no protocol in common with the group's members
    UNKNOWN_MEMBER = enum.auto()               # the member id is not (or no longer) in the group
    MEMBER_ID_REQUIRED = enum.auto()           # join again with the member id handed out
    GROUP_FULL = enum.auto()                   # the group has its maximum number of members
    FENCED_INSTANCE = enum.auto()              # a newer member took over this static instance id
    STALE_GENERATION = enum.auto()             # the group moved on to another generation
    REBALANCE_IN_PROGRESS = enum.auto()        # the member must join again
    NON_EMPTY_GROUP = enum.auto()              # a group with members cannot be deleted
    # Producers (idempotence.py, partition_transactions.py)
    UNKNOWN_PRODUCER = enum.auto()             # no state for the producer here, and it does not start at 0
    STALE_PRODUCER_EPOCH = enum.auto()         # a newer epoch of the producer exists: this one is fenced
    OUT_OF_ORDER_SEQUENCE = enum.auto()        # a gap between the last stored sequence and this batch
    # Transactions (transactions.py)
    INVALID_TRANSACTIONAL_ID = enum.auto()     # an empty transactional id
    INVALID_TRANSACTION_TIMEOUT = enum.auto()  # not in (0, the broker's maximum]
    PRODUCER_ID_MISMATCH = enum.auto()         # the transactional id has another producer id
    PRODUCER_FENCED = enum.auto()              # a newer epoch of the transactional id exists
    TRANSACTION_BUSY = enum.auto()             # the transaction is completing: retry
    INVALID_TRANSACTION_STATE = enum.auto()    # the operation does not fit the transaction's state
    UNKNOWN_PARTITION = enum.auto()            # no such topic or partition
    NOT_ATTEMPTED = enum.auto()                # not tried because another part of the request failed
    # Topics (topics.py)
    INVALID_TOPIC_NAME = enum.auto()
    TOPIC_EXISTS = enum.auto()
    INVALID_PARTITIONS = enum.auto()
    INVALID_CONFIG = enum.auto()


class TopicError(FastMQError):
    """A refused topic operation: `error` says why, the message what to do."""

    def __init__(self, error: CoreError, message: str) -> None:
        super().__init__(message)
        self.error = error
