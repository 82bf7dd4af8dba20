"""The embedded broker, in a process of its own with its default --max-connections, serves 10,000 Kafka clients
connected at once (issue 22: Apache Kafka served 5000 where the broker refused every connection past 1024)."""
from __future__ import annotations

import resource

import pytest

from fastmq.broker import BrokerProcess
from fastmq.io.limits import ensure_open_file_limit
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey
from tests.support.kafka_wire import Wire

CLIENTS = 10_000
WAVE = 100          # connections opened before their answers are read: below the listener's accept backlog


@pytest.fixture
def descriptors_for_the_clients():
    """This process holds one descriptor per client: its soft RLIMIT_NOFILE is raised for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ensure_open_file_limit(CLIENTS)
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def api_versions_sent(wire: Wire) -> int:
    return wire.send(ApiKey.API_VERSIONS, 0, kp.ApiVersionsRequest())


def test_ten_thousand_clients_are_served_at_once(tmp_path, descriptors_for_the_clients):
    broker = BrokerProcess(tmp_path / "data").start()
    wires: list[Wire] = []
    try:
        # Opened in waves, each answered before the next opens, so that no connect waits on a full backlog.
        for _ in range(CLIENTS // WAVE):
            wave = [Wire(broker.bootstrap_servers) for _ in range(WAVE)]
            wires.extend(wave)
            sent = [api_versions_sent(wire) for wire in wave]
            for wire, correlation_id in zip(wave, sent):
                assert wire.receive(ApiKey.API_VERSIONS, 0, correlation_id).error_code == 0
        # All of them still open and served: each asks again.
        sent = [api_versions_sent(wire) for wire in wires]
        for index, (wire, correlation_id) in enumerate(zip(wires, sent)):
            response = wire.receive(ApiKey.API_VERSIONS, 0, correlation_id)
            assert response.error_code == 0, f"client {index}: {response.error_code}"
        assert broker.running
    finally:
        for wire in wires:
            wire.sock.close()
        broker.stop()
