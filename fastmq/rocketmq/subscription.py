"""Subscriptions (a topic and a tag expression), and how a group's queues are shared among its consumers."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Callable

from fastmq._native.store_codec import java_hash
from fastmq.rocketmq.route import MessageQueue

Allocation = Callable[[str, Sequence[str], Sequence[MessageQueue]], list[MessageQueue]]


class Subscription:
    """`expression` is "*" (every message) or tags joined by "||" ("TagA || TagB")."""

    __slots__ = ("topic", "expression", "tags", "all", "version")

    def __init__(self, topic: str, expression: str | None = "*") -> None:
        expression = (expression or "*").strip()
        self.topic = topic
        self.all = expression in ("", "*")
        self.expression = "*" if self.all else expression
        self.tags = frozenset() if self.all else frozenset(t.strip() for t in expression.split("||") if t.strip())
        if not self.all and not self.tags:
            raise ValueError(f"tag expression {expression!r} names no tag")
        self.version = int(time.time() * 1000)

    def heartbeat_data(self) -> dict[str, Any]:
        """SubscriptionData as a heartbeat carries it; codeSet holds Java's hashCode of each tag."""
        tags = sorted(self.tags)
        return {"topic": self.topic, "subString": self.expression, "tagsSet": tags,
                "codeSet": [java_hash(tag) for tag in tags], "subVersion": self.version, "expressionType": "TAG",
                "classFilterMode": False}


def allocate_averagely(consumer_id: str, consumer_ids: Sequence[str],
                       queues: Sequence[MessageQueue]) -> list[MessageQueue]:
    """RocketMQ's AllocateMessageQueueAveragely: with ids and queues sorted, consumer i of n takes a contiguous
    block; the first (queues % n) consumers take one more."""
    ids = sorted(consumer_ids)
    ordered = sorted(queues)
    if consumer_id not in ids or not ordered:
        return []
    index = ids.index(consumer_id)
    total, count = len(ordered), len(ids)
    mod = total % count
    if total <= count:
        size = 1
    elif mod > 0 and index < mod:
        size = total // count + 1
    else:
        size = total // count
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [ordered[(start + i) % total] for i in range(min(size, total - start))]
