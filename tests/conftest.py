"""Fixtures and settings shared by the whole suite. Fixtures for one package live in its conftest.py."""
from __future__ import annotations

import datetime
import ipaddress
import logging
import os
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import HealthCheck, settings

from tests.support import early
from tests.support.shared import golden_path
from tests.support.apache_kafka import KafkaCluster, Security
from tests.support.brokers import BROKER_FIXTURES, DEFAULT_BROKERS, KAFKA_USERS
from tests.support.faults import FaultProxy
from tests.support.rocketmq import RocketMQCluster
from tests.support.servers import SERVER_LOGS
from tests.support.tansu import RUNNING, start_tansu

# Property tests run without per-example deadlines (the machine is shared with brokers started by other
# tests); FASTMQ_HYPOTHESIS_PROFILE=thorough multiplies the examples for a longer local run.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("FASTMQ_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def no_handler_failures(caplog):
    """Fails the test if a front end's request handler failed (the server logs that, and closes the connection):
    the fuzz tests of every front end take it."""
    caplog.set_level(logging.ERROR, logger="fastmq")
    yield
    failures = [r for r in caplog.records if "handler" in r.getMessage() or r.exc_info]
    assert not failures, failures[0].getMessage()


# ---- Kafka brokers on 127.0.0.1 -----------------------------------------------------------------------------
# Session-wide: Tansu, Apache Kafka (one KRaft node with every listener) and fastmq's embedded broker. Tests
# that take `kafka_broker` run against Tansu and Apache Kafka unless they name their brokers
# (tests/support/brokers.py). A failing test that used a server gets the tail of that server's log in its report.

@pytest.fixture(scope="session")
def tansu():
    """A Tansu broker on 127.0.0.1 for the whole session: .bootstrap_servers, .host, .port, .log_tail()."""
    broker = start_tansu()
    RUNNING.append(broker)
    try:
        yield broker
    finally:
        broker.stop()
        RUNNING.remove(broker)


@pytest.fixture(scope="session")
def apache_kafka_proxy():
    """The FaultProxy in front of the session's Apache Kafka PROXIED listener (see `proxied_kafka`)."""
    proxy = FaultProxy(upstream_port=0)
    yield proxy
    proxy.stop()


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory, pki, apache_kafka_proxy):
    """Apache Kafka (tests/support/apache_kafka.py), one KRaft node for the whole session: .bootstrap_servers
    (PLAINTEXT), .listener("SSL" | "SASL_PLAINTEXT" | "SASL_SSL" | "PROXIED"); TLS with the test PKI's server
    certificate, SASL users KAFKA_USERS for PLAIN and SCRAM-SHA-256/512."""
    directory = tmp_path_factory.mktemp("apache-kafka")
    keystore = directory / "keystore.pem"
    keystore.write_text(Path(pki.server_key).read_text() + Path(pki.server_cert).read_text())
    cluster = KafkaCluster(directory, 1, security=Security(keystore, KAFKA_USERS),
                           proxy_port=apache_kafka_proxy.port)
    with cluster:
        apache_kafka_proxy.upstream_port = cluster.nodes[0].ports["PROXIED"]
        SERVER_LOGS["apache_kafka"] = cluster.log_tails
        try:
            yield cluster
        finally:
            del SERVER_LOGS["apache_kafka"]


def _tansu_log() -> list[tuple[str, str]]:
    if not RUNNING:
        return []
    broker = RUNNING[-1]
    broker.keep_log = True
    return [(f"tansu output (tail of {broker.log_path})", broker.log_tail())]


SERVER_LOGS["tansu"] = _tansu_log


@pytest.fixture(scope="module", params=DEFAULT_BROKERS)
def kafka_broker(request):
    """A Kafka broker for the test: anything with .bootstrap_servers. Its parameter is a broker name ("tansu",
    "apache", "embedded"): DEFAULT_BROKERS unless the test names its own (tests/support/brokers.py)."""
    return request.getfixturevalue(BROKER_FIXTURES[request.param])


def _servers_used(item) -> set[str]:
    """The fixtures of the servers a test used: its own, and those its broker parameters name."""
    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    names.update(BROKER_FIXTURES[value] for value in params.values()
                 if isinstance(value, str) and value in BROKER_FIXTURES)
    if "authenticating_tansu" in names:
        names.add("tansu")
    return names


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    used = _servers_used(item)
    for server, log_tails in list(SERVER_LOGS.items()):
        if server in used:
            report.sections.extend(log_tails())


def pytest_collection_finish(session):
    if not session.config.option.collectonly:
        early.start_selected([item.nodeid for item in session.items])


def pytest_sessionfinish(session):
    early.stop_all()


# select() (py4j's callback server, subprocess pipes in some tests) fails on descriptors past 1023. A test after
# which the process holds more than this fails under its own name, not some later test that happens to select();
# the bar then rises above what is held, so that one leak fails one test.
_descriptor_ceiling = 768


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    global _descriptor_ceiling
    yield
    held = len(os.listdir("/proc/self/fd"))
    if held > _descriptor_ceiling:
        _descriptor_ceiling = held + 128
        raise AssertionError(f"the test process holds {held} file descriptors after this test: it or its fixtures "
                             "leave sockets, files or pipes open (select() fails past 1023)")


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """../shared/golden beside the repository (test vectors are read there, never copied in); the test is
    skipped when it is missing."""
    return golden_path()



KEY_PASSWORD = b"key-secret"


def _name(common_name: str) -> "x509.Name":
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, issuer_cert, issuer_key, key, *, ca: bool = False, server: bool = False,
                 serial: int | None = None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject))
               .issuer_name(issuer_cert.subject if issuer_cert is not None else _name(subject))
               .public_key(key.public_key())
               .serial_number(serial or x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            issuer_key.public_key()), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key if issuer_key is not None else key, hashes.SHA256())


class PKI:
    """Files of a CA, a server, two clients (one revoked), an untrusted CA and its server."""

    key_password = KEY_PASSWORD     # the client key (client_key) is encrypted with it

    def __init__(self, directory) -> None:
        self.dir = directory

        def write(name: str, data: bytes) -> str:
            path = directory / name
            path.write_bytes(data)
            return str(path)

        def pem(cert) -> bytes:
            return cert.public_bytes(serialization.Encoding.PEM)

        def key_pem(key, password: bytes | None = None) -> bytes:
            encryption = (serialization.BestAvailableEncryption(password) if password
                          else serialization.NoEncryption())
            return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _certificate("fastmq test CA", None, None, ca_key, ca=True)
        self.ca_file = write("ca.pem", pem(ca))

        server_key = ec.generate_private_key(ec.SECP256R1())
        self.server_cert = write("server.pem", pem(_certificate("localhost", ca, ca_key, server_key, server=True)))
        self.server_key = write("server.key", key_pem(server_key))

        client_key = ec.generate_private_key(ec.SECP256R1())
        self.client_cert = write("client.pem", pem(_certificate("test-client", ca, ca_key, client_key)))
        self.client_key = write("client.key", key_pem(client_key, KEY_PASSWORD))

        revoked_key = ec.generate_private_key(ec.SECP256R1())
        revoked = _certificate("revoked-client", ca, ca_key, revoked_key, serial=424242)
        self.revoked_cert = write("revoked.pem", pem(revoked))
        self.revoked_key = write("revoked.key", key_pem(revoked_key))
        now = datetime.datetime.now(datetime.timezone.utc)
        crl = (x509.CertificateRevocationListBuilder()
               .issuer_name(ca.subject)
               .last_update(now - datetime.timedelta(minutes=5))
               .next_update(now + datetime.timedelta(days=1))
               .add_revoked_certificate(x509.RevokedCertificateBuilder().serial_number(424242)
                                        .revocation_date(now - datetime.timedelta(minutes=1)).build())
               .sign(ca_key, hashes.SHA256()))
        self.crl_file = write("crl.pem", crl.public_bytes(serialization.Encoding.PEM))

        other_key = ec.generate_private_key(ec.SECP256R1())
        other_ca = _certificate("untrusted CA", None, None, other_key, ca=True)
        rogue_key = ec.generate_private_key(ec.SECP256R1())
        self.rogue_cert = write("rogue.pem", pem(_certificate("localhost", other_ca, other_key, rogue_key,
                                                              server=True)))
        self.rogue_key = write("rogue.key", key_pem(rogue_key))


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """A throwaway PKI (CA, server and client certificates, a CRL, an untrusted CA) in a temp directory."""
    return PKI(tmp_path_factory.mktemp("pki"))


# ---- Apache RocketMQ (the RocketMQ client tests, and the proxy's RocketMQ backend) ---------------------------

@pytest.fixture(scope="session")
def rocketmq_server(tmp_path_factory):
    """Apache RocketMQ 5.x on 127.0.0.1: .namesrv_addr, .broker_addr, .broker_name."""
    with RocketMQCluster(tmp_path_factory.mktemp("apache-rocketmq")) as cluster:
        SERVER_LOGS["rocketmq_server"] = cluster.log_tails
        try:
            yield cluster
        finally:
            del SERVER_LOGS["rocketmq_server"]


# ---- fastmq's embedded broker ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def embedded_broker(tmp_path_factory):
    """fastmq's own Kafka broker (fastmq.broker.EmbeddedBroker) on 127.0.0.1 for the whole session, in this
    process: .bootstrap_servers, .stats(), .data_dir. For tests of what Tansu gets wrong (ListOffsets LATEST,
    offsets_for_times, CreatePartitions, DescribeConfigs, max.message.bytes, first group join)."""
    from fastmq.broker import EmbeddedBroker

    # Few mapped files at once: the suite's topics of thousands of partitions would otherwise keep thousands of
    # descriptors open in this process, and libraries that select() (py4j) fail past descriptor 1023.
    broker = EmbeddedBroker(tmp_path_factory.mktemp("embedded-broker"), commit_log_file_size=32 << 20,
                            max_open_mapped_files=64)
    with broker:
        yield broker
