"""Queue locks for orderly consumption (LOCK_BATCH_MQ 41 / UNLOCK_BATCH_MQ 42; RocketMQ's RebalanceLockManager).

An orderly consumer holds a lock on each queue it consumes, so that after a rebalance two members never consume
one queue at once. A lock belongs to a client id within a consumer group and lapses LOCK_EXPIRED_S after its
holder last renewed it (clients renew every 20 s); a lapsed lock or one already held by the asker is granted.
"""
from __future__ import annotations

import time
from typing import Callable

LOCK_EXPIRED_S = 60.0

Queue = tuple[str, str, int]      # (topic, broker name, queue id)


class QueueLocks:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._locks: dict[str, dict[Queue, tuple[str, float]]] = {}   # group -> queue -> (client id, last renew)

    def lock(self, group: str, client_id: str, queues: list[Queue]) -> list[Queue]:
        """Lock (or renew) what is free or the client's own; returns the queues the client now holds."""
        now = self._clock()
        table = self._locks.setdefault(group, {})
        held = []
        for queue in queues:
            owner = table.get(queue)
            if owner is None or owner[0] == client_id or now - owner[1] > LOCK_EXPIRED_S:
                table[queue] = (client_id, now)
                held.append(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: list[Queue]) -> None:
        table = self._locks.get(group)
        if table is None:
            return
        for queue in queues:
            owner = table.get(queue)
            if owner is not None and owner[0] == client_id:
                del table[queue]
        if not table:
            del self._locks[group]

    def holder(self, group: str, queue: Queue) -> str | None:
        owner = self._locks.get(group, {}).get(queue)
        if owner is None or self._clock() - owner[1] > LOCK_EXPIRED_S:
            return None
        return owner[0]
