"""The real NSQ (nsqio/nsq v1.3.0): nsqd, nsqlookupd and the bench programs built once with `go` into the server cache,
then started on free 127.0.0.1 ports.

`go install github.com/nsqio/nsq/apps/nsqd@v1.3.0` is refused (nsq's go.mod has a replace directive), so the build
goes through a throwaway wrapper module that repeats that replace line and `go get`s the four packages from the Go
module proxy (about 20 s with empty Go caches). The binaries land in $XDG_CACHE_HOME/fastmq-test-servers/nsq-1.3.0/bin,
renamed into place only once all four are built; `python -m tests.support.servers fetch nsq` builds them ahead.
"""
from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for
from tests.support.servers import (
    FETCH_TIMEOUT_S,
    LOG_TAIL_BYTES,
    ServerProcess,
    ServerUnavailable,
    cache_root,
    free_port,
)

NSQ_VERSION = "1.3.0"
NSQ_PROGRAMS = ("apps/nsqd", "apps/nsqlookupd", "bench/bench_writer", "bench/bench_reader")
# nsq v1.3.0's go.mod replaces go-svc with a fork; a wrapper module must repeat it or the build fails.
_GO_SVC_REPLACE = ("replace github.com/judwhite/go-svc => "
                   "github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6")


def nsq_directory() -> Path:
    return cache_root() / f"nsq-{NSQ_VERSION}"


def build() -> Path:
    """The directory of the built binaries, building them first when this machine has none yet. Concurrent
    builds (other test processes) wait for each other on a lock file."""
    binaries = nsq_directory() / "bin"
    if binaries.is_dir():
        return binaries
    if shutil.which("go") is None:
        raise ServerUnavailable(f"nsqd {NSQ_VERSION} is not in {binaries} and cannot be built: Go (1.17 or newer) "
                                "is needed on PATH, with the Go module proxy reachable; then run "
                                "`python -m tests.support.servers fetch nsq`")
    directory = nsq_directory()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binaries.is_dir():
            return binaries
        work = Path(tempfile.mkdtemp(prefix="build-", dir=directory))
        try:
            (work / "go.mod").write_text(f"module fastmqnsqbuild\n\ngo 1.17\n\n{_GO_SVC_REPLACE}\n")
            packages = [f"github.com/nsqio/nsq/{program}" for program in NSQ_PROGRAMS]
            _run_go(work, "get", *(f"{package}@v{NSQ_VERSION}" for package in packages))
            _run_go(work, "build", "-o", str(work / "bin") + "/", *packages)
            (work / "bin").rename(binaries)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return binaries


def _run_go(work: Path, *args: str) -> None:
    command = ["go", *args]
    try:
        done = subprocess.run(command, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ServerUnavailable(f"`{' '.join(command)}` took over {FETCH_TIMEOUT_S:g} s building nsq {NSQ_VERSION}: "
                                "run `python -m tests.support.servers fetch nsq` where the Go proxy is reachable") from exc
    if done.returncode != 0:
        output = done.stdout.decode("utf-8", "replace")[-LOG_TAIL_BYTES:]
        raise ServerUnavailable(f"building nsq {NSQ_VERSION} failed: `{' '.join(command)}` exited "
                                f"{done.returncode}:\n{output}\nBuild it where the Go module proxy is reachable: "
                                "python -m tests.support.servers fetch nsq")


def http_get_json(address: str, path: str, timeout: float = 5.0) -> object:
    """GET http://address/path and decode its JSON body (nsq's v1 API, no wrapper)."""
    request = urllib.request.Request(f"http://{address}{path}",
                                     headers={"Accept": "application/vnd.nsq; version=1.0"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def _pings(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/ping", timeout=2.0) as response:
            return response.status == 200
    except OSError:
        return False


@dataclass
class _Daemon:
    """What nsqd and nsqlookupd share: a TCP and an HTTP port on 127.0.0.1, a log directory, a process."""

    directory: Path
    tcp_port: int = field(default_factory=free_port, kw_only=True)
    http_port: int = field(default_factory=free_port, kw_only=True)
    process: ServerProcess = field(init=False)

    @property
    def tcp_address(self) -> str:
        return f"127.0.0.1:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"127.0.0.1:{self.http_port}"


@dataclass
class NSQLookupd(_Daemon):
    """One nsqlookupd: .tcp_address (where nsqd registers), .http_address (/lookup, /nodes)."""

    def __post_init__(self) -> None:
        command = [str(build() / "nsqlookupd"), f"--tcp-address=127.0.0.1:{self.tcp_port}",
                   f"--http-address=127.0.0.1:{self.http_port}", "--broadcast-address=127.0.0.1"]
        self.process = ServerProcess("nsqlookupd", command, self.directory / "nsqlookupd.log",
                                     lambda: _pings(self.http_address), cwd=self.directory)


@dataclass
class NSQD(_Daemon):
    """One nsqd registered with a lookupd: .tcp_address, .http_address; stop()/kill() and start() again restart it
    on the same ports and data (its queues survive a clean stop)."""

    lookupd: NSQLookupd | None = None
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        command = [str(build() / "nsqd"), f"--tcp-address=127.0.0.1:{self.tcp_port}",
                   f"--http-address=127.0.0.1:{self.http_port}", "--broadcast-address=127.0.0.1",
                   f"--data-path={data}", *self.extra_args]
        if self.lookupd is not None:
            command.append(f"--lookupd-tcp-address={self.lookupd.tcp_address}")
        self.process = ServerProcess("nsqd", command, self.directory / "nsqd.log", self._ready, cwd=self.directory)

    def _ready(self) -> bool:
        if not _pings(self.http_address):
            return False
        if self.lookupd is None:
            return True
        # Clients that look nsqd up must find it: wait until the lookupd lists it.
        nodes = http_get_json(self.lookupd.http_address, "/nodes")
        return any(node.get("tcp_port") == self.tcp_port for node in nodes.get("producers", ()))

    def start(self) -> NSQD:
        self.process.start()
        return self

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def create_topic(self, topic: str, channel: str | None = None) -> None:
        """Create a topic (and a channel) through nsqd's HTTP API, so that a lookup finds it at once."""
        _post(self.http_address, f"/topic/create?topic={topic}")
        if channel is not None:
            _post(self.http_address, f"/channel/create?topic={topic}&channel={channel}")

    def topic_depth(self, topic: str, channel: str) -> tuple[int, int]:
        """(depth, in-flight count) of a channel, from /stats."""
        stats = http_get_json(self.http_address, f"/stats?format=json&topic={topic}&channel={channel}")
        for topic_stats in stats.get("topics", ()):
            for channel_stats in topic_stats.get("channels", ()):
                if channel_stats["channel_name"] == channel:
                    return channel_stats["depth"], channel_stats["in_flight_count"]
        return 0, 0


def _post(address: str, path: str) -> None:
    request = urllib.request.Request(f"http://{address}{path}", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=5.0) as response:
        response.read()


def tls_args(cert_file: str, key_file: str) -> tuple[str, ...]:
    """nsqd's arguments for TLS (IDENTIFY's tls_v1 upgrade, optional for clients) with this certificate."""
    return (f"--tls-cert={cert_file}", f"--tls-key={key_file}", f"--https-address=127.0.0.1:{free_port()}")


@dataclass
class NSQCluster:
    """An nsqlookupd and one nsqd registered with it, both on free ports, their logs in directory."""

    directory: Path
    nsqd_args: tuple[str, ...] = ()
    lookupd: NSQLookupd = field(init=False)
    nsqd: NSQD = field(init=False)

    def __post_init__(self) -> None:
        self.lookupd = NSQLookupd(self.directory)
        self.nsqd = NSQD(self.directory, self.lookupd, self.nsqd_args)

    def start(self) -> NSQCluster:
        self.lookupd.process.start()
        try:
            self.nsqd.start()
        except BaseException:
            self.lookupd.process.stop()
            raise
        return self

    def stop(self) -> None:
        self.nsqd.stop()
        self.lookupd.process.stop()

    def logs(self) -> list[tuple[str, str]]:
        return [("nsqlookupd", self.lookupd.process.log_tail()), ("nsqd", self.nsqd.process.log_tail())]


def receive(consumer: Any, count: int, *, finish: bool = True, timeout: float = 20.0) -> list:
    """Poll a fastmq.nsq Consumer until `count` messages came (bounded by a deadline), finishing each one unless
    told not to; returns them in arrival order."""
    got: list = []

    def more() -> bool:
        message = consumer.poll(0.2)
        if message is not None:
            got.append(message)
            if finish:
                message.finish()
        return len(got) >= count

    wait_for(more, timeout=timeout, interval=0, message=lambda: f"{count} messages, got {len(got)}")
    return got


NSQJS_VERSION = "0.13.0"


def nsqjs_modules() -> Path:
    """The node_modules directory holding nsqjs (installed once with npm, pinned, into the server cache); NODE_PATH
    for the JS peer programs in tests/."""
    directory = cache_root() / f"nsqjs-{NSQJS_VERSION}"
    modules = directory / "node_modules"
    if (modules / "nsqjs" / "package.json").is_file():
        return modules
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise ServerUnavailable(f"nsqjs {NSQJS_VERSION} needs Node.js and npm on PATH (apt-get install nodejs npm), "
                                f"then `npm install nsqjs@{NSQJS_VERSION}` into {directory}")
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (modules / "nsqjs" / "package.json").is_file():
            (directory / "package.json").write_text(json.dumps(
                {"name": "fastmq-nsqjs-peer", "private": True, "dependencies": {"nsqjs": NSQJS_VERSION}}))
            command = ["npm", "install", "--no-audit", "--no-fund", "--save-exact"]
            try:
                done = subprocess.run(command, cwd=directory, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, timeout=FETCH_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                raise ServerUnavailable(f"`npm install nsqjs@{NSQJS_VERSION}` took over {FETCH_TIMEOUT_S:g} s in "
                                        f"{directory}: run it by hand where the npm registry is reachable") from exc
            if done.returncode != 0:
                output = done.stdout.decode("utf-8", "replace")[-LOG_TAIL_BYTES:]
                raise ServerUnavailable(f"`npm install nsqjs@{NSQJS_VERSION}` in {directory} failed:\n{output}")
    return modules


class AuthServer:
    """An nsqd auth server (what nsqd's --auth-http-address names) on 127.0.0.1, as a context manager.

    It answers GET /auth?FIELDS and POST /auth with a JSON body of Go's url.Values ({"secret": ["S"], ...}) from
    `answers` (secret -> the JSON answer; None makes it fail with a 500; unknown secrets get the "" entry), and
    records each question in .asked as a dict of its fields plus "method"."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                self._answer("GET", url.path, {key: values[-1] for key, values in
                                               urllib.parse.parse_qs(url.query, keep_blank_values=True).items()})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self._answer("POST", self.path, {key: values[-1] for key, values in body.items()})

            def _answer(self, method: str, path: str, fields: dict[str, str]) -> None:
                server.asked.append({**fields, "method": method})
                answer = server.answers.get(fields.get("secret", ""), server.answers.get("")) \
                    if path == "/auth" else None
                data = json.dumps(answer).encode() if answer is not None else b"{}"
                self.send_response(200 if answer is not None else 500)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return "%s:%d" % self._server.server_address[:2]

    def __enter__(self) -> AuthServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
