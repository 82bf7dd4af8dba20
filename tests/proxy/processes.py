"""`fastmq proxy` as a server process for the tests and benches/bench_proxy.py."""
from __future__ import annotations

import http.client
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.proxy.client import ProxyClient
from tests.support.servers import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]


def healthy(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False


def proxy_process(name: str, config: Path, bootstrap_servers: str | None, port: int, log_path: Path,
                  processes: int = 1, log_level: str = "warning") -> ServerProcess:
    """Not started yet: launch() / start() it. Without bootstrap_servers, the config file names the broker."""
    command = [sys.executable, "-m", "fastmq", "proxy", "--config", str(config),
               "--listen", f"127.0.0.1:{port}", "--log-level", log_level, "--processes", str(processes)]
    if bootstrap_servers is not None:
        command += ["-b", bootstrap_servers]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return ServerProcess(name, command, log_path, lambda: healthy(port), env=env)


@contextmanager
def running_proxy(name: str, directory: Path, config_text: str, bootstrap_servers: str | None = None
                  ) -> Iterator[ProxyClient]:
    """One `fastmq proxy` process with the config `config_text` (written to directory), until the block ends."""
    config = directory / "proxy.toml"
    config.write_text(config_text)
    port = free_port()
    process = proxy_process(name, config, bootstrap_servers, port, directory / "proxy.log")
    process.start()
    try:
        yield ProxyClient(port)
    finally:
        process.stop()
