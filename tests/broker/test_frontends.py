"""Front ends plug into the broker core by name (fastmq/broker/frontends.py): a second protocol beside Kafka is
started, given its listeners in order, asked for upkeep and statistics, and closed on the I/O thread."""
from __future__ import annotations

import socket
from typing import Any

import pytest

from fastmq.broker import frontends
from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.errors import ConfigurationError

from tests.support.waiting import wait_for

from .conftest import Wire, metadata, small_broker


class ProbeFrontEnd(FrontEnd):
    """A protocol that accepts connections and says nothing; it records what the broker asked of it."""

    instances: list[ProbeFrontEnd] = []

    def __init__(self, broker: Any, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.sockets: list[socket.socket] = []
        self.upkeeps = 0
        self.closed_in_loop: list[bool] = []
        ProbeFrontEnd.instances.append(self)

    def start(self) -> None:
        for listener in self.listeners:
            sock = socket.create_server((listener.host, listener.port))
            self.sockets.append(sock)
            self.addresses.append(sock.getsockname()[:2])

    def upkeep(self) -> None:
        self.upkeeps += 1

    def stats(self) -> dict[str, Any]:
        return {"probe": {"listeners": len(self.sockets)}}

    def close(self) -> None:
        self.closed_in_loop.append(self.broker.loop.in_loop_thread())
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def probe_protocol(monkeypatch):
    monkeypatch.setattr(ProbeFrontEnd, "instances", [])
    monkeypatch.setitem(frontends._registered, "probe", ProbeFrontEnd)
    return ProbeFrontEnd


def test_a_second_protocol_serves_beside_kafka(tmp_path, probe_protocol):
    listeners = [ListenerConfig(protocol="probe"), ListenerConfig.parse("kafka://127.0.0.1:0"),
                 ListenerConfig.parse("probe://127.0.0.1:0")]
    with small_broker(tmp_path / "data", listeners=listeners, stats_interval_ms=50) as embedded:
        (probe,) = probe_protocol.instances
        assert probe.listeners == [listeners[0], listeners[2]]
        probe_addresses = [sock.getsockname()[:2] for sock in probe.sockets]
        assert embedded.addresses == [probe_addresses[0], embedded.broker.front_end("kafka").addresses[0],
                                      probe_addresses[1]]
        # The first listener speaks the probe protocol; Kafka clients start at the first kafka listener.
        kafka_host, kafka_port = embedded.addresses[1]
        assert embedded.bootstrap_servers == f"{kafka_host}:{kafka_port}"
        wire = Wire((kafka_host, kafka_port))
        try:
            assert metadata(wire, []).brokers[0].port == kafka_port
        finally:
            wire.close()
        for address in probe_addresses:
            socket.create_connection(address, timeout=5).close()
        assert embedded.stats()["probe"] == {"listeners": 2}
        assert wait_for(lambda: probe.upkeeps > 0)
    assert probe.closed_in_loop == [True]


def test_unknown_protocols_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ConfigurationError, match="the protocols served are"):
        small_broker(tmp_path / "data", listeners=[ListenerConfig(protocol="carrier-pigeon")]).start()
    assert not (tmp_path / "data").exists()
