"""The topics a RocketMQ broker makes for itself: per consumer group %RETRY%<group> (messages given back for a
later retry) and %DLQ%<group> (those out of retries), and SCHEDULE_TOPIC_XXXX (delayed messages, a queue per
delay level: schedule.py), RMQ_SYS_TRANS_HALF_TOPIC and RMQ_SYS_TRANS_OP_HALF_TOPIC (half messages of transactions
and the record of their outcome: transactions.py)."""
from __future__ import annotations

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group
