"""PyPI `rocketmq` 0.4.4 (the C++ client behind ctypes, sending language CPP, numbers as names and quoted
numbers in its heartbeats) against the embedded namesrv + broker: sync sends with keys, tags and a property, a
pull consumer and a push consumer reading them back. The client runs in a child process (pypi_peer.py)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import rocketmq_broker



@pytest.fixture(scope="module")
def peer_run(tmp_path_factory):
    if importlib.util.find_spec("rocketmq") is None:
        pytest.fail("PyPI rocketmq is missing: it is in the test extras (pip install -e '.[test]')")
    home = tmp_path_factory.mktemp("pypi-home")
    with rocketmq_broker(tmp_path_factory.mktemp("pypi") / "data") as embedded:
        done = subprocess.run([sys.executable, str(Path(__file__).with_name("pypi_peer.py")),
                               embedded.address("namesrv"), "pypi-topic", "pypi-group"],
                              env=dict(os.environ, HOME=str(home)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=120)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
        yield embedded, json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_sync_sends(peer_run):
    embedded, result = peer_run
    assert [s["status"] for s in result["sent"]] == [0] * 5               # SEND_OK
    stored = embedded.broker.store
    assert sum(stored.get_max_offset("pypi-topic", q) for q in range(4)) == 5


def test_pull_consumer(peer_run):
    _embedded, result = peer_run
    assert sorted(m["body"] for m in result["pulled"]) == [f"body-{i}" for i in range(5)]
    assert all(m["tags"] == "TagA" and m["color"] == "red" and m["keys"].startswith("key-") for m in result["pulled"])


def test_push_consumer(peer_run):
    embedded, result = peer_run
    assert result["pushed"] == [f"body-{i}" for i in range(5)]
    assert embedded.broker.store.subscription_group_manager.find_subscription_group_config("pypi-group-push")
