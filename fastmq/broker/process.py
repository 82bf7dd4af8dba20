"""BrokerProcess: `fastmq broker` in a child process.

For what needs the broker outside this interpreter: benchmarks (the broker should not share the client's GIL, as
Tansu or Kafka would not) and crash tests (kill -9 the broker, start it again on the same directory). The child
prints its listening address on stdout when ready; its log goes to a file in the data directory's parent. It
shuts down when its standard input (a pipe from this process) closes, so it does not outlive its owner even
when the owner is killed.

The child runs the fastmq this interpreter imported, whatever the working directory: `python -m` puts the
working directory first on sys.path, so a child started in a source checkout would import the unbuilt tree
instead of the installed package. It starts in the directory that holds the imported package, which is also put
first on PYTHONPATH.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import fastmq
from fastmq.closeable import Closeable
from fastmq.io.readiness import wait_readable

READY_PREFIX = "fastmq broker listening on "
# The directory holding the imported fastmq package (site-packages when installed, the checkout in development).
PACKAGE_ROOT = Path(fastmq.__file__).resolve().parent.parent


def fastmq_command(*args: str) -> tuple[list[str], dict[str, str], Path]:
    """(argv, environment, working directory) that run `fastmq ARGS` with the package this process imported."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return [sys.executable, "-m", "fastmq", *args], env, PACKAGE_ROOT


class BrokerProcess(Closeable):
    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int = 0, args: Sequence[str] = (),
                 start_timeout: float = 60.0) -> None:
        self._temporary = None
        if data_dir is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="fastmq-broker-")
            data_dir = Path(self._temporary.name) / "data"
        self.data_dir = Path(data_dir).resolve()    # the child runs elsewhere: see fastmq_command
        self.port = port
        self.args = list(args)
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        command, env, cwd = fastmq_command("broker", "--data-dir", str(self.data_dir),
                                           "--listen", f"127.0.0.1:{self.port}", "--stop-with-stdin", *self.args)
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=log_file, start_new_session=True, env=env, cwd=cwd)
        deadline = time.monotonic() + self.start_timeout
        line = b""
        assert self.process.stdout is not None
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                self.kill()
                raise RuntimeError(f"the broker did not start; its log {self.log_path}:\n{self.log_tail()}")
            ready = wait_readable(self.process.stdout, min(remaining, 0.5))
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 4096)
                if not chunk:
                    continue
                line += chunk
        # The first line names the first listener (the one --listen gave); more lines may have come with it.
        text = line.decode("utf-8", "replace").split("\n", 1)[0].strip()
        if not text.startswith(READY_PREFIX):
            self.kill()
            raise RuntimeError(f"unexpected output from the broker: {text!r}")
        self.port = int(text.rsplit(":", 1)[1])
        return self

    def log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown at all, as a crash (kill -9)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        self._reap()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: a clean shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._reap()

    def _reap(self) -> None:
        if self.process is not None:
            self.process.wait(30)
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()

    def close(self) -> None:
        self.stop()
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None

    def __enter__(self) -> BrokerProcess:
        return self.start()
