"""Real servers for the tests: pinned Maven artifacts fetched once per machine into a cache, started as processes
on free 127.0.0.1 ports, watched until they answer, stopped (also when the test process dies), their output kept
for failure reports.

The cache is $XDG_CACHE_HOME/fastmq-test-servers (~/.cache/... by default), one directory <name>-<version> per
server holding the jars (lib/) and the pom they were resolved from. `python -m tests.support.servers fetch`
fills it ahead of a run. Resolving needs Maven and Java 17 (Debian: maven, openjdk-17-jre-headless).
"""
from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence
from xml.sax.saxutils import escape

from tests.support.waiting import wait_for

FETCH_TIMEOUT_S = 900.0
STOP_TIMEOUT_S = 20.0
LOG_TAIL_BYTES = 12000


SERVER_LOGS: dict[str, Callable[[], list[tuple[str, str]]]] = {}
"""Fixture name -> (title, log tail) of each process of its server, for the report of a failing test that used
it (tests/conftest.py); a fixture registers its server while it runs."""


class ServerUnavailable(RuntimeError):
    """A server could not be fetched or started: the message says what to install or fetch."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fastmq-test-servers"


def free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel does not hand it out again soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_below_ephemeral_range() -> int:
    """A free port the kernel never hands out as a connection's local port: while the broker is down, clients
    keep connecting to its ports, and one of their connections (or a TCP self-connect to a port of the ephemeral
    range) could take a port it must bind again."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


@dataclass(frozen=True)
class MavenServer:
    """A server distributed as Maven artifacts (group:artifact:version), run from their runtime classpath."""

    name: str
    version: str
    artifacts: tuple[str, ...]
    # Jars copied alone, without their dependencies (Maven cannot read the POMs of some, e.g. tubemq-server 2.4.0)
    jars_only: tuple[str, ...] = ()

    @property
    def directory(self) -> Path:
        return cache_root() / f"{self.name}-{self.version}"

    @property
    def lib(self) -> Path:
        return self.directory / "lib"

    def pom(self) -> str:
        dependencies = []
        for coordinate in self.artifacts:
            group, artifact, version = (escape(part) for part in coordinate.split(":"))
            dependencies.append(f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                                f"<version>{version}</version></dependency>")
        return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>"
                f"<groupId>fastmq.test-servers</groupId><artifactId>{escape(self.name)}</artifactId>"
                f"<version>{escape(self.version)}</version><packaging>pom</packaging>"
                f"<dependencies>{''.join(dependencies)}</dependencies></project>\n")

    def classpath(self) -> str:
        """The jars, fetched first if this machine has none yet (or an incomplete set)."""
        fetch(self)
        return str(self.lib / "*")


def fetch(server: MavenServer) -> Path:
    """Resolve the server's artifacts with their runtime dependencies into its cache directory, once: a
    complete lib/ (renamed into place only when Maven succeeded) is reused. Concurrent fetches of one server
    (other test processes) wait for each other on a lock file."""
    if server.lib.is_dir():
        return server.lib
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise ServerUnavailable(f"{server.name} {server.version} is not in {server.directory} and cannot be "
                                "fetched: Maven and Java 17 are needed (apt-get install maven openjdk-17-jre-headless)")
    server.directory.mkdir(parents=True, exist_ok=True)
    with open(server.directory.parent / f"{server.directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if server.lib.is_dir():
            return server.lib
        (server.directory / "pom.xml").write_text(server.pom())
        staging = Path(tempfile.mkdtemp(prefix="lib-", dir=server.directory))
        command = ["mvn", "-B", "-q", "-f", str(server.directory / "pom.xml"), "dependency:copy-dependencies",
                   "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S)
            for jar in server.jars_only:
                if done.returncode == 0:
                    command = ["mvn", "-B", "-q", "-f", str(server.directory / "pom.xml"), "dependency:copy",
                               f"-Dartifact={jar}", f"-DoutputDirectory={staging}"]
                    done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ServerUnavailable(f"fetching {server.name} {server.version} took over {FETCH_TIMEOUT_S:g} s: "
                                    f"run `python -m tests.support.servers fetch`") from exc
        if done.returncode != 0 or not any(staging.glob("*.jar")):
            shutil.rmtree(staging, ignore_errors=True)
            output = done.stdout.decode("utf-8", "replace")[-LOG_TAIL_BYTES:]
            raise ServerUnavailable(f"fetching {server.name} {server.version} ({', '.join(server.artifacts)}) "
                                    f"failed (exit {done.returncode}); `{' '.join(command)}` said:\n{output}\n"
                                    "Fetch it where Maven Central is reachable: "
                                    "python -m tests.support.servers fetch")
        staging.rename(server.lib)
    return server.lib


# PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process: every server is
# spawned from this one thread, which lives as long as the test process.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="server-spawner")

# Run before the server's own program: the kernel kills it when its owner dies (kill -9 included), and it does
# not start at all if the owner died before the wrapper could ask for that.
_ORPHAN_GUARD = ("import ctypes, os, signal, sys\n"
                 "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
                 "if os.getppid() != int(sys.argv[1]):\n"
                 "    sys.exit(70)\n"
                 "os.execvp(sys.argv[2], sys.argv[2:])\n")


class ServerProcess:
    """One server process: start() runs `command` (output appended to log_path) and waits until ready()
    answers True; kill() is kill -9; stop() asks it to end (SIGTERM), then kills it; start() again restarts it
    with the same command. The process dies with its owner."""

    def __init__(self, name: str, command: Sequence[str], log_path: Path, ready: Callable[[], bool], *,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None, start_timeout: float = 90.0) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = Path(log_path)
        self.ready = ready
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.start_timeout = start_timeout
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self) -> None:
        """Start the process without waiting for it to answer (several servers that need each other to
        become ready are launched first, then awaited)."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== {time.strftime('%H:%M:%S')} starting: {' '.join(self.command)}\n".encode())
            log.flush()
            command = [sys.executable, "-I", "-S", "-c", _ORPHAN_GUARD, str(os.getpid()), *self.command]
            self.process = _SPAWNER.submit(
                subprocess.Popen, command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.cwd, start_new_session=True).result()

    def await_ready(self) -> None:
        def answered() -> bool:
            if not self.running:
                raise ServerUnavailable(f"{self.name} exited with code {self.process.returncode} while starting; "
                                        f"its log {self.log_path} ends:\n{self.log_tail()}")
            return self.ready()

        wait_for(answered, timeout=self.start_timeout, interval=0.1,
                 message=lambda: f"{self.name} answering; its log {self.log_path} ends:\n{self.log_tail()}")

    def start(self) -> ServerProcess:
        self.launch()
        try:
            self.await_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown at all."""
        if self.running:
            self.process.kill()
        self._reap()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._reap()

    def _reap(self) -> None:
        if self.process is not None:
            self.process.wait(STOP_TIMEOUT_S)

    def log_tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - limit))
                return log.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"


# Both of HotSpot's compilers, as Apache's own start scripts run their servers: the kit's JVMs stop at the client
# compiler, which starts a test's server sooner but leaves a long run's server code costlier (RocketMQ's broker: 5.0
# against 7.4-8.6 us of CPU per batched message). Benches give it (later options override java_command's).
SERVER_JIT = ("-XX:TieredStopAtLevel=4",)


def java_command(classpath: str, main_class: str, *args: str, heap: str = "512m",
                 options: Sequence[str] = ()) -> list[str]:
    """A JVM for this small shared machine: a small heap, dying on the first OutOfMemoryError; the client
    compiler only and the serial collector, which start a server in about two thirds of the time (tests move
    little data, and two cores are shared by everything)."""
    return ["java", f"-Xmx{heap}", "-XX:+ExitOnOutOfMemoryError", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-Djava.awt.headless=true", *options, "-cp", classpath, main_class, *args]


def run_java(classpath: str, main_class: str, *args: str, timeout: float = 120.0) -> str:
    """Run a JVM tool to its end (a storage formatter, a user tool) and return its output; a failure raises
    with that output."""
    command = java_command(classpath, main_class, *args, heap="256m")
    done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout)
    output = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        raise ServerUnavailable(f"{main_class} {' '.join(args)} failed with exit {done.returncode}:\n{output}")
    return output


# ---- the pinned servers ----------------------------------------------------------------------------------------

APACHE_KAFKA = MavenServer(
    "apache-kafka", "4.1.1",
    ("org.apache.kafka:kafka_2.13:4.1.1",
     # Kafka logs through SLF4J 1.7: without this binding its log (which the failure reports show) is empty.
     "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"))

# The TubeMQ Java client: the peer of tests/tubemq_java (its programs are compiled against it there).
TUBEMQ_CLIENT = MavenServer(
    "tubemq-client", "1.13.0",
    ("org.apache.inlong:tubemq-client:1.13.0", "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"))

# Apache InLong TubeMQ's master and broker 2.4.0: the jar alone (its parent POM is not on Maven Central) and the
# runtime dependencies of InLong 2.4.0's root POM (../shared/docs/protocols/tubemq.md).
TUBEMQ_SERVER = MavenServer(
    "tubemq-server", "2.4.0",
    ("org.apache.inlong:tubemq-client:1.13.0", "com.sleepycat:je:18.1.11",
     "org.eclipse.jetty:jetty-servlet:9.4.51.v20230217", "javax.servlet:javax.servlet-api:4.0.1",
     "org.apache.velocity:velocity-engine-core:2.3", "org.apache.velocity.tools:velocity-tools-generic:3.1",
     "org.ini4j:ini4j:0.5.4", "org.springframework:spring-context:5.3.34", "org.springframework:spring-orm:5.3.34",
     "com.google.guava:guava:32.1.2-jre", "commons-io:commons-io:2.11.0", "commons-cli:commons-cli:1.4",
     "org.apache.httpcomponents:httpclient:4.5.13", "org.dom4j:dom4j:2.1.3", "com.beust:jcommander:1.78",
     "io.prometheus:simpleclient_httpserver:0.14.1", "org.apache.logging.log4j:log4j-core:2.17.2",
     "org.apache.logging.log4j:log4j-jcl:2.17.2", "org.apache.logging.log4j:log4j-1.2-api:2.17.2",
     "org.apache.logging.log4j:log4j-slf4j-impl:2.17.2"),
    jars_only=("org.apache.inlong:tubemq-server:2.4.0", "org.apache.zookeeper:zookeeper:3.7.2"))


APACHE_ROCKETMQ = MavenServer(
    "apache-rocketmq", "5.5.0",
    ("org.apache.rocketmq:rocketmq-namesrv:5.5.0", "org.apache.rocketmq:rocketmq-broker:5.5.0"))

# Apache RocketMQ's Java client (remoting) with its ACL 1.0 request signing, driven by tests/rocketmq_java against
# the embedded namesrv + broker.
ROCKETMQ_JAVA_CLIENT = MavenServer("rocketmq-client-acl", "4.9.8", ("org.apache.rocketmq:rocketmq-client:4.9.8",
                                                                  "org.apache.rocketmq:rocketmq-acl:4.9.8"))

SERVERS: dict[str, MavenServer] = {server.name: server for server in (APACHE_KAFKA, APACHE_ROCKETMQ, ROCKETMQ_JAVA_CLIENT,
                                                                      TUBEMQ_CLIENT, TUBEMQ_SERVER)}


def _build_nsq() -> Path:
    from tests.support.nsq import build  # it imports this module
    return build()


# What `fetch NAME` runs: the Maven servers, and the servers built from source.
FETCHERS: dict[str, Callable[[], Path]] = {
    **{name: (lambda server=server: fetch(server)) for name, server in SERVERS.items()},
    "nsq": _build_nsq,
}


def main(argv: Sequence[str]) -> int:
    if list(argv[:1]) != ["fetch"]:
        print("usage: python -m tests.support.servers fetch [NAME ...]   (known: " + ", ".join(FETCHERS) + ")",
              file=sys.stderr)
        return 2
    names = list(argv[1:]) or list(FETCHERS)
    unknown = [name for name in names if name not in FETCHERS]
    if unknown:
        print(f"unknown server(s): {', '.join(unknown)} (known: {', '.join(FETCHERS)})", file=sys.stderr)
        return 2
    for name in names:
        started = time.monotonic()
        location = FETCHERS[name]()
        print(f"{name}: {location} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
