"""Which versions of each API fastmq speaks, and the choice of a version with a broker.

A client sends ApiVersions first; for every API it then uses the highest version that both it and the broker
support. A broker answers ApiVersions with SUPPORTED_VERSIONS (or the subset it implements).
"""
from __future__ import annotations

from typing import Any

from fastmq.kafka.errors import IncompatibleBrokerVersion
from fastmq.kafka.protocol.messages import APIS

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    key: (api.versions.lo, api.versions.hi) for key, api in sorted(APIS.items())
}
"""API key -> (lowest, highest) version fastmq can encode and decode, requests and responses alike."""

CLIENT_MAX_VERSIONS: dict[int, int] = {
    24: 3,      # AddPartitionsToTxn v4+ is the brokers' batched form (verify_only); clients stop at v3
}
"""Caps on what a client sends even when the broker speaks more."""


def highest_common_version(api_key: int, broker_min: int, broker_max: int) -> int:
    """The highest version of an API both fastmq and the broker support; IncompatibleBrokerVersion if none."""
    ours = SUPPORTED_VERSIONS.get(api_key)
    if ours is None:
        raise IncompatibleBrokerVersion(f"fastmq does not implement API key {api_key}")
    low, high = max(ours[0], broker_min), min(ours[1], broker_max)
    if low > high:
        name = APIS[api_key].name
        raise IncompatibleBrokerVersion(
            f"no common version of {name}: fastmq speaks {ours[0]}-{ours[1]}, the broker {broker_min}-{broker_max}")
    return high


def negotiate_versions(api_versions_response: Any) -> dict[int, int]:
    """API key -> version a client uses, for every API that fastmq and the broker (per its
    ApiVersionsResponse) have in common, within CLIENT_MAX_VERSIONS; APIs without one are left out."""
    chosen: dict[int, int] = {}
    for entry in api_versions_response.api_keys:
        ours = SUPPORTED_VERSIONS.get(entry.api_key)
        if ours is None:
            continue
        low = max(ours[0], entry.min_version)
        high = min(ours[1], entry.max_version, CLIENT_MAX_VERSIONS.get(entry.api_key, ours[1]))
        if low <= high:
            chosen[entry.api_key] = high
    return chosen
