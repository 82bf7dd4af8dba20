"""Long jobs that start as soon as the session has collected its tests: building and installing fastmq from a fresh
clone takes minutes of compiler time, while most tests wait on servers and sockets. Started early, a job runs
beside them on the second core; the test that checks it then only waits for what is left.

A test module registers its job at import (`register`), the suite's conftest starts the jobs of the tests it is
about to run (`start_selected`), and the test takes the outcome (`outcome`), which starts the job there and then if
the session did not (a run of that test alone). Output goes to files, not pipes: a job that writes more than a pipe
holds would otherwise stop until someone reads it."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

# What a job runs, given a fresh directory of its own: (command, working directory, environment or None).
JobCommand = tuple[list[str], Path, "dict[str, str] | None"]


class EarlyJob:
    def __init__(self, name: str, test_prefix: str, command: Callable[[Path], JobCommand], timeout: float) -> None:
        self.name = name
        self.test_prefix = test_prefix     # node ids of the tests that take this job's outcome start with it
        self.command = command
        self.timeout = timeout
        self._directory: Path | None = None
        self._process: subprocess.Popen | None = None
        self._started = 0.0

    def start(self) -> None:
        if self._process is not None:
            return
        self._directory = Path(tempfile.mkdtemp(prefix=f"fastmq-{self.name}-"))
        command, cwd, env = self.command(self._directory)
        with open(self._directory / "stdout", "wb") as out, open(self._directory / "stderr", "wb") as err:
            self._process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
        self._started = time.monotonic()

    @property
    def directory(self) -> Path:
        """The job's own directory (it exists once the job has started)."""
        assert self._directory is not None, f"{self.name} has not started"
        return self._directory

    def outcome(self) -> subprocess.CompletedProcess[str]:
        """Wait for the job (until its timeout, counted from its start) and return what it printed."""
        self.start()
        assert self._process is not None and self._directory is not None
        try:
            self._process.wait(max(0.0, self._started + self.timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{self.name} did not end within {self.timeout:.0f} s") from None
        return subprocess.CompletedProcess(self._process.args, self._process.returncode,
                                           (self._directory / "stdout").read_text(errors="replace"),
                                           (self._directory / "stderr").read_text(errors="replace"))

    def stop(self) -> None:
        """Kill the job if it still runs and remove its directory."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)


_JOBS: dict[str, EarlyJob] = {}


def register(name: str, test_prefix: str, command: Callable[[Path], JobCommand], timeout: float) -> EarlyJob:
    """The job `name`, registered once (a module may be imported twice under importlib's import mode)."""
    if name not in _JOBS:
        _JOBS[name] = EarlyJob(name, test_prefix, command, timeout)
    return _JOBS[name]


def start_selected(node_ids: list[str]) -> None:
    for job in _JOBS.values():
        if any(node_id.startswith(job.test_prefix) for node_id in node_ids):
            job.start()


def stop_all() -> None:
    for job in _JOBS.values():
        job.stop()
