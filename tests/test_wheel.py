"""The wheel: built from a copy of the source tree, installed in a fresh venv where no compiler can run, it
imports its compiled modules from site-packages and moves a record through the embedded broker."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What a source distribution would not carry: build products and local state.
NOT_SOURCE = shutil.ignore_patterns("*.so", "build", "dist", ".venv", ".git", ".hypothesis", "__pycache__",
                                    "*.egg-info", ".pytest_cache", ".benchmarks", ".ruff_cache", ".mypy_cache")

SMOKE = textwrap.dedent("""
    import sys
    import fastmq
    import fastmq.kafka._native.records as records
    from fastmq.broker import EmbeddedBroker
    from fastmq.kafka import Consumer, Producer, TopicPartition
    from fastmq.kafka.record import MemoryRecords, MemoryRecordsBuilder

    assert fastmq.__file__.startswith(sys.argv[1]), fastmq.__file__
    assert records.__file__.endswith(".so"), records.__file__
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1, key=b"k", value=b"v", headers=[])
    builder.close()
    batch = MemoryRecords(builder.buffer()).next_batch()
    assert [(r.key, r.value) for r in batch] == [(b"k", b"v")]
    with EmbeddedBroker() as broker:
        with Producer(broker.bootstrap_servers) as producer:
            producer.send("wheel", b"hello", partition=0).get(30)
        with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
            consumer.assign([TopicPartition("wheel", 0)])
            consumer.seek_to_beginning()
            assert [r.value for r in consumer.consume(10, 10.0)] == [b"hello"]
    print("OK")
""")


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result


@pytest.mark.timeout(900)
def test_wheel_installs_and_runs_without_a_compiler(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    # The build tools (setuptools, Cython) are the test environment's, so no index is needed to build.
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
         str(tmp_path / "wheels"), str(source)], timeout=900)
    wheel, = (tmp_path / "wheels").glob("fastmq-*.whl")
    assert wheel.name.endswith("linux_x86_64.whl") or "manylinux" in wheel.name, wheel.name

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    python = venv / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                    timeout=60).stdout.strip())
    # Runtime dependencies come from this environment's site-packages, appended after the venv's own (a plain
    # path line: the editable install's finder there is not loaded, so only the wheel can provide fastmq).
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    no_compiler = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false", "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], env=no_compiler,
        timeout=300)
    result = run([str(python), "-c", SMOKE, str(site)], env=no_compiler, cwd=tmp_path, timeout=300)
    assert result.stdout.strip().endswith("OK")
