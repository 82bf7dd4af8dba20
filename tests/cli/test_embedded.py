"""`fastmq bench`: the main job, on the embedded broker it starts itself."""
from __future__ import annotations

import subprocess
import sys


def test_main_job_produces_consumes_and_prints_the_summary():
    result = subprocess.run([sys.executable, "-m", "fastmq", "bench", "--records", "5000", "--value-size", "50"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["stage", "msgs/s", "MB/s", "p50", "ms", "p99", "ms"]
    stages = [line[:30].strip() for line in lines[2:]]
    assert stages == ["produce (send loop)", "produce (acknowledged)", "consume (from the start)",
                      "produce + consume (end-to-end)"]
    # The end-to-end row carries latencies; no progress bars: stderr is not a terminal.
    assert len(lines[-1].split()) == 8
    assert "embedded broker at 127.0.0.1:" in result.stderr and "[###" not in result.stderr
