"""A user's first minutes: the version, `python -m fastmq`, the message of an unbuilt checkout, a silent library
(its loggers print nothing unless the application configures logging) and no progress bars in pipes."""
from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import fastmq
from fastmq.cli.progress import ProgressBar

ROOT = Path(__file__).resolve().parent.parent


def test_python_m_fastmq_prints_the_version():
    result = subprocess.run([sys.executable, "-m", "fastmq", "--version"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("fastmq "), result.stdout


def test_an_unbuilt_source_checkout_says_what_to_run(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "fastmq", checkout / "fastmq", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "setup.py", checkout)
    result = subprocess.run([sys.executable, "-m", "fastmq", "--version"], capture_output=True, text=True,
                            cwd=checkout, timeout=60)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: fastmq's compiled modules are missing"), result.stderr
    assert f"source checkout ({checkout})" in last_line and "python setup.py build_ext --inplace" in last_line


def test_the_library_prints_nothing_unless_logging_is_configured():
    # A warning from a fastmq logger (a producer whose broker is gone logs some) would reach stderr through
    # Python's last-resort handler if the package did not install a NullHandler.
    script = textwrap.dedent("""
        import logging
        from fastmq.broker import EmbeddedBroker
        from fastmq.kafka import Consumer, Producer, TopicPartition

        with EmbeddedBroker() as broker:
            with Producer(broker.bootstrap_servers) as producer:
                producer.send("quiet", b"v", partition=0).get(30)
            with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
                consumer.assign([TopicPartition("quiet", 0)])
                consumer.seek_to_beginning()
                assert [r.value for r in consumer.consume(10, 10.0)] == [b"v"]
        for name in ("fastmq", "fastmq.kafka.producer", "fastmq.broker.broker"):
            logging.getLogger(name).warning("a warning nobody asked to see")
        print("done")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0 and result.stdout == "done\n", result.stdout + result.stderr
    assert result.stderr == ""


def test_every_logger_is_named_under_fastmq():
    package = Path(fastmq.__file__).parent
    calls = 0
    for source in [*package.glob("**/*.py"), *package.glob("**/*.pyx")]:
        for call in re.findall(r"getLogger\(([^)]*)\)", source.read_text()):
            calls += 1
            assert call == "__name__" or re.fullmatch(r"[\"']fastmq(\.[\w.]+)?[\"']", call), f"{source}: {call}"
    assert calls > 10


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_bar_when_stdout_is_not_a_terminal(monkeypatch):
    for stdout, drawn in ((io.StringIO(), False), (Terminal(), True)):
        stderr = Terminal()
        monkeypatch.setattr(sys, "stderr", stderr)
        monkeypatch.setattr(sys, "stdout", stdout)
        bar = ProgressBar("produce", 10)
        bar.update(10)
        assert (stderr.getvalue() != "") is drawn
