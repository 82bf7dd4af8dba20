"""A real Redis for the tests: Debian's redis-server on a free 127.0.0.1 port, without persistence, started as a
ServerProcess (dies with the test process, log kept for failure reports)."""
from __future__ import annotations

import shutil
import socket
from pathlib import Path

from tests.support.servers import ServerProcess, ServerUnavailable, free_port

INSTALL_HINT = "install it: apt-get install -y redis-server (Debian's package; the tests need its redis-server binary)"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(directory: Path) -> tuple[ServerProcess, str]:
    """Start redis-server in `directory`; returns the process and its URL (redis://127.0.0.1:PORT/0)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServerUnavailable(f"redis-server is not on PATH: {INSTALL_HINT}")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(directory), "--protected-mode", "no", "--daemonize", "no"]
    process = ServerProcess("redis-server", command, directory / "redis.log", lambda: _answers(port),
                            start_timeout=30.0).start()
    return process, f"redis://127.0.0.1:{port}/0"
