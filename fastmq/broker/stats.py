"""Statistics (seed 003, broker chapter 4.8) and connection management (4.9).

BrokerStats counts, per topic and per consumer group, the messages and bytes put and got, and keeps per-second
buckets for the last minute, from which it computes TPS over 10 s and 60 s. Counting happens once per appended
or fetched batch (never per message) on whatever thread stores or reads; a lock keeps the counters exact.

Gets are attributed to a group through the fetching connection's client id: Kafka's Fetch carries no group, but
a consumer's fetches and its JoinGroup carry the same client id, so the coordinator's members tell which group a
client id fetches for (fetches of a client id in no group count under the group "").

ConnectionRegistry records every client connection: peer address, client id and software, principal, and what it
has done (produced to which topics, fetched from which, which groups it is a member of), so that operators see the
number of producers and consumers, the clients per topic and the members per group.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

BUCKETS = 60        # seconds of history


class Meter:
    """Messages and bytes, in total and per second for the last BUCKETS seconds."""

    __slots__ = ("messages", "bytes", "_seconds", "_counts", "_sizes")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self._seconds = [0] * BUCKETS       # the second each bucket holds
        self._counts = [0] * BUCKETS
        self._sizes = [0] * BUCKETS

    def add(self, now: int, messages: int, nbytes: int) -> None:
        self.messages += messages
        self.bytes += nbytes
        slot = now % BUCKETS
        if self._seconds[slot] != now:
            self._seconds[slot] = now
            self._counts[slot] = 0
            self._sizes[slot] = 0
        self._counts[slot] += messages
        self._sizes[slot] += nbytes

    def rate(self, now: int, window: int) -> tuple[float, float]:
        """(messages/s, bytes/s) over the `window` whole seconds before `now`."""
        messages = nbytes = 0
        for second in range(now - window, now):
            slot = second % BUCKETS
            if self._seconds[slot] == second:
                messages += self._counts[slot]
                nbytes += self._sizes[slot]
        return messages / window, nbytes / window

    def snapshot(self, now: int) -> dict[str, Any]:
        tps10, bps10 = self.rate(now, 10)
        tps60, bps60 = self.rate(now, 60)
        return {"messages": self.messages, "bytes": self.bytes, "tps_10s": tps10, "tps_60s": tps60,
                "bytes_per_s_10s": bps10, "bytes_per_s_60s": bps60}


class BrokerStats:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.started = clock()
        self.put_by_topic: dict[str, Meter] = {}
        self.get_by_topic: dict[str, Meter] = {}
        self.get_by_group: dict[tuple[str, str], Meter] = {}     # (group, topic)
        # client id -> group, maintained from the coordinator's membership
        self.group_of_client: dict[str, str] = {}

    def put(self, topic: str, messages: int, nbytes: int) -> None:
        now = int(self._clock())
        with self._lock:
            meter = self.put_by_topic.get(topic)
            if meter is None:
                meter = self.put_by_topic[topic] = Meter()
            meter.add(now, messages, nbytes)

    def get(self, topic: str, client_id: str | None, messages: int, nbytes: int) -> None:
        now = int(self._clock())
        group = self.group_of_client.get(client_id or "", "")
        with self._lock:
            meter = self.get_by_topic.get(topic)
            if meter is None:
                meter = self.get_by_topic[topic] = Meter()
            meter.add(now, messages, nbytes)
            meter = self.get_by_group.get((group, topic))
            if meter is None:
                meter = self.get_by_group[(group, topic)] = Meter()
            meter.add(now, messages, nbytes)

    def member_changed(self, group_id: str, client_id: str, joined: bool) -> None:
        if joined:
            self.group_of_client[client_id] = group_id
        elif self.group_of_client.get(client_id) == group_id:
            del self.group_of_client[client_id]

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            self.put_by_topic.pop(topic, None)
            self.get_by_topic.pop(topic, None)
            for key in [key for key in self.get_by_group if key[1] == topic]:
                del self.get_by_group[key]

    def snapshot(self) -> dict[str, Any]:
        now = int(self._clock())
        with self._lock:
            topics: dict[str, Any] = {}
            for topic in sorted(set(self.put_by_topic) | set(self.get_by_topic)):
                topics[topic] = {
                    "put": self.put_by_topic[topic].snapshot(now) if topic in self.put_by_topic else None,
                    "get": self.get_by_topic[topic].snapshot(now) if topic in self.get_by_topic else None,
                }
            groups: dict[str, Any] = {}
            for (group, topic), meter in sorted(self.get_by_group.items()):
                groups.setdefault(group, {})[topic] = meter.snapshot(now)
        return {"time": now, "uptime_s": now - int(self.started), "topics": topics, "groups": groups}


class ConnectionInfo:
    __slots__ = ("peer", "listener", "client_id", "software", "principal", "produced", "fetched", "connected_at")

    def __init__(self, peer: str, listener: str, connected_at: float) -> None:
        self.peer = peer
        self.listener = listener
        self.client_id: str | None = None
        self.software: str | None = None
        self.principal: str | None = None
        self.produced: set[str] = set()
        self.fetched: set[str] = set()
        self.connected_at = connected_at


class ConnectionRegistry:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.connections: dict[int, ConnectionInfo] = {}
        self.members: dict[str, dict[str, str]] = {}      # group -> member id -> client id

    def opened(self, key: int, peer: str, listener: str) -> ConnectionInfo:
        info = ConnectionInfo(peer, listener, self._clock())
        with self._lock:
            self.connections[key] = info
        return info

    def closed(self, key: int) -> None:
        with self._lock:
            self.connections.pop(key, None)

    def member_changed(self, group_id: str, member_id: str, client_id: str, joined: bool) -> None:
        with self._lock:
            if joined:
                self.members.setdefault(group_id, {})[member_id] = client_id
            else:
                members = self.members.get(group_id)
                if members is not None:
                    members.pop(member_id, None)
                    if not members:
                        del self.members[group_id]

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            connections = list(self.connections.values())
            members = {group: dict(m) for group, m in self.members.items()}
        producers_by_topic: dict[str, int] = {}
        consumers_by_topic: dict[str, int] = {}
        for info in connections:
            for topic in info.produced:
                producers_by_topic[topic] = producers_by_topic.get(topic, 0) + 1
            for topic in info.fetched:
                consumers_by_topic[topic] = consumers_by_topic.get(topic, 0) + 1
        return {
            "connections": len(connections),
            "producers": sum(1 for info in connections if info.produced),
            "consumers": sum(1 for info in connections if info.fetched),
            "producers_by_topic": producers_by_topic,
            "consumers_by_topic": consumers_by_topic,
            "members_by_group": {group: len(m) for group, m in members.items()},
            "clients": [{"peer": info.peer, "listener": info.listener, "client_id": info.client_id,
                         "software": info.software, "principal": info.principal,
                         "produced": sorted(info.produced), "fetched": sorted(info.fetched)}
                        for info in connections],
        }
