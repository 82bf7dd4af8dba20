"""TLS and SASL on the broker's listeners (fastmq/broker/auth.py, kafka/sasl.py): fastmq's producer over
SASL_PLAINTEXT and SASL_SSL with PLAIN and SCRAM, confluent-kafka over SASL_SSL, refused passwords, requests
before authentication, and the old SaslHandshake v0 framing."""
from __future__ import annotations

import ssl
import struct
import uuid

import pytest

from fastmq.broker import BrokerConfig, EmbeddedBroker, ListenerConfig
from fastmq.io.sasl import PlainClient, ScramClient
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

from .conftest import Wire

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory, pki):
    listeners = [
        ListenerConfig(security_protocol="SASL_PLAINTEXT"),
        ListenerConfig(security_protocol="SASL_SSL", ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key),
        ListenerConfig(security_protocol="SSL", ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key),
    ]
    config = BrokerConfig(data_dir=tmp_path_factory.mktemp("secured") / "data", listeners=listeners, users=USERS,
                          commit_log_file_size=4 << 20)
    with EmbeddedBroker(config=config) as broker:
        yield broker


def servers(broker, index: int) -> str:
    host, port = broker.addresses[index]
    return f"{host}:{port}"


def round_trip(bootstrap: str, **options) -> None:
    from fastmq.kafka import Consumer, Producer, TopicPartition

    topic = f"sec-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap, acks="all", **options) as producer:
        assert producer.send(topic, b"secret value").get(30).offset == 0
    with Consumer(bootstrap_servers=bootstrap, **options) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = []
        for _ in range(20):
            records += consumer.consume(10, 0.5)
            if records:
                break
    assert [r.value for r in records] == [b"secret value"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_fastmq_over_sasl_plaintext(secured, mechanism):
    round_trip(servers(secured, 0), security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
               sasl_plain_username="alice", sasl_plain_password="alice-secret")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_fastmq_over_sasl_ssl(secured, pki, mechanism):
    round_trip(servers(secured, 1), security_protocol="SASL_SSL", sasl_mechanism=mechanism,
               sasl_plain_username="bob", sasl_plain_password="bob-secret", ssl_cafile=pki.ca_file)


def test_fastmq_over_tls(secured, pki):
    round_trip(servers(secured, 2), security_protocol="SSL", ssl_cafile=pki.ca_file)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_confluent_over_sasl_ssl(secured, pki, mechanism):
    import confluent_kafka

    topic = f"ck-sec-{uuid.uuid4().hex[:8]}"
    common = {"bootstrap.servers": servers(secured, 1), "security.protocol": "SASL_SSL",
              "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret",
              "ssl.ca.location": pki.ca_file}
    producer = confluent_kafka.Producer(common)
    producer.produce(topic, b"over tls")
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**common, "group.id": "sec", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    message = None
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            break
    consumer.close()
    assert message is not None and message.value() == b"over tls"


def test_wrong_password_is_refused(secured):
    from fastmq.kafka import Producer

    with pytest.raises(kerrors.KafkaTimeoutError, match="authentication failed for user 'alice'"):
        with Producer(servers(secured, 0), security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                      sasl_plain_username="alice", sasl_plain_password="wrong", max_block_ms=3000,
                      request_timeout_ms=3000, delivery_timeout_ms=6000) as producer:
            producer.send("x", b"v").get(10)


def handshake(wire: Wire, mechanism: str, version: int = 1):
    return wire.request(ApiKey.SASL_HANDSHAKE, version, kp.SaslHandshakeRequest(mechanism=mechanism))


def authenticate(wire: Wire, token: bytes):
    return wire.request(ApiKey.SASL_AUTHENTICATE, 2, kp.SaslAuthenticateRequest(auth_bytes=token))


def test_sasl_exchange_over_the_wire(secured):
    wire = Wire(servers(secured, 0))
    # Only ApiVersions and the SASL requests before authentication.
    assert wire.request(ApiKey.API_VERSIONS, 3, kp.ApiVersionsRequest(client_software_name="t",
                                                                      client_software_version="1")).error_code == 0
    unsupported = handshake(wire, "GSSAPI")
    assert unsupported.error_code == kerrors.UnsupportedSaslMechanismError.errno
    assert set(unsupported.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert handshake(wire, "SCRAM-SHA-256").error_code == 0
    client = ScramClient("alice", "alice-secret", "sha256", use_saslprep=False)
    first = authenticate(wire, client.first_message())
    assert first.error_code == 0
    final = authenticate(wire, client.process(bytes(first.auth_bytes)))
    assert final.error_code == 0 and client.process(bytes(final.auth_bytes)) is None and client.complete
    assert wire.request(ApiKey.METADATA, 9, kp.MetadataRequest(topics=[])).brokers
    assert handshake(wire, "PLAIN").error_code == kerrors.IllegalSaslStateError.errno
    wire.close()


def test_requests_before_authentication_close_the_connection(secured):
    wire = Wire(servers(secured, 0))
    wire.send(ApiKey.METADATA, 9, kp.MetadataRequest(topics=[]))
    assert wire.closed_by_peer()


def test_failed_authentication_answers_then_accepts_nothing(secured):
    wire = Wire(servers(secured, 0))
    handshake(wire, "PLAIN")
    refused = authenticate(wire, PlainClient("alice", "nope").first_message())
    assert refused.error_code == kerrors.SaslAuthenticationFailedError.errno and "alice" in refused.error_message
    wire.send(ApiKey.API_VERSIONS, 0, kp.ApiVersionsRequest())
    assert wire.closed_by_peer()


def test_handshake_v0_then_raw_tokens(secured):
    wire = Wire(servers(secured, 0))
    assert handshake(wire, "PLAIN", version=0).error_code == 0
    token = PlainClient("bob", "bob-secret").first_message()
    wire.sock.sendall(struct.pack(">i", len(token)) + token)
    assert wire.receive_frame() == b""             # an empty server token: authenticated
    assert wire.request(ApiKey.METADATA, 9, kp.MetadataRequest(topics=[])).brokers
    wire.close()
    bad = Wire(servers(secured, 0))
    handshake(bad, "PLAIN", version=0)
    token = PlainClient("bob", "wrong").first_message()
    bad.sock.sendall(struct.pack(">i", len(token)) + token)
    assert bad.closed_by_peer()


def test_tls_listener_refuses_plaintext_and_untrusted_clients_see_the_certificate(secured, pki):
    plain = Wire(servers(secured, 2))
    plain.send(ApiKey.API_VERSIONS, 0, kp.ApiVersionsRequest())
    assert plain.closed_by_peer()
    context = ssl.create_default_context()          # without the test CA: the certificate is not trusted
    import socket

    with socket.create_connection(secured.addresses[2], timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            context.wrap_socket(raw, server_hostname="localhost")


def test_stats_record_principals(secured):
    wire = Wire(servers(secured, 0))
    handshake(wire, "PLAIN")
    assert authenticate(wire, PlainClient("alice", "alice-secret").first_message()).error_code == 0
    clients = secured.stats()["clients"]["clients"]
    assert any(c["principal"] == "alice" and c["listener"] == "SASL_PLAINTEXT" for c in clients)
    wire.close()
