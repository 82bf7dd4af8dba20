"""The `fastmq` command."""
from __future__ import annotations

import subprocess
import sys


def test_bench_codec_prints_a_table():
    result = subprocess.run([sys.executable, "-m", "fastmq", "bench", "codec", "--records", "50",
                             "--seconds", "0.01"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["case", "time", "records/s", "MB/s"]
    assert any(line.startswith("read batch, columnar") for line in lines)


def test_unknown_command_fails():
    result = subprocess.run([sys.executable, "-m", "fastmq", "nonsense"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "invalid choice" in result.stderr
