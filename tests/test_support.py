"""The test kit itself (tests/support): waits with deadlines, servers that die with their owner, fetches that
fail loudly."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.apache_kafka import KafkaCluster
from tests.support.faults import FaultProxy
from tests.support.servers import MavenServer, ServerUnavailable, fetch
from tests.support.waiting import WaitTimeout, wait_for

REPO = Path(__file__).resolve().parents[1]


def test_wait_for_returns_the_condition_and_times_out_naming_it():
    calls = []
    assert wait_for(lambda: calls.append(1) or (len(calls) >= 3 and "done"), timeout=5) == "done"
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match="never true .*42 tries"):
        wait_for(lambda: calls.append(1) and False, timeout=0.2, message=lambda: f"never true ({42} tries)")
    assert time.monotonic() - started < 5


OWNER = """
import sys, time
from pathlib import Path
from tests.support.servers import ServerProcess
server = ServerProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], Path(sys.argv[1]),
                       ready=lambda: True)
server.start()
print(server.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:      # a zombie waiting for its reaper is gone as a server
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_server_does_not_outlive_its_killed_owner(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "server.log")], stdout=subprocess.PIPE,
                             text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        server_pid = int(owner.stdout.readline())
        assert _alive(server_pid)
        owner.kill()                        # SIGKILL: the owner cleans nothing up
        owner.wait(30)
        wait_for(lambda: not _alive(server_pid), 30, message=f"the server (pid {server_pid}) exiting")
    finally:
        owner.kill()
        owner.wait(30)
        owner.stdout.close()


def test_a_server_that_cannot_be_fetched_fails_loudly_naming_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))           # no mvn, no java
    with pytest.raises(ServerUnavailable, match="Maven and Java 17"):
        fetch(MavenServer("nothing", "1", ("org.example:nothing:1",)))


def test_a_cluster_id_that_starts_with_a_dash_formats(tmp_path):
    # One id in 64 starts with "-"; the storage tool once read it as an option and the cluster never started.
    cluster = KafkaCluster(tmp_path)
    cluster.cluster_id = "-" + cluster.cluster_id[1:]
    node = cluster.nodes[0]
    cluster._format(node)
    meta = (node.directory / "data" / "meta.properties").read_text()
    assert f"cluster.id={cluster.cluster_id}\n" in meta


def test_a_fault_proxys_tap_sees_each_direction_before_it_is_passed_on():
    seen: list[tuple[int, bool, bytes]] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(5)
        proxy = FaultProxy(upstream_port=server.getsockname()[1],
                           tap=lambda number, to_server, data: seen.append((number, to_server, data)))
        try:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
                upstream, _ = server.accept()
                with upstream:
                    upstream.settimeout(5)
                    client.sendall(b"request")
                    assert upstream.recv(7, socket.MSG_WAITALL) == b"request"
                    assert seen == [(1, True, b"request")]          # noted before the server had it
                    upstream.sendall(b"response")
                    assert client.recv(8, socket.MSG_WAITALL) == b"response"
                    assert seen[1:] == [(1, False, b"response")]
        finally:
            proxy.stop()
