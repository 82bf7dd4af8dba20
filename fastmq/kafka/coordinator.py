"""FindCoordinator for every caller (consumer groups, the admin client, transactional producers).

Versions 0-3 ask for one key and answer in top-level fields; versions 4+ take a list of keys and answer
with a list of coordinators. The request built here fills both shapes, and coordinator_entries() reads
either, so callers never look at the version.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastmq.kafka import protocol as kp

GROUP = 0
TRANSACTION = 1


@dataclass(frozen=True)
class CoordinatorEntry:
    key: str
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


def find_coordinator_request(keys: list[str], key_type: int) -> Any:
    """The request for these keys (versions 0-3 send only the first: ask for one key per request there)."""
    return kp.FindCoordinatorRequest(key=keys[0], key_type=key_type, coordinator_keys=list(keys))


def coordinator_entries(response: Any, asked: list[str]) -> list[CoordinatorEntry]:
    """The answers of a FindCoordinator response, whatever its version."""
    if response.coordinators:
        return [CoordinatorEntry(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
                for c in response.coordinators]
    return [CoordinatorEntry(asked[0], response.error_code, response.error_message, response.node_id,
                             response.host, response.port)]
