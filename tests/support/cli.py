"""`python -m fastmq ...` run as a user runs it, for the CLI tests: one run, bounded in time, and when it
overruns, every thread's stack of the command in the failure (a hang in CI then says where it hung)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any


def run_fastmq(*args: str, stdin: str | bytes | None = None, text: bool = False, timeout: float = 120.0,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[Any]:
    # PYTHONFAULTHANDLER: a SIGABRT makes the interpreter print every thread's traceback before it dies.
    command = [sys.executable, "-m", "fastmq", *args]
    with subprocess.Popen(command, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text,
                          env=dict(os.environ if env is None else env, PYTHONFAULTHANDLER="1")) as process:
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            try:
                _, stderr = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                _, stderr = process.communicate()
            if isinstance(stderr, bytes):
                stderr = stderr.decode(errors="replace")
            raise AssertionError(f"`fastmq {' '.join(args)}` ran past {timeout:g} s; what it printed on stderr, "
                                 f"its threads' stacks last:\n{stderr}") from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
