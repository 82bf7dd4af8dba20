"""The embedded broker as a TubeMQ master + broker for tests, and what the tests of TubeMQ share."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from fastmq.broker.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from tests.support.servers import (
    TUBEMQ_CLIENT,
    TUBEMQ_SERVER,
    ServerProcess,
    ServerUnavailable,
    free_port,
    java_command,
)
from tests.support.waiting import wait_for

# The master's steps for a broker (StepStatus of TubeMQ 2.4.0): its configuration was pushed in either.
STEP_WAIT_SUBSCRIBE, STEP_WAIT_PUBLISH = 4, 5


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
        raise ServerUnavailable("javac is needed to compile tests/tubemq_java "
                                "(apt-get install openjdk-17-jdk-headless)")
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


class JavaPeer:
    """TubeMQPeer running with args beside the test (its output in temporary files, not pipes that could fill
    while nobody reads them); finish() waits for it and returns its output lines."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.stdout = tempfile.TemporaryFile()
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(java_command(java_peer_classpath(), "TubeMQPeer", *args, heap="256m"),
                                        stdin=subprocess.DEVNULL, stdout=self.stdout, stderr=self.stderr)

    def output(self) -> str:
        self.stdout.seek(0)
        return self.stdout.read().decode("utf-8", "replace")

    def finish(self, timeout: float = 150.0) -> list[str]:
        """Its output lines once it ended (AssertionError with its output when it failed)."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        out = self.output()
        if self.process.returncode != 0 or not out.rstrip().splitlines()[-1:][0].startswith("DONE"):
            self.stderr.seek(0)
            raise AssertionError(f"TubeMQPeer {' '.join(self.args)} failed (exit {self.process.returncode}):\n"
                                 f"{out[-3000:]}\n{self.stderr.read().decode('utf-8', 'replace')[-6000:]}")
        return out.splitlines()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stdout.close()
        self.stderr.close()

    def __enter__(self) -> JavaPeer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def run_java_peer(*args: str, timeout: float = 150.0) -> list[str]:
    """Run TubeMQPeer with args to its end; its output lines."""
    with JavaPeer(*args) as peer:
        return peer.finish(timeout)


class RealTubeMQ:
    """Apache InLong TubeMQ 2.4.0: one master (BDB metadata, no ZooKeeper) and one broker on 127.0.0.1, started
    from the cached jars with their ini files in a temporary directory; `topics` declared through the master's
    web API before the broker starts.

    Admission in seconds, not 35: a broker that registers without topic configuration (a new one) is held by the
    master in step wait_sub for a hard-coded 30 s, then wait_pub 5 s (StepStatus), and no master.ini key changes
    that. But a broker that registers carrying the configuration it already holds takes the master's fast path:
    its topics go into the publish and subscribe views at registration, and wait_sub ends at once. A running
    broker registers again, with its configuration, when its master restarts. So start() waits until the master
    has pushed the broker its configuration (step wait_sub), restarts the master (same BDB metadata), and the
    broker is admitted a few seconds later."""

    TOKEN = "fastmq"

    def __init__(self, topics: tuple[str, ...], partitions: int = 4) -> None:
        self.topics, self.partitions = topics, partitions
        self.work = Path(tempfile.mkdtemp(prefix="tubemq-server-"))
        (self.port, self.web_port, rep_port, master_prom, self.broker_port, self.broker_web_port, broker_prom) = (
            free_port() for _ in range(7))
        for name, text in (("screen", "$sb"), ("layout", "$screen_placeholder")):
            template = self.work / "web" / "templates" / name / "webapi.vm"
            template.parent.mkdir(parents=True)
            template.write_text(text)
        (self.work / "master.ini").write_text(
            f"[master]\nhostName=127.0.0.1\nport={self.port}\nwebPort={self.web_port}\nconfModAuthToken={self.TOKEN}\n"
            f"webResourcePath={self.work / 'web'}\nconsumerBalancePeriodMs=1000\n[meta_bdb]\nrepGroupName=fastmq\n"
            f"repNodeName=fastmq1\nrepNodePort={rep_port}\nrepHelperHost=127.0.0.1:{rep_port}\n"
            f"metaDataPath={self.work / 'meta'}\n[prometheus]\npromEnable=true\npromHttpPort={master_prom}\n")
        (self.work / "broker.ini").write_text(
            f"[broker]\nbrokerId=1\nhostName=127.0.0.1\nport={self.broker_port}\nwebPort={self.broker_web_port}\n"
            f"masterAddressList=127.0.0.1:{self.port}\nprimaryPath={self.work / 'data'}\n"
            f"maxSegmentSize=1073741824\ntransferSize=524288\nheartbeatPeriodMs=1000\n[audit]\nauditEnable=false\n"
            f"[prometheus]\npromEnable=true\npromHttpPort={broker_prom}\n")
        classpath = TUBEMQ_SERVER.classpath()
        self.master = ServerProcess("tubemq-master", java_command(
            classpath, "org.apache.inlong.tubemq.server.tools.MasterStartup", "-f", str(self.work / "master.ini"),
            heap="256m"), self.work / "master.log", self._master_answers, cwd=self.work)
        self.broker = ServerProcess("tubemq-broker", java_command(
            classpath, "org.apache.inlong.tubemq.server.tools.BrokerStartup", "-f", str(self.work / "broker.ini"),
            heap="384m", options=["-XX:MaxDirectMemorySize=256m"]), self.work / "broker.log", lambda: True,
            cwd=self.work)

    @property
    def master_address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def web(self, method: str, kind: str = "op_modify", **params) -> dict:
        data = urllib.parse.urlencode({"type": kind, "method": method, "confModAuthToken": self.TOKEN,
                                       **params}).encode()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/webapi.htm", data, timeout=10) as reply:
            answer = json.loads(reply.read())
        if not answer.get("result"):
            raise ServerUnavailable(f"TubeMQ master web API {method} refused: {answer}")
        return answer

    def _master_answers(self) -> bool:
        try:
            self.web("admin_query_cluster_topic_view", kind="op_query")
            return True
        except OSError:
            return False

    def start(self) -> RealTubeMQ:
        self.master.start()
        self.web("admin_add_broker_configure", brokerId=1, brokerIp="127.0.0.1", brokerPort=self.broker_port,
                 brokerWebPort=self.broker_web_port, numPartitions=self.partitions, acceptPublish="true",
                 acceptSubscribe="true", createUser="fastmq")
        self.web("admin_online_broker_configure", brokerId=1, modifyUser="fastmq")
        for topic in self.topics:
            self.web("admin_add_new_topic_record", topicName=topic, brokerId=1, numPartitions=self.partitions,
                     createUser="fastmq")
        self.broker.start()
        wait_for(lambda: self._broker_step() in (STEP_WAIT_SUBSCRIBE, STEP_WAIT_PUBLISH), timeout=30, interval=0.2,
                 message=lambda: f"the master pushing the broker its configuration; broker log:\n"
                                 f"{self.broker.log_tail()}")
        self.master.kill()          # no need for a clean shutdown: BDB recovers its log at start
        self.master.start()
        return self

    def _broker_step(self) -> int | None:
        """The broker's step in the master's state machine (stepOp; absent when idle)."""
        status = self.web("admin_query_broker_run_status", kind="op_query", brokerId=1)["data"]
        return status[0].get("stepOp") if status else None

    def stop(self) -> None:
        self.broker.kill()          # their files are deleted next: a clean shutdown would only cost seconds
        self.master.kill()
        shutil.rmtree(self.work, ignore_errors=True)
