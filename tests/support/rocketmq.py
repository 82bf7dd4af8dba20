"""Apache RocketMQ, the reference server of the RocketMQ client tests: one namesrv and one master broker
(NamesrvStartup and BrokerStartup from the pinned Maven artifacts) on free 127.0.0.1 ports, with small heaps,
64 MiB CommitLog files, auto-created topics and subscription groups, and every delay level at one second (so that
retries and delayed messages arrive in test time), as is the check-back of undecided transactions. The broker also listens on its port - 2 (the "VIP" channel)
and + 1 (HA), so the three are taken free together.
"""
from __future__ import annotations

import os
import socket
import struct
import uuid
from pathlib import Path

from fastmq.rocketmq._native.remoting import decode_command, encode_frame

from tests.support.servers import APACHE_ROCKETMQ, ServerProcess, ServerUnavailable, free_port, java_command
from tests.support.waiting import wait_for

UPDATE_AND_CREATE_TOPIC, GET_ROUTEINFO_BY_TOPIC = 17, 105
DEFAULT_TOPIC = "TBW102"
# Java 17 closes the JDK internals RocketMQ's mmap code and Netty reach into.
JAVA17_OPENS = ("--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED")
DELAY_LEVELS = " ".join(["1s"] * 18)
BIND_ATTEMPTS = 3
# Benches run the broker with Apache's own switch (NettyServerConfig.serverNettyWorkerGroupEnable, 5.3.1+,
# apache/rocketmq#8720, "to improve broker performance and reduce context switching") that decodes requests and
# encodes responses on Netty's I/O thread instead of handing each one to the NettyServerCodecThread group and back.
# A sync send then wakes three broker threads, not four (strace -f of the broker, a round trip: 16.5 -> 12.8
# futex, 3 -> 2 epoll_wait, 4 -> 3 write calls). Per thread from /proc (stop 18, loaded machine): 100-112 -> 62-73 us
# of broker CPU a round trip, the codec threads' 21-28 us gone; in the bench's apache-broker sync rows 126-183 ->
# 88-107 us (four runs each). Every client meets the same broker; the suite keeps Apache's default.
LOW_LATENCY_BROKER = {"serverNettyWorkerGroupEnable": "false"}


def unique(prefix: str) -> str:
    """A topic or group name no other test uses (the session shares one broker)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_ports(attempts: int = 50) -> int:
    """A listen port whose port - 2 and port + 1 are free too."""
    for _ in range(attempts):
        port = free_port()
        if port > 1026 and _port_free(port - 2) and _port_free(port + 1):
            return port
    raise ServerUnavailable("no three free ports (p - 2, p, p + 1) for the RocketMQ broker")


def peer_results(output: str) -> dict[str, dict[str, str]]:
    """The "RESULT scenario key=value ..." lines that the peer client programs (tests/rocketmq_java,
    tests/rocketmq_js) print, as {scenario: {key: value}}."""
    results = {}
    for line in output.splitlines():
        if line.startswith("RESULT "):
            _, scenario, *pairs = line.split()
            results[scenario] = dict(pair.split("=", 1) for pair in pairs)
    return results


def call(address: str, code: int, fields: dict[str, object], timeout: float = 5.0):
    """One request over a plain socket, its answer decoded (readiness checks and test setup use no client code
    under test)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_frame(code, 1, fields))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"{address} closed the connection")
            data += chunk
    return decode_command(data, with_total=True)


def route_of(namesrv: str, topic: str, timeout: float = 2.0):
    """One GET_ROUTEINFO_BY_TOPIC."""
    return call(namesrv, GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout)


def create_topics(broker: str, namesrv: str, *topics: str, queues: int = 4) -> None:
    """Create topics as `mqadmin updateTopic` does (for clients such as ali-ons that, unlike the Java client, do not
    fall back to the TBW102 template when the namesrv has no route) and wait until the namesrv routes them."""
    for topic in topics:
        answer = call(broker, UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": DEFAULT_TOPIC, "readQueueNums": queues, "writeQueueNums": queues,
            "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
        if answer.code != 0:
            raise RuntimeError(f"UPDATE_AND_CREATE_TOPIC {topic} answered {answer.code}: {answer.remark}")
    wait_for(lambda: all(route_of(namesrv, topic).code == 0 for topic in topics), interval=0.05,
             message=f"the namesrv routes {topics}")


class RocketMQCluster:
    """A namesrv (.namesrv_addr) and a broker named broker-a (.broker_addr). Context manager, or start()/stop();
    the broker can be killed and started again on the same store (kill_broker / start_broker)."""

    broker_name = "broker-a"
    cluster_name = "DefaultCluster"

    def __init__(self, directory: Path, *, heap: str = "384m", properties: dict[str, object] | None = None,
                 broker_options: tuple[str, ...] = (), namesrv: str | None = None) -> None:
        """broker_options: more JVM options for the broker (later options override the kit's: benches give
        SERVER_JIT, so that the broker's code is compiled as Apache's own scripts run it). namesrv: "host:port"
        of a namesrv already running (fastmq's) for the broker to register with; then only the broker starts."""
        self.directory = Path(directory)
        self.external_namesrv = namesrv
        self.namesrv_port = free_port() if namesrv is None else int(namesrv.rsplit(":", 1)[1])
        self.broker_port = broker_ports()
        home = self.directory / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, ROCKETMQ_HOME=str(home))
        options = (*JAVA17_OPENS, f"-Drocketmq.home.dir={home}", f"-Duser.home={home}",
                   "-Drocketmq.client.logRoot=" + str(home / "logs"), "-Drocketmq.log.level=WARN")
        (self.directory / "namesrv.conf").write_text(f"listenPort={self.namesrv_port}\n")
        store = self.directory / "store"
        self.properties: dict[str, object] = {
            "brokerClusterName": self.cluster_name, "brokerName": self.broker_name, "brokerId": 0,
            "listenPort": self.broker_port, "haListenPort": self.broker_port + 1, "brokerIP1": "127.0.0.1",
            "namesrvAddr": self.namesrv_addr, "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog", "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true", "mappedFileSizeCommitLog": 64 << 20,
            "mappedFileSizeConsumeQueue": 300000 * 20 // 10, "flushDiskType": "ASYNC_FLUSH",
            "messageDelayLevel": DELAY_LEVELS, "timerWheelEnable": "false", "enableDLegerCommitLog": "false",
            "diskMaxUsedSpaceRatio": 95, "sendMessageThreadPoolNums": 2, "pullMessageThreadPoolNums": 4,
            "waitTimeMillsInSendQueue": 3000, "defaultTopicQueueNums": 4, "brokerPermission": 6,
            # undecided half messages are checked back with their producer after one second, every second
            "transactionTimeOut": 1000, "transactionCheckInterval": 1000,
            # an administrator's offset reset goes to the consumers as RESET_CONSUMER_CLIENT_OFFSET (as 4.x and
            # the embedded broker do), not as offsets the broker swaps into their next pulls (5.x's default)
            "useServerSideResetOffset": "false",
        }
        self.properties.update(properties or {})
        self._write_broker_conf()
        classpath = APACHE_ROCKETMQ.classpath()
        self.namesrv = ServerProcess(
            "Apache RocketMQ namesrv",
            java_command(classpath, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c",
                         str(self.directory / "namesrv.conf"), heap="192m", options=options),
            self.directory / "namesrv.log", ready=self._namesrv_answers, env=env)
        self.broker = ServerProcess(
            "Apache RocketMQ broker",
            java_command(classpath, "org.apache.rocketmq.broker.BrokerStartup", "-c",
                         str(self.directory / "broker.conf"), heap=heap, options=(*options, *broker_options)),
            self.directory / "broker.log", ready=self._broker_registered, env=env, start_timeout=120.0)

    def _write_broker_conf(self) -> None:
        self.properties.update(listenPort=self.broker_port, haListenPort=self.broker_port + 1)
        (self.directory / "broker.conf").write_text(
            "".join(f"{key}={value}\n" for key, value in self.properties.items()))

    @property
    def namesrv_addr(self) -> str:
        return self.external_namesrv or f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def _namesrv_answers(self) -> bool:
        try:
            route_of(self.namesrv_addr, DEFAULT_TOPIC)
        except OSError:
            return False
        return True

    def _broker_registered(self) -> bool:
        try:
            return route_of(self.namesrv_addr, DEFAULT_TOPIC).code == 0
        except OSError:
            return False

    def start(self) -> RocketMQCluster:
        # Both JVMs start at once: the broker keeps registering until the namesrv answers. Other processes on
        # this machine may take one of the broker's ports between our check and its bind: then new ports.
        own_namesrv = self.external_namesrv is None
        if own_namesrv:
            self.namesrv.launch()
        try:
            for attempt in range(BIND_ATTEMPTS):
                self.broker.launch()
                if attempt == 0 and own_namesrv:
                    self.namesrv.await_ready()
                try:
                    self.broker.await_ready()
                    break
                except ServerUnavailable:
                    self.broker.kill()
                    if "Address already in use" not in self.broker.log_tail() or attempt == BIND_ATTEMPTS - 1:
                        raise
                    self.broker_port = broker_ports()
                    self._write_broker_conf()
        except BaseException:
            self.stop()
            raise
        return self

    def start_broker(self) -> None:
        self.broker.start()

    def kill_broker(self) -> None:
        self.broker.kill()

    def stop(self) -> None:
        """Kill both: a graceful broker shutdown takes many seconds, and nothing of the store is kept."""
        self.broker.kill()
        self.namesrv.kill()

    def log_tails(self) -> list[tuple[str, str]]:
        return [(p.name, p.log_tail(6000)) for p in (self.namesrv, self.broker)]

    def __enter__(self) -> RocketMQCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
