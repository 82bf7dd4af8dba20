"""Apache Kafka in KRaft mode, the reference broker of the interop tests: one combined broker/controller node, or
a cluster of nodes (one process each) over a controller quorum, on free 127.0.0.1 ports.

Every node has a PLAINTEXT listener (inter-broker traffic, test set-up). Given a Security, it also has SSL,
SASL_PLAINTEXT and SASL_SSL listeners (PEM keystore; PLAIN and SCRAM-SHA-256/512 users). A proxy_port makes a
PROXIED listener whose advertised address is that port: a FaultProxy there forwarding to the listener puts every
connection of the clients that bootstrap through it under the proxy's control.
"""
from __future__ import annotations

import base64
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from fastmq.kafka import protocol as kp

from tests.support.kafka_wire import Wire
from tests.support.servers import APACHE_KAFKA, ServerProcess, free_port, java_command, run_java

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
METADATA = 3
# Apache makes each active segment's offset and time index a sparse file of log.index.size.max.bytes (10 MiB by
# default) and maps it. This machine's disk reads ahead 8 MiB, so the first write to an index page zero-fills
# 8 MiB of page cache: 16 MiB and ~9 ms of broker CPU per partition. 64 KiB still holds more entries than a
# 16 MiB segment makes (one per 4 KiB of records), so segments roll on size as before.
INDEX_BYTES = 65536


@dataclass(frozen=True)
class Security:
    """TLS and SASL for the extra listeners: a PEM file with the unencrypted PKCS#8 key followed by the
    certificate chain, and the users (name -> password) known to PLAIN and to both SCRAM mechanisms."""

    keystore_pem: Path
    users: Mapping[str, str]


def _cluster_id() -> str:
    # Base64url of a UUID: one id in 64 starts with "-", which the storage tool must not read as an option (it is
    # passed as --cluster-id=ID for that reason).
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


@dataclass
class KafkaNode:
    """One Kafka process: .bootstrap_servers (PLAINTEXT), .listener(name) for the others; kill() is kill -9,
    start() (re)starts it on the same ports and data."""

    node_id: int
    directory: Path
    ports: dict[str, int]
    process: ServerProcess = field(init=False)

    def listener(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    @property
    def bootstrap_servers(self) -> str:
        return self.listener("PLAINTEXT")

    @property
    def running(self) -> bool:
        return self.process.running

    def start(self) -> None:
        self.process.start()

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> None:
        self.process.stop()

    def log_tail(self, limit: int = 6000) -> str:
        return self.process.log_tail(limit)


class KafkaCluster:
    """`size` nodes; each is a broker, and the first min(size, 3) are also the controller quorum's voters.
    With size 1 this is the single combined node. `properties` are added to (or replace) every node's
server.properties (an authorizer, say); `log_dirs` is the number of log directories per node. Use as a context
manager or call start() and stop()."""

    def __init__(self, directory: Path, size: int = 1, *, security: Security | None = None,
                 proxy_port: int | None = None, properties: Mapping[str, object] | None = None,
                 heap: str = "512m", log_dirs: int = 1, jvm_options: Sequence[str] = ()) -> None:
        """jvm_options: more JVM options for every node (later options override the kit's: benches give
        SERVER_JIT, so that the broker's code is compiled as Apache's own scripts run it)."""
        self.directory = Path(directory)
        self.log_dirs = log_dirs
        self.security = security
        self.proxy_port = proxy_port
        self.heap = heap
        self.cluster_id = _cluster_id()
        listeners = ["PLAINTEXT", "CONTROLLER"]
        if security is not None:
            listeners += ["SSL", "SASL_PLAINTEXT", "SASL_SSL"]
        if proxy_port is not None:
            listeners.append("PROXIED")
        self.nodes = [KafkaNode(node_id, self.directory / f"node-{node_id}", {name: free_port() for name in listeners})
                      for node_id in range(1, size + 1)]
        voters = self.nodes[:3]
        self.quorum = ",".join(f"{node.node_id}@127.0.0.1:{node.ports['CONTROLLER']}" for node in voters)
        replicas = min(size, 3)
        self.properties: dict[str, object] = {
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(replicas, 2),
            "transaction.state.log.num.partitions": 4,
            "default.replication.factor": 1,
            "num.partitions": 4,        # as Tansu and the embedded broker auto-create topics: tests see one shape
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "true",
            "log.segment.bytes": 16 << 20,
            "log.index.size.max.bytes": INDEX_BYTES,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min(replicas, 2),
        }
        self.properties.update(properties or {})
        for node in self.nodes:
            node.process = ServerProcess(
                f"Apache Kafka node {node.node_id}",
                java_command(APACHE_KAFKA.classpath(), "kafka.Kafka", str(node.directory / "server.properties"),
                             heap=heap, options=("-Dlog4j2.level=INFO", *jvm_options)),
                node.directory / "kafka.log", ready=lambda node=node: self._answers(node, len(self.nodes)))

    host = "127.0.0.1"

    @property
    def port(self) -> int:
        """The first node's PLAINTEXT port."""
        return self.nodes[0].ports["PLAINTEXT"]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes)

    def listener(self, name: str) -> str:
        return ",".join(node.listener(name) for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def _server_properties(self, node: KafkaNode) -> dict[str, object]:
        names = list(node.ports)
        protocols = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", "SSL": "SSL",
                     "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "PROXIED": "PLAINTEXT"}
        advertised = {name: node.ports[name] for name in names if name != "CONTROLLER"}
        if self.proxy_port is not None:
            advertised["PROXIED"] = self.proxy_port
        is_voter = node in self.nodes[:3]
        properties: dict[str, object] = {
            "process.roles": "broker,controller" if is_voter else "broker",
            "node.id": node.node_id,
            "controller.quorum.voters": self.quorum,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(f"{name}://127.0.0.1:{node.ports[name]}" for name in names
                                  if name != "CONTROLLER" or is_voter),
            "advertised.listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in advertised.items()),
            "listener.security.protocol.map": ",".join(f"{name}:{protocols[name]}" for name in names),
            "log.dirs": ",".join(str(path) for path in self.data_dirs(node)),
            **self.properties,
        }
        if self.security is not None:
            properties.update(self._security_properties())
        return properties

    def data_dirs(self, node: KafkaNode) -> list[Path]:
        """The node's log directories (log_dirs of them: JBOD, for moving replicas between directories)."""
        if self.log_dirs == 1:
            return [node.directory / "data"]
        return [node.directory / f"data-{index}" for index in range(self.log_dirs)]

    def _security_properties(self) -> dict[str, object]:
        assert self.security is not None
        properties: dict[str, object] = {"sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS)}
        for listener in ("ssl", "sasl_ssl"):
            properties[f"listener.name.{listener}.ssl.keystore.type"] = "PEM"
            properties[f"listener.name.{listener}.ssl.keystore.location"] = str(self.security.keystore_pem)
        plain_users = " ".join(f'user_{name}="{_jaas_quote(password)}"'
                               for name, password in self.security.users.items())
        for listener in ("sasl_plaintext", "sasl_ssl"):
            prefix = f"listener.name.{listener}"
            properties[f"{prefix}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};")
            for mechanism in SCRAM_MECHANISMS:
                properties[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        return properties

    def _format(self, node: KafkaNode) -> None:
        """Write the node's server.properties and format its storage (SCRAM users go in here, before the first
        start)."""
        node.directory.mkdir(parents=True, exist_ok=True)
        config = node.directory / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self._server_properties(node).items()))
        scram = []
        if self.security is not None:
            for name, password in self.security.users.items():
                for mechanism in SCRAM_MECHANISMS:
                    scram += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        run_java(APACHE_KAFKA.classpath(), "kafka.tools.StorageTool", "format", "--ignore-formatted",
                 f"--cluster-id={self.cluster_id}", "-c", str(config), *scram)

    @staticmethod
    def _answers(node: KafkaNode, brokers: int) -> bool:
        """The node serves clients: it answers Metadata and knows `brokers` live brokers."""
        try:
            wire = Wire(node.bootstrap_servers, client_id="fastmq-test-ready")
        except OSError:
            return False
        try:
            wire.sock.settimeout(2.0)
            answer = wire.request(METADATA, 1, kp.MetadataRequest(topics=[], allow_auto_topic_creation=False))
            return len(answer.brokers) >= brokers
        except (OSError, ConnectionError):
            return False
        finally:
            wire.close()

    def start(self) -> KafkaCluster:
        """Format every node, launch them all (a quorum needs its voters together), wait until each one
        answers with the whole cluster in its metadata."""
        try:
            with ThreadPoolExecutor(len(self.nodes)) as formatting:
                list(formatting.map(self._format, self.nodes))
            for node in self.nodes:
                node.process.launch()
            for node in self.nodes:
                node.process.await_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def restart(self, node_id: int) -> None:
        """Start a killed or stopped node again on its data; returns when it answers."""
        self.node(node_id).start()

    def kill(self) -> None:
        """Kill every node (the end of a throwaway cluster: a clean shutdown of a quorum takes many seconds)."""
        for node in self.nodes:
            node.kill()

    def log_tails(self, limit: int = 6000) -> list[tuple[str, str]]:
        return [(f"Apache Kafka node {node.node_id} ({node.process.log_path})", node.log_tail(limit))
                for node in self.nodes]

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
