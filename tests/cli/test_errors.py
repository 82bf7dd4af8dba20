"""How the command fails: one line on stderr saying what to do, the documented exit codes, --debug for the
traceback, options checked before any network wait, short connection timeouts, and cleanup on SIGTERM."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fastmq.broker import BrokerProcess, EmbeddedBroker
from fastmq.cli import build_parser
from fastmq.cli.broker import broker_config
from fastmq.cli.failure import ExitCode
from fastmq.kafka import Admin
from tests.support.cli import run_fastmq

# A bound for the subprocess, far above what each case takes (a --timeout of 1 s), so that a hang fails the test.
LIMIT = 60


def fastmq(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return run_fastmq(*args, stdin=stdin, text=True, timeout=LIMIT)


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fastmq: "), result.stderr
    return lines[0]


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, never listening, so that nobody else takes it)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as embedded:
        yield embedded


def test_nothing_listening(closed_port):
    for command in (["produce", "-t", "t"], ["consume", "-t", "t"], ["topics", "list"], ["-L"], ["-P", "-t", "t"],
                    ["-C", "-t", "t"]):
        result = fastmq(*command, "-b", f"127.0.0.1:{closed_port}", "--timeout", "1", stdin="a\n")
        assert result.returncode == ExitCode.UNREACHABLE
        assert one_line(result) == (f"fastmq: no broker answered at 127.0.0.1:{closed_port} within 1 s: is it "
                                    "running, and is the address right? (--timeout waits longer)")


def test_host_that_does_not_resolve():
    result = fastmq("produce", "-b", "no-such-host.invalid:9092", "-t", "t", "--timeout", "1", stdin="a\n")
    assert result.returncode == ExitCode.UNREACHABLE
    assert "no broker answered at no-such-host.invalid:9092 within 1 s" in one_line(result)


def test_debug_shows_the_traceback(closed_port):
    result = fastmq("--debug", "topics", "list", "-b", f"127.0.0.1:{closed_port}", "--timeout", "1")
    assert result.returncode == 1 and "Traceback (most recent call last)" in result.stderr
    assert "CommandError: no broker answered" in result.stderr


def test_options_are_checked_before_any_network_wait(closed_port):
    # Nothing listens: had the command connected first, it would report that instead (after a timeout).
    address = f"127.0.0.1:{closed_port}"
    cases = [(["consume", "-t", "t", "-o", "bogus"], "argument -o/--offset: wants beginning, end"),
             (["consume", "-t", "t", "-f", "%s %x"], "unknown format token '%x'"),
             (["topics", "list", "--output", "yaml"], "argument --output: invalid choice"),
             (["topics", "list", "--timeout", "-1"], "a timeout is a positive number"),
             (["produce", "-t", "t", "-b", "tubemq://h:1"], "unknown protocol 'tubemq'")]
    for args, message in cases:
        result = fastmq(*args, "-b", address, "--timeout", "30")
        assert result.returncode == ExitCode.USAGE and message in result.stderr, result.stderr
    for args in (["consume", "-t", "t", "-X", "bogus_option=1"], ["produce", "-t", "t", "-X", "bogus_option=1"]):
        result = fastmq(*args, "-b", address, "--timeout", "30")
        assert result.returncode == ExitCode.FAILED and "bogus_option" in one_line(result)


def test_consume_does_not_create_a_misspelled_topic(broker):
    result = fastmq("consume", "-b", broker.bootstrap_servers, "-t", "evnets", "-e")
    assert result.returncode == ExitCode.NOT_FOUND
    assert one_line(result) == (f"fastmq: no such topic: 'evnets' at {broker.bootstrap_servers}: `fastmq topics "
                                f"list -b {broker.bootstrap_servers}` lists the topics")
    with Admin(broker.bootstrap_servers) as admin:
        assert "evnets" not in admin.list_topics(timeout=10)


def test_produce_says_when_the_broker_created_the_topic(broker):
    result = fastmq("produce", "-b", broker.bootstrap_servers, "-t", "fresh", stdin="a\nb\n")
    assert result.returncode == 0
    assert one_line(result) == ("fastmq: created topic fresh (the broker creates topics on first use: "
                                "auto.create.topics.enable)")
    again = fastmq("produce", "-b", broker.bootstrap_servers, "-t", "fresh", stdin="c\n")
    assert again.returncode == 0 and again.stderr == ""
    result = fastmq("consume", "-b", broker.bootstrap_servers, "-t", "fresh", "-e")
    assert result.returncode == 0 and result.stdout.splitlines() == ["a", "b", "c"]


def test_produce_to_a_broker_that_does_not_auto_create(tmp_path):
    with BrokerProcess(tmp_path / "data", args=["--override", "auto.create.topics.enable=false"]) as process:
        result = fastmq("produce", "-b", process.bootstrap_servers, "-t", "missing", "--timeout", "2",
                        stdin="a\n")
        assert result.returncode == ExitCode.NOT_FOUND
        assert one_line(result) == (
            f"fastmq: no such topic: 'missing' at {process.bootstrap_servers}: the broker does not create topics "
            "on first use (auto.create.topics.enable=false); create it with `fastmq topics create missing -b "
            f"{process.bootstrap_servers}`")
        with Admin(process.bootstrap_servers) as admin:
            assert admin.list_topics(timeout=10) == []


def test_help_documents_the_exit_codes_and_version():
    result = fastmq("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert ("exit codes: 0 success, 1 the operation failed, 2 bad options, 3 no broker answered, 4 no such topic "
            "or group, 130 interrupted, 143 terminated by SIGTERM") in text
    result = fastmq("--version")
    assert result.returncode == 0 and result.stdout.startswith("fastmq ")


def test_broker_users_come_from_a_file_the_environment_and_the_command_line(tmp_path, monkeypatch):
    users_file = tmp_path / "users"
    users_file.write_text("# name=password\nalice=from file\n\nbob=b=with=equals\n")
    monkeypatch.setenv("FASTMQ_BROKER_USERS", "carol=from env\nalice=env wins over the file")
    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--users-file", str(users_file),
                                      "--user", "dave=from argv", "--override", "num.partitions=3"])
    config = broker_config(args)
    assert config.users == {"alice": "env wins over the file", "bob": "b=with=equals", "carol": "from env",
                            "dave": "from argv"}
    assert config.num_partitions == 3 and config.auto_create_topics is True
    (tmp_path / "bad").write_text("no separator\n")
    result = fastmq("broker", "--data-dir", str(tmp_path / "d"), "--users-file", str(tmp_path / "bad"))
    assert result.returncode == 1 and one_line(result).endswith("line 1: wants NAME=PASSWORD")
    result = fastmq("broker", "--data-dir", str(tmp_path / "d"), "--override", "auto.create.topics.enable=maybe")
    assert result.returncode == 1 and "auto.create.topics.enable is true or false" in one_line(result)


def test_sigterm_removes_the_temporary_directories(tmp_path):
    """`fastmq bench` starts a broker process on a temporary directory; SIGTERM to the command stops the
    broker and removes the directory."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, TMPDIR=str(temporary))
    command = subprocess.Popen([sys.executable, "-m", "fastmq", "bench", "--records", "100000000"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = command.stderr.readline()
        assert "embedded broker at 127.0.0.1:" in line, line
        assert [p.name[:14] for p in temporary.iterdir()] == ["fastmq-broker-"]
        command.send_signal(signal.SIGTERM)
        assert command.wait(LIMIT) == ExitCode.TERMINATED
    finally:
        command.kill()
        command.wait(LIMIT)
        command.stderr.close()
    assert list(temporary.iterdir()) == []


def test_child_processes_run_the_imported_fastmq(tmp_path):
    """A broker process started from a directory holding another `fastmq` package still runs this one."""
    decoy = tmp_path / "fastmq"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy fastmq was imported')\n")
    (decoy / "__main__.py").write_text("raise SystemExit('the decoy fastmq ran')\n")
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        with BrokerProcess(tmp_path / "data") as process:
            assert process.running
    finally:
        os.chdir(cwd)
