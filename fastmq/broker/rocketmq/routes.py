"""The namesrv's state (seed 003, Registry chapter 4): which brokers live, which topics they serve, and the KV
config of ordered topics.

Five tables, as the seed and RocketMQ's RouteInfoManager keep them:
    cluster_addr   cluster name -> broker names
    broker_addr    broker name -> BrokerData (cluster, {broker id: "ip:port"}; id 0 is the master)
    topic_queue    topic -> {broker name: QueueData (read/write queue numbers, perm, topicSysFlag)}
    broker_live    "ip:port" -> BrokerLive (last heartbeat, data version, the connection it came on)
    filter_server  "ip:port" -> filter server addresses (kept for the route's filterServerTable; always empty here)
A broker registers at start and every 30 s after (a heartbeat, carrying its topics); scan_not_active drops a
broker silent for BROKER_EXPIRED_S (2 minutes) with everything it served. Brokers registering again with the same
data version only refresh their heartbeat. A registration adds and updates the topics it carries and drops none,
as Apache's namesrv does by default (deleteTopicWithBrokerRegistration=false): Apache's 5.x brokers register only
the topics just created (BrokerController.registerIncrementBrokerData). A topic leaves a broker's routes with
DELETE_TOPIC_IN_NAMESRV (delete_topic, for one cluster's brokers or all), remove_topic_of, or its broker's
unregistration or expiry. All of this lives in memory; the KV config (namespace -> key -> value;
the namespace ORDER_TOPIC_CONFIG holds "brokerName:queueNums;..." per ordered topic) is persisted in
config/namesrvKV.json, as RocketMQ keeps kvConfig.json.

Thread-safety: everything runs on the broker's I/O thread except route()/cluster_info() which a lock protects too.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fastmq.rocketmq.protocol import MASTER_ID
from fastmq.store.config import ConfigManager, _require_dict

BROKER_EXPIRED_S = 120.0
SCAN_INTERVAL_S = 10.0
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


@dataclasses.dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm, "topicSysFlag": self.topic_sys_flag}


@dataclasses.dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Keys as JSON strings; the codec's encoder writes them bare for clients older than 4.0.1 when asked.
        return {"cluster": self.cluster, "brokerName": self.broker_name,
                "brokerAddrs": {str(broker_id): addr for broker_id, addr in sorted(self.broker_addrs.items())}}


@dataclasses.dataclass
class BrokerLive:
    last_update: float
    data_version: Any
    connection: Any           # the connection the registration came on (None for an in-process broker)
    ha_server_addr: str = ""


@dataclasses.dataclass(frozen=True)
class Registration:
    """What one REGISTER_BROKER says: who the broker is and the topics it serves (name -> QueueData fields)."""

    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int
    topics: dict[str, QueueData]
    data_version: Any = None
    ha_server_addr: str = ""


class KVConfigFile(ConfigManager):
    """config/namesrvKV.json: {"configTable": {namespace: {key: value}}} (RocketMQ's kvConfig.json)."""

    file_name = "namesrvKV.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.table: dict[str, dict[str, str]] = {}

    def encode(self) -> dict[Any, Any]:
        return {"configTable": self.table}

    def decode(self, obj: Any) -> None:
        table = _require_dict(_require_dict(obj, self.file_name).get("configTable", {}), "configTable")
        self.table = {str(ns): {str(k): str(v) for k, v in _require_dict(entries, ns).items()}
                      for ns, entries in table.items()}


class RouteTables:
    def __init__(self, kv_file: KVConfigFile, persist: Callable[[Any], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.RLock()
        self._clock = clock
        self._kv = kv_file
        kv_file.load()
        self._persist = persist           # ConfigWriter.write: the KV file is written off the I/O thread
        self.cluster_addr: dict[str, set[str]] = {}
        self.broker_addr: dict[str, BrokerData] = {}
        self.topic_queue: dict[str, dict[str, QueueData]] = {}
        self.broker_live: dict[str, BrokerLive] = {}
        self.filter_server: dict[str, list[str]] = {}

    # -- brokers ----------------------------------------------------------------------------------------------

    def register(self, registration: Registration, connection: Any = None) -> BrokerData:
        """A broker's registration or heartbeat: update the five tables; returns the broker's BrokerData (its
        master address tells a slave where to replicate from)."""
        with self._lock:
            self.cluster_addr.setdefault(registration.cluster, set()).add(registration.broker_name)
            broker = self.broker_addr.get(registration.broker_name)
            if broker is None:
                broker = self.broker_addr[registration.broker_name] = BrokerData(registration.cluster,
                                                                                 registration.broker_name)
            broker.cluster = registration.cluster
            # A broker id that moved to another address (a slave became master) leaves its old entry.
            for broker_id, addr in list(broker.broker_addrs.items()):
                if addr == registration.broker_addr and broker_id != registration.broker_id:
                    del broker.broker_addrs[broker_id]
            broker.broker_addrs[registration.broker_id] = registration.broker_addr
            live = self.broker_live.get(registration.broker_addr)
            changed = live is None or live.data_version != registration.data_version \
                or registration.data_version is None
            if registration.broker_id == MASTER_ID and changed:
                for topic, queue_data in registration.topics.items():
                    self.topic_queue.setdefault(topic, {})[registration.broker_name] = queue_data
            self.broker_live[registration.broker_addr] = BrokerLive(
                self._clock(), registration.data_version, connection, registration.ha_server_addr)
            return broker

    def unregister(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> None:
        with self._lock:
            self.broker_live.pop(broker_addr, None)
            self.filter_server.pop(broker_addr, None)
            broker = self.broker_addr.get(broker_name)
            if broker is None:
                return
            if broker.broker_addrs.get(broker_id) == broker_addr:
                del broker.broker_addrs[broker_id]
            if not broker.broker_addrs:
                del self.broker_addr[broker_name]
                names = self.cluster_addr.get(cluster)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr[cluster]
                for topic in list(self.topic_queue):
                    self.remove_topic_of(topic, broker_name)

    def remove_topic_of(self, topic: str, broker_name: str) -> None:
        """The broker no longer serves the topic (it was deleted there)."""
        with self._lock:
            queues = self.topic_queue.get(topic)
            if queues is not None and queues.pop(broker_name, None) is not None and not queues:
                del self.topic_queue[topic]

    def scan_not_active(self) -> list[str]:
        """Drop every broker silent for BROKER_EXPIRED_S; returns their addresses (their connections are to be
        closed by the caller)."""
        now = self._clock()
        dropped = []
        with self._lock:
            for addr, live in list(self.broker_live.items()):
                if now - live.last_update > BROKER_EXPIRED_S:
                    dropped.append(addr)
                    self._forget_addr(addr)
        return dropped

    def connection_closed(self, connection: Any) -> None:
        """A broker's connection closed: it is gone (RocketMQ's onChannelDestroy)."""
        with self._lock:
            for addr, live in list(self.broker_live.items()):
                if live.connection is connection:
                    self._forget_addr(addr)

    def _forget_addr(self, addr: str) -> None:
        for broker in list(self.broker_addr.values()):
            for broker_id, broker_addr in list(broker.broker_addrs.items()):
                if broker_addr == addr:
                    self.unregister(broker.cluster, broker.broker_name, addr, broker_id)
        self.broker_live.pop(addr, None)

    def delete_topic(self, topic: str, cluster: str = "") -> None:
        """DELETE_TOPIC_IN_NAMESRV: the topic leaves the routes of the cluster's brokers, or of all brokers."""
        with self._lock:
            if not cluster:
                self.topic_queue.pop(topic, None)
            for broker_name in self.cluster_addr.get(cluster, ()):
                self.remove_topic_of(topic, broker_name)

    # -- queries ----------------------------------------------------------------------------------------------

    def route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData as JSON, None if no live broker serves the topic."""
        with self._lock:
            queues = self.topic_queue.get(topic)
            if not queues:
                return None
            brokers = [self.broker_addr[name].to_json() for name in sorted(queues) if name in self.broker_addr]
            if not brokers:
                return None
            route: dict[str, Any] = {
                "queueDatas": [queues[name].to_json() for name in sorted(queues)],
                "brokerDatas": brokers,
                "filterServerTable": {},
            }
            order = self.kv_get(ORDER_TOPIC_CONFIG, topic)
            if order is not None:
                route["orderTopicConf"] = order
            return route

    def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo as JSON: brokerAddrTable and clusterAddrTable."""
        with self._lock:
            return {"brokerAddrTable": {name: data.to_json() for name, data in sorted(self.broker_addr.items())},
                    "clusterAddrTable": {name: sorted(names) for name, names in sorted(self.cluster_addr.items())}}

    def topics(self) -> list[str]:
        with self._lock:
            return sorted(self.topic_queue)

    # -- KV config --------------------------------------------------------------------------------------------

    def kv_put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self._kv.table.setdefault(namespace, {})[key] = value
        self._persist(self._kv)

    def kv_get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._kv.table.get(namespace, {}).get(key)

    def kv_delete(self, namespace: str, key: str) -> None:
        with self._lock:
            entries = self._kv.table.get(namespace)
            if entries is None or entries.pop(key, None) is None:
                return
            if not entries:
                del self._kv.table[namespace]
        self._persist(self._kv)

    def kv_namespace(self, namespace: str) -> dict[str, str]:
        with self._lock:
            return dict(self._kv.table.get(namespace, {}))
