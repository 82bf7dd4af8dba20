"""TLS, authentication (signature, then the authorized token), the anti-bypass visit token, idle connections
reaped, and garbage on the master's socket."""
from __future__ import annotations

import socket

import pytest

from fastmq.broker.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.errors import OperationTimeoutError
from fastmq.io.tls import create_client_context
from fastmq.tubemq import ErrorCode, Message, Producer, PullConsumer, TubeMQError, rpc
from fastmq.tubemq._proto import broker_pb2
from fastmq.tubemq.message import checksum
from fastmq.tubemq.rpc_client import RpcClient
from tests.support.waiting import wait_for
from tests.tubemq.test_client import FAST, drain


@pytest.fixture(scope="module")
def secured(pki):
    """TLS listeners and one user."""
    tls = {"security_protocol": "SSL", "ssl_certfile": pki.server_cert, "ssl_keyfile": pki.server_key}
    embedded = EmbeddedBroker(listeners=[ListenerConfig(protocol="tubemq-master", **tls),
                                         ListenerConfig(protocol="tubemq-broker", **tls)],
                              users={"alice": "secret"}, num_partitions=2).start()
    (master_host, master_port), _ = embedded.addresses
    yield embedded, f"{master_host}:{master_port}"
    embedded.close()


def test_tls_and_authentication(secured, pki):
    embedded, master = secured
    context = create_client_context(ssl_cafile=pki.ca_file)
    with Producer(master, ssl_context=context, user="alice", password="secret", heartbeat_interval=0.3) as producer:
        producer.publish("sec-topic")
        assert producer.session.auth_token                       # handed out: carried instead of the signature
        wait_for(lambda: producer.session.certificate().HasField("authorizedToken"), timeout=10,
                 message="the producer carries the authorized token")
        producer.send(Message("sec-topic", b"secret message"))
    with PullConsumer(master, "sec-group", ["sec-topic"], ssl_context=context, user="alice", password="secret",
                      **FAST) as consumer:
        assert [m.body for m in drain(consumer, 1)] == [b"secret message"]
    with pytest.raises(TubeMQError) as refused, \
            Producer(master, ssl_context=context, user="alice", password="wrong") as intruder:
        intruder.publish("sec-topic")
    assert refused.value.code is ErrorCode.CERTIFICATE_FAILURE


def test_a_broker_refuses_clients_that_bypass_the_master(secured, pki):
    embedded, _ = secured
    client = RpcClient(ssl_context=create_client_context(ssl_cafile=pki.ca_file))
    try:
        data = b"sneaky"
        response = client.call(embedded.addresses[1], rpc.SEND_MESSAGE, broker_pb2.SendMessageRequestP2B(
            clientId="bypass", topicName="sec-topic", partitionId=0, data=data, flag=0, checkSum=checksum(data),
            sentAddr=0, authInfo=broker_pb2.AuthorizedInfo(visitAuthorizedToken=-2)), broker_pb2.SendMessageResponseB2P)
        assert response.errCode == ErrorCode.UNAUTHORIZED
    finally:
        client.close()


def test_idle_connections_are_reaped_and_come_back(tubemq):
    with Producer(tubemq.master, connections_max_idle_ms=300, heartbeat_interval=30) as producer:
        producer.publish("sec-idle")
        producer.send(Message("sec-idle", b"1"))
        broker = tubemq.broker_address
        wait_for(lambda: producer.rpc.loop.run_in_loop(lambda: not producer.rpc.is_ready(broker)), timeout=10,
                 message="the idle broker connection was closed")
        producer.send(Message("sec-idle", b"2"))                 # reconnects on demand


def test_garbage_closes_that_connection_only(tubemq):
    host, port = tubemq.master.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n" * 4)
        sock.settimeout(5)
        assert sock.recv(100) == b""                              # closed by the server
    truncated = rpc.encode_request(1, rpc.PRODUCER_REGISTER, b"\x0a\x05ab")  # a body that does not parse
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(truncated)
        sock.settimeout(5)
        assert sock.recv(100) == b""
    with Producer(tubemq.master) as producer:                     # others are served as before
        producer.publish("sec-after-garbage")


def test_consumption_rate_limit(tubemq):
    with Producer(tubemq.master) as producer:
        producer.publish("sec-rate")
        for index in range(8):
            producer.send(Message("sec-rate", b"r%d" % index), key=b"one")
    with PullConsumer(tubemq.master, "g-rate", ["sec-rate"], max_messages_per_second=1, min_pull_interval=0.05,
                      **FAST) as consumer:
        assert len(drain(consumer, 8)) == 8                       # one batch of 8: 7 s of debt at 1 message/s
        with pytest.raises(OperationTimeoutError, match="rate limit"):
            consumer.get_message(timeout=1)
