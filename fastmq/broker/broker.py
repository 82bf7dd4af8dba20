"""The embedded broker: the store, the broker's core services (topics, offsets, groups, statistics, connections)
and its front ends, one per protocol its listeners name, started and stopped together.

    with EmbeddedBroker() as broker:                 # a temporary directory and a free port
        producer = Producer(broker.bootstrap_servers)

Threads: one I/O loop runs every front end and the group manager; the store's flush threads answer produces that
wait for their fsync; the config writer persists offsets and the broker's files. Nothing a client sends blocks
the I/O loop on the disk: fsync happens on those other threads. The core imports no front end: it finds them by
protocol name in fastmq.broker.frontends.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from fastmq.broker.auth import Authenticator
from fastmq.broker.config import BrokerConfig, ListenerConfig
from fastmq.broker.frontends import DEFAULT_PROTOCOL, FrontEnd, front_end_class
from fastmq.broker.groups import GroupManager, GroupSettings, Member
from fastmq.broker.idempotence import ProducerStateManager
from fastmq.broker.offsets import OffsetStore
from fastmq.broker.periodic import PeriodicWork
from fastmq.broker.persist import ConfigWriter
from fastmq.broker.stats import BrokerStats, ConnectionRegistry
from fastmq.broker.topics import TopicManager
from fastmq.closeable import Closeable
from fastmq.io import IOLoop
from fastmq.store import MessageStore, SubscriptionGroupConfig
from fastmq.store.config import ConfigManager, _require_dict, write_atomically

log = logging.getLogger(__name__)

STATS_FILE = "stats.json"


class BrokerIdentityFile(ConfigManager):
    """config/kafkaBroker.json: the cluster id, chosen once (Kafka keeps it in meta.properties)."""

    file_name = "kafkaBroker.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.cluster_id = ""

    def encode(self) -> dict[Any, Any]:
        return {"clusterId": self.cluster_id}

    def decode(self, obj: Any) -> None:
        self.cluster_id = str(_require_dict(obj, self.file_name).get("clusterId", ""))


class StatsFile:
    """{data_dir}/stats.json: the latest statistics, for `fastmq broker-stats` while the broker runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.snapshot: dict[str, Any] = {}

    def persist(self) -> None:
        write_atomically(self.path, json.dumps(self.snapshot, indent=2, sort_keys=True))


def read_stats(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The statistics a broker running on data_dir last wrote."""
    stats: dict[str, Any] = json.loads((Path(data_dir) / STATS_FILE).read_text("utf-8"))
    return stats


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        config.validate()
        self.config = config
        self.clock = time.time
        self.front_ends: list[FrontEnd] = []
        self._addresses: dict[int, tuple[str, int]] = {}     # id(listener config) -> bound (host, port)
        self._closed = False
        self.store = MessageStore(config.data_dir, config.store_config())
        self.loop = IOLoop("fastmq-broker")
        self._periodic = PeriodicWork(self.loop)
        self.writer = ConfigWriter()
        try:
            identity = BrokerIdentityFile(self.store.root / "config")
            identity.load()
            if not identity.cluster_id:
                identity.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
                identity.persist()
            self.cluster_id = identity.cluster_id
            self.topics = TopicManager(self.store, config.num_partitions)
            self.offsets = OffsetStore(self.store, self.writer, self.clock)
            self.producers = ProducerStateManager(self.store, self.writer, config.producer_id_expiration_ms,
                                                  self.clock)
            self.stats = BrokerStats(self.clock)
            self.connections = ConnectionRegistry(self.clock)
            self._stats_file = StatsFile(self.store.root / STATS_FILE)
            self.authenticator = (Authenticator(config.users, config.sasl_mechanisms, config.scram_iterations)
                                  if config.users else None)
            self.groups = GroupManager(self.loop, GroupSettings(
                config.group_initial_rebalance_delay_ms, config.group_min_session_timeout_ms,
                config.group_max_session_timeout_ms, config.group_max_size))
            self.groups.membership_listeners.append(self._member_changed)
            for forget in (self.offsets.forget_topic, self.producers.forget_topic, self.stats.forget_topic):
                self.topics.deletion_listeners.append(forget)
            by_protocol: dict[str, list[ListenerConfig]] = {}
            for listener in config.listeners:
                by_protocol.setdefault(listener.protocol, []).append(listener)
            for protocol, listeners in by_protocol.items():
                self.front_ends.append(front_end_class(protocol)(self, listeners))
            self.loop.start()
            for front in self.front_ends:
                front.start()
                for listener, address in zip(front.listeners, front.addresses):
                    self._addresses[id(listener)] = address
            intervals = [ms for ms in (config.producer_state_snapshot_interval_ms, config.stats_interval_ms) if ms > 0]
            if intervals:
                self._periodic.every("broker upkeep", min(intervals) / 1000.0, self._upkeep)
        except BaseException:
            self.close()
            raise
        log.info("broker started on %s (data in %s)", ", ".join(
            f"{listener.protocol}://{host}:{port} ({listener.security_protocol})"
            for listener, (host, port) in self.listeners), self.store.root)

    # -- addresses and statistics -----------------------------------------------------------------------------

    def front_end(self, protocol: str) -> FrontEnd:
        """The front end serving a protocol's listeners."""
        for front in self.front_ends:
            if front.listeners[0].protocol == protocol:
                return front
        raise KeyError(f"no listener speaks {protocol}")

    @property
    def listeners(self) -> list[tuple[ListenerConfig, tuple[str, int]]]:
        """Every listener with its bound (host, port), in the order configured."""
        return [(listener, self._addresses[id(listener)]) for listener in self.config.listeners]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The bound (host, port) of every listener, in the order configured."""
        return [address for _listener, address in self.listeners]

    @property
    def bootstrap_servers(self) -> str:
        """Where clients of the default protocol (Kafka's bootstrap.servers) start: its first listener."""
        return self.advertised_address(DEFAULT_PROTOCOL)

    def advertised_address(self, protocol: str) -> str:
        """host:port that the first listener speaking a protocol advertises."""
        for listener, address in self.listeners:
            if listener.protocol == protocol:
                host, port = listener.advertised(address)
                return f"{host}:{port}"
        raise KeyError(f"no listener speaks {protocol}")

    def stats_snapshot(self) -> dict[str, Any]:
        """Per topic and group: messages and bytes put and got, TPS over 10 s and 60 s; clients and members."""
        snapshot = self.stats.snapshot()
        snapshot["clients"] = self.connections.snapshot()
        for front in self.front_ends:
            snapshot.update(front.stats())
        snapshot["groups_state"] = {group_id: {"state": group.state, "generation": group.generation,
                                               "members": len(group.members)}
                                    for group_id, group in list(self.groups.groups.items())}
        return snapshot

    def _member_changed(self, group_id: str, member: Member, joined: bool) -> None:
        self.stats.member_changed(group_id, member.client_id, joined)
        self.connections.member_changed(group_id, member.member_id, member.client_id, joined)
        if joined:
            self.register_subscription_group(group_id)

    def register_subscription_group(self, group_id: str) -> None:
        """Record a consumer group in subscriptionGroup.json the first time it is seen (seed 003, 4.3), where
        RocketMQ tools and front ends find it; the file is written off the I/O thread."""
        manager = self.store.subscription_group_manager
        if manager.find_subscription_group_config(group_id) is None:
            with manager.lock:
                manager.subscription_group_table[group_id] = SubscriptionGroupConfig(group_id)
                manager.data_version.next_version()
            self.writer.write(manager)

    def forget_subscription_group(self, group_id: str) -> None:
        manager = self.store.subscription_group_manager
        with manager.lock:
            if manager.subscription_group_table.pop(group_id, None) is None:
                return
            manager.data_version.next_version()
        self.writer.write(manager)

    def known_groups(self) -> set[str]:
        """Groups with members, committed offsets or a subscription-group entry."""
        return (set(self.groups.groups) | self.offsets.groups()
                | set(self.store.subscription_group_manager.subscription_group_table))

    def _upkeep(self) -> None:
        self.producers.save()
        for front in self.front_ends:
            front.upkeep()
        if self.config.stats_interval_ms > 0:
            self._stats_file.snapshot = self.stats_snapshot()
            self.writer.write(self._stats_file)

    # -- shutdown ---------------------------------------------------------------------------------------------

    def _stop_in_loop(self) -> None:
        self._periodic.stop()
        for front in self.front_ends:
            try:
                front.close()
            except Exception:
                log.exception("closing the %s front end failed", type(front).__name__)
        self.groups.close()
        self.producers.save(wait=True)
        if self.config.stats_interval_ms > 0:
            self._stats_file.snapshot = self.stats_snapshot()
            self._stats_file.persist()

    def close(self) -> None:
        """Stop listening, answer what waits, write the broker's state and close the store (clean shutdown)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.loop.running and hasattr(self, "groups"):
                self.loop.run_in_loop(self._stop_in_loop, timeout=30)
        except Exception:
            log.exception("stopping the broker's services failed")
        self.loop.close(timeout=10)
        self.writer.close()
        self.store.close()
        log.info("broker on %s stopped", self.store.root)

    @property
    def closed(self) -> bool:
        return self._closed


class EmbeddedBroker(Closeable):
    """A broker in this process for tests, tools and the main job: a temporary data directory (removed at close)
    unless data_dir is given, one kafka listener on a free port of 127.0.0.1 unless host and port, or listeners
    (ListenerConfigs, each naming its protocol), are given. Other BrokerConfig options pass through as keywords."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 config: BrokerConfig | None = None, **options: Any) -> None:
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        if config is None:
            if data_dir is None:
                self._temporary = tempfile.TemporaryDirectory(prefix="fastmq-broker-")
                data_dir = self._temporary.name
            options.setdefault("listeners", [ListenerConfig(host, port)])
            config = BrokerConfig(data_dir=os.fspath(data_dir), **options)
        self.config = config
        self.broker: Broker | None = None

    def start(self) -> EmbeddedBroker:
        if self.broker is None or self.broker.closed:
            self.broker = Broker(self.config)
            # A restart keeps the ports, so that clients find the broker where it was.
            for listener, (_host, port) in zip(self.config.listeners, self.broker.addresses):
                listener.port = port
        return self

    def restart(self) -> EmbeddedBroker:
        """Close (cleanly) and start again on the same data directory and ports."""
        if self.broker is not None:
            self.broker.close()
        self.broker = None
        return self.start()

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir)

    @property
    def bootstrap_servers(self) -> str:
        if self.broker is None:
            raise RuntimeError("the broker is not started: use `with EmbeddedBroker() as broker` or start()")
        return self.broker.bootstrap_servers

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return self.broker.addresses if self.broker is not None else []

    def address(self, protocol: str) -> str:
        """host:port that the first listener speaking a protocol advertises ("kafka", "rocketmq", "namesrv")."""
        if self.broker is None:
            raise RuntimeError("the broker is not started")
        return self.broker.advertised_address(protocol)

    def stats(self) -> dict[str, Any]:
        if self.broker is None:
            raise RuntimeError("the broker is not started")
        stats: dict[str, Any] = self.broker.loop.run_in_loop(self.broker.stats_snapshot, timeout=10)
        return stats

    def close(self) -> None:
        if self.broker is not None:
            self.broker.close()
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()
