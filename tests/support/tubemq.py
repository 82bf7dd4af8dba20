"""The embedded broker as a TubeMQ master + broker for tests, and what the tests of TubeMQ share."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fastmq.broker.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from tests.support.servers import TUBEMQ_CLIENT, ServerUnavailable, java_command


@dataclass
class TubeMQCluster:
    embedded: EmbeddedBroker

    @property
    def master(self) -> str:
        host, port = self.embedded.addresses[0]
        return f"{host}:{port}"

    @property
    def broker_address(self) -> tuple[str, int]:
        return self.embedded.addresses[1]

    def front_end(self, role: str):
        """role: "master" or "broker"."""
        return self.embedded.broker.front_end(f"tubemq-{role}")


def start_tubemq(partitions: int = 4, *, with_kafka: bool = False, **options) -> TubeMQCluster:
    """An embedded broker with a TubeMQ master and broker listener (and a Kafka one after them, if asked)."""
    listeners = [ListenerConfig(protocol="tubemq-master"), ListenerConfig(protocol="tubemq-broker")]
    if with_kafka:
        listeners.append(ListenerConfig(protocol="kafka"))
    return TubeMQCluster(EmbeddedBroker(listeners=listeners, num_partitions=partitions, **options).start())


JAVA_PEER_SOURCE = Path(__file__).resolve().parents[1] / "tubemq_java" / "TubeMQPeer.java"


def java_peer_classpath() -> str:
    """tests/tubemq_java/TubeMQPeer.java compiled against the TubeMQ Java client (fetched first if missing), once
    per version of the source: the classpath to run it with."""
    library = TUBEMQ_CLIENT.classpath()
    if shutil.which("javac") is None:
        raise ServerUnavailable("javac is needed to compile tests/tubemq_java (apt-get install openjdk-17-jdk-headless)")
    digest = hashlib.sha256(JAVA_PEER_SOURCE.read_bytes()).hexdigest()[:16]
    classes = TUBEMQ_CLIENT.directory / f"peer-{digest}"
    if not (classes / "TubeMQPeer.class").exists():
        staging = Path(tempfile.mkdtemp(prefix="peer-", dir=TUBEMQ_CLIENT.directory))
        done = subprocess.run(["javac", "-d", str(staging), "-cp", library, str(JAVA_PEER_SOURCE)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ServerUnavailable(f"compiling {JAVA_PEER_SOURCE} failed:\n{done.stdout}{done.stderr}")
        try:
            staging.rename(classes)
        except OSError:             # another process compiled it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return f"{library}:{classes}"


def run_java_peer(*args: str, timeout: float = 150.0) -> list[str]:
    """Run TubeMQPeer with args; its output lines (ServerUnavailable with the output when it fails)."""
    command = java_command(java_peer_classpath(), "TubeMQPeer", *args, heap="256m")
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not done.stdout.rstrip().splitlines()[-1:][0].startswith("DONE"):
        raise AssertionError(f"TubeMQPeer {' '.join(args)} failed (exit {done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done.stdout.splitlines()
