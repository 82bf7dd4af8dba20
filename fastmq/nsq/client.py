"""What the NSQ producer and consumer share: the io loop, one connection per nsqd (per topic partition on Youzan's
NSQ) with reconnect backoff, and where each topic lives, from direct nsqd addresses or from nsqlookupd.

Discovery: with lookupd addresses a lookup thread asks them for every topic in use, every poll interval (jittered
by up to `lookupd_poll_jitter` of it, so that clients do not poll in step), and at once when asked to (a connection
failed, nsqd said the partition moved). Its answers reach the owner on the loop thread through on_topology(topic,
addresses). Direct nsqd addresses serve every topic, without partitions.
"""
from __future__ import annotations

import logging
import random
import threading
from typing import Any, Callable

from fastmq.client.bootstrap import parse_servers
from fastmq.errors import ConfigurationError
from fastmq.io import ConnectionPool, IOLoop
from fastmq.nsq.connection import NSQAdapter, NSQSettings
from fastmq.nsq.errors import NSQConfigurationError, NSQError
from fastmq.nsq.lookup import NO_PARTITION, Lookupd, NSQDAddress, TopicLookup

_log = logging.getLogger(__name__)

Topology = Callable[[str, TopicLookup], Any]


class NSQClient:
    """The loop, the pool and the lookup thread of one producer or consumer."""

    def __init__(self, settings: NSQSettings, *, nsqd_tcp_addresses: str | list[str] | None,
                 lookupd_http_addresses: str | list[str] | None, lookupd_poll_interval_s: float = 60.0,
                 lookupd_poll_jitter: float = 0.3, requests_in_flight: int = 64, name: str = "fastmq-nsq",
                 on_push: Callable[[Any, Any], Any] | None = None, on_topology: Topology | None = None,
                 lookup_access: str | None = None) -> None:
        if not nsqd_tcp_addresses and not lookupd_http_addresses:
            raise NSQConfigurationError("give nsqd_tcp_addresses or lookupd_http_addresses")
        if not 0 <= lookupd_poll_jitter < 1:
            raise NSQConfigurationError(f"lookupd_poll_jitter is in [0, 1), got {lookupd_poll_jitter}")
        self.settings = settings
        try:
            self.direct = [NSQDAddress(host, port) for host, port in parse_servers(nsqd_tcp_addresses, 4150)] \
                if nsqd_tcp_addresses else []
            self.lookupd = Lookupd(lookupd_http_addresses) if lookupd_http_addresses else None
        except ConfigurationError as exc:
            raise NSQConfigurationError(str(exc)) from exc
        self.loop = IOLoop(name=name)
        self.pool = ConnectionPool(
            self.loop, lambda: NSQAdapter(self.settings), ssl_context=None,
            connect_timeout_ms=settings.connect_timeout_ms, request_timeout_ms=settings.request_timeout_ms,
            max_in_flight=requests_in_flight, reconnect_backoff_ms=100, reconnect_backoff_max_ms=8000,
            connections_max_idle_ms=None, on_push=on_push)
        self.poll_interval = lookupd_poll_interval_s
        self.poll_jitter = lookupd_poll_jitter
        self.lookup_access = lookup_access
        self.on_topology = on_topology
        self.topics: dict[str, TopicLookup] = {}        # the latest answer per topic (any thread reads)
        self._watched: set[str] = set()
        self._wake = threading.Condition()
        self._refresh_wanted = False
        self._closed = False
        self._lookup_thread: threading.Thread | None = None
        self.loop.start()
        if self.lookupd is not None:
            self._lookup_thread = threading.Thread(target=self._poll_lookupd, name=f"{name}-lookup", daemon=True)
            self._lookup_thread.start()

    # ---- topology ------------------------------------------------------------------------------------

    def watch(self, topic: str) -> TopicLookup:
        """Start following a topic; returns where it lives now (a blocking lookup the first time)."""
        if self.lookupd is None:
            answer = TopicLookup(list(self.direct))
            self.topics[topic] = answer
            return answer
        with self._wake:
            self._watched.add(topic)
        known = self.topics.get(topic)
        if known is not None and known.addresses:
            return known
        return self._look_up(topic)

    def refresh(self, topic: str | None = None) -> None:
        """Ask the lookup thread to look up again now (any thread)."""
        if self.lookupd is None:
            return
        with self._wake:
            self._refresh_wanted = True
            self._wake.notify()

    def _look_up(self, topic: str) -> TopicLookup:
        assert self.lookupd is not None
        answer = self.lookupd.lookup(topic, access=self.lookup_access, metainfo=True)
        self.topics[topic] = answer
        if self.on_topology is not None:
            self.loop.call_soon_threadsafe(self.on_topology, topic, answer)
        return answer

    def _poll_lookupd(self) -> None:
        assert self.lookupd is not None
        rng = random.Random()
        self.lookupd.discover()
        while True:
            with self._wake:
                delay = self.poll_interval * (1 - rng.uniform(0, self.poll_jitter))
                if not self._refresh_wanted and not self._closed:
                    self._wake.wait(delay)
                if self._closed:
                    return
                self._refresh_wanted = False
                topics = list(self._watched)
            for topic in topics:
                try:
                    self._look_up(topic)
                except NSQError as exc:
                    _log.warning("lookup of %r failed: %s", topic, exc)

    # ---- nodes ---------------------------------------------------------------------------------------

    def add_address(self, address: NSQDAddress) -> tuple[str, int, int]:
        """Loop thread: make the pool know the node of an address (one node per nsqd and partition)."""
        node_id = address.node_id
        if node_id not in self.pool.nodes:
            self.pool.add_node(node_id, address.host, address.tcp_port)
        return node_id

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if not self.loop.closed:
            try:
                self.loop.run_in_loop(self.pool.close, timeout=10.0)
            finally:
                self.loop.close(timeout=10.0)
        if self._lookup_thread is not None:
            self._lookup_thread.join(10.0)


def partition_arg(address: NSQDAddress) -> int | None:
    return None if address.partition == NO_PARTITION else address.partition
