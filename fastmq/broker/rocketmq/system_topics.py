"""The topics a RocketMQ broker makes for itself: per consumer group %RETRY%<group> (messages given back for a
later retry) and %DLQ%<group> (those out of retries), and SCHEDULE_TOPIC_XXXX (delayed messages, a queue per
delay level: schedule.py)."""
from __future__ import annotations

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group
