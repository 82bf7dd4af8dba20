"""Node health: which brokers keep failing, and which nodes to ask for metadata."""
from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from fastmq.io import ConnectionPool

_log = logging.getLogger(__name__)

NodeT = TypeVar("NodeT", bound=Hashable)    # how a protocol names its brokers (Kafka and TubeMQ: int ids)


class NodeHealth(Generic[NodeT]):
    """Failure counts per broker; a broker with `threshold` failures in a row is avoided for `penalty` s
    (TubeMQ's "bad node blocking": work that may go anywhere goes elsewhere meanwhile)."""

    def __init__(self, threshold: int = 3, penalty: float = 10.0) -> None:
        if threshold < 1 or penalty < 0:
            raise ValueError("the failure threshold must be at least 1 and the penalty not negative")
        self.threshold = threshold
        self.penalty = penalty
        self._failures: dict[NodeT, int] = {}
        self._avoided_until: dict[NodeT, float] = {}

    def failed(self, node_id: NodeT, now: float) -> bool:
        """Record a failure; True when the node just became avoided."""
        count = self._failures.get(node_id, 0) + 1
        self._failures[node_id] = count
        if count >= self.threshold and node_id not in self._avoided_until:
            self._avoided_until[node_id] = now + self.penalty
            _log.warning("broker %s failed %d times in a row: it is avoided for %.0f s", node_id, count,
                         self.penalty)
            return True
        return False

    def succeeded(self, node_id: NodeT) -> None:
        self._failures.pop(node_id, None)

    def avoided(self, now: float) -> set[NodeT]:
        """The nodes avoided now (expired penalties are dropped, and their counts restart)."""
        for node_id, until in list(self._avoided_until.items()):
            if until <= now:
                del self._avoided_until[node_id]
                self._failures.pop(node_id, None)
        return set(self._avoided_until)


def is_failing(pool: ConnectionPool, node_id: Hashable) -> bool:
    """Loop thread: the node's last connection closed with an error and no new one is up or coming."""
    return pool.is_disconnected(node_id) and pool.last_error(node_id) is not None


def metadata_candidates(pool: ConnectionPool, brokers: Sequence[Hashable],
                        bootstrap: Sequence[Hashable]) -> list[Hashable]:
    """Loop thread: the nodes to ask for metadata. The brokers the last metadata named; the bootstrap
    servers too once every one of those is failing (they may all have moved, to addresses only the
    bootstrap list still reaches), and the bootstrap servers alone before any metadata came."""
    if not brokers:
        return list(bootstrap)
    if all(is_failing(pool, node_id) for node_id in brokers):
        return [*brokers, *bootstrap]
    return list(brokers)
