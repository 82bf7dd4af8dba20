"""Fixtures of the Kafka tests beyond the session-wide brokers (tests/conftest.py): brokers behind a
fault-injecting proxy, brokers reached over TLS, Tansu with authentication required, a three-node Apache
Kafka cluster for fault tests, and the loop of scripted brokers (tests/support/scripted_kafka.py)."""
from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import pytest

from fastmq.io import IOLoop
from tests.support.apache_kafka import KafkaCluster
from tests.support.brokers import DEFAULT_BROKERS
from tests.support.faults import FaultProxy
from tests.support.servers import SERVER_LOGS
from tests.support.tansu import RUNNING as _running, start_tansu


@dataclass
class ProxiedBroker:
    """A broker that advertises a FaultProxy's address, so every client connection crosses it."""

    broker: Any
    proxy: FaultProxy

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.address


@pytest.fixture(params=DEFAULT_BROKERS)
def proxied_kafka(request):
    """A broker reached only through a FaultProxy (.proxy), for fault injection tests: a fresh Tansu, or the
    session's Apache Kafka through its PROXIED listener, with the proxy healed and every old connection cut."""
    if request.param == "apache":
        proxy = request.getfixturevalue("apache_kafka_proxy")
        proxy.heal()
        proxy.disconnect_all()
        proxy.connections = proxy.cuts = 0
        yield ProxiedBroker(request.getfixturevalue("apache_kafka"), proxy)
        proxy.heal()
        proxy.disconnect_all()
    else:
        yield from _proxied_tansu(None)


@dataclass
class TlsBroker:
    broker: Any
    bootstrap_servers: str


@pytest.fixture(params=DEFAULT_BROKERS)
def tls_kafka(request, pki):
    """A broker reached over TLS with the test PKI's server certificate (127.0.0.1/localhost): Apache Kafka's
    SSL listener, or a fresh Tansu behind a TLS-terminating proxy (Tansu 0.6 itself does not do TLS)."""
    if request.param == "apache":
        broker = request.getfixturevalue("apache_kafka")
        yield TlsBroker(broker, broker.listener("SSL"))
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    for proxied in _proxied_tansu(context):
        yield TlsBroker(proxied.broker, proxied.bootstrap_servers)


@pytest.fixture(scope="module")
def apache_kafka_cluster(tmp_path_factory):
    """Three Apache Kafka nodes (each broker and controller voter) for the fault tests of one module:
    .node(id).kill() is kill -9, .restart(id) brings a node back on its data."""
    with KafkaCluster(tmp_path_factory.mktemp("apache-kafka-cluster"), 3) as cluster:
        SERVER_LOGS["apache_kafka_cluster"] = cluster.log_tails
        try:
            yield cluster
        finally:
            del SERVER_LOGS["apache_kafka_cluster"]


@pytest.fixture
def authenticating_tansu():
    """A fresh Tansu started with --authentication (SCRAM required)."""
    broker = start_tansu(extra_args=("--authentication",))
    _running.append(broker)
    try:
        yield broker
    finally:
        broker.stop()
        _running.remove(broker)


def _proxied_tansu(tls_context: Any):
    broker = None
    proxy = None
    try:
        # The proxy needs the broker's port and the broker the proxy's: reserve the proxy port first.
        proxy = FaultProxy(upstream_port=0, tls_context=tls_context)
        broker = start_tansu(advertised_port=proxy.port)
        proxy.upstream_port = broker.port
        _running.append(broker)
        yield ProxiedBroker(broker, proxy)
    finally:
        if proxy is not None:
            proxy.stop()
        if broker is not None:
            broker.stop()
            if broker in _running:
                _running.remove(broker)


@pytest.fixture
def scripted_loop():
    """The I/O loop that ScriptedCluster's brokers serve on."""
    loop = IOLoop(name="scripted-brokers")
    loop.start()
    yield loop
    loop.stop()
    loop.join(5.0)
