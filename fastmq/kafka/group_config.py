"""What a group member is given: its settings (GroupConfig) and the rebalance listener it calls back."""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka.structs import TopicPartition

_log = logging.getLogger(__name__)


class ConsumerRebalanceListener:
    """Callbacks around rebalances, called on the consumer's (user's) thread from poll() and close().

    on_partitions_revoked(revoked): before a rebalance (and on close), while commits still succeed.
    on_partitions_assigned(assigned): after a rebalance, before records of the new partitions are fetched.
    on_partitions_lost(lost): the member was removed from the group; commits would fail. Defaults to
    on_partitions_revoked. kafka-python's ConsumerRebalanceListener subclasses work as well.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)


def call_listener(listener: Any, method: str, partitions: set[TopicPartition]) -> None:
    """Call a listener method on the user's thread; async methods (kafka-python's async listener) run to
    completion. Exceptions are logged, as Kafka's consumer does, so that a rebalance is never left half-done."""
    function = getattr(listener, method, None)
    if function is None and method == "on_partitions_lost":
        function = getattr(listener, "on_partitions_revoked", None)
    if function is None:
        return
    try:
        result = function(partitions)
        if inspect.isawaitable(result):
            asyncio.run(_awaited(result))
    except Exception:
        _log.exception("rebalance listener %s(%s) failed", method, sorted(partitions))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@dataclass
class GroupConfig:
    group_id: str
    group_instance_id: str | None = None
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    retry_backoff_ms: float = 100
    request_timeout_ms: float = 30000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: float = 5000
    client_rack: str | None = None

    def validate(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise kerrors.KafkaConfigurationError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than session_timeout_ms "
                f"({self.session_timeout_ms})")
