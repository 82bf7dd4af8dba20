"""The client's AUTH against the real nsqd 1.3.0 with auth servers run by the test (nsqd's --auth-http-address,
twice, the first one dead; TLS with verified client certificates). nsqd 1.3.0 asks with GET only: its
--auth-http-request-method came later (the broker's tests cover POST)."""
from __future__ import annotations

import ssl

import pytest

from fastmq.io import AuthenticationError
from fastmq.nsq import Consumer, NSQNoConnectionsError, Producer
from tests.support.nsq import NSQD, AuthServer, receive, tls_args
from tests.support.servers import free_port

WAIT = 20.0
ANSWERS = {
    "writer": {"ttl": 3600, "identity": "writer", "identity_url": "http://id/writer", "authorizations": [
        {"topic": "^auth_", "channels": [".*"], "permissions": ["publish", "subscribe"]}]},
    "": {"ttl": 60, "authorizations": []},
}


@pytest.fixture(scope="module")
def auth_server():
    with AuthServer(ANSWERS) as server:
        yield server


@pytest.fixture(scope="module")
def nsqd(tmp_path_factory, auth_server, pki):
    daemon = NSQD(tmp_path_factory.mktemp("nsqd-auth"), extra_args=(
        f"--auth-http-address=127.0.0.1:{free_port()}", f"--auth-http-address={auth_server.address}",
        *tls_args(pki.server_cert, pki.server_key),
        f"--tls-root-ca-file={pki.ca_file}", "--tls-client-auth-policy=require-verify",
        # a client-auth policy makes nsqd require TLS; tcp-https leaves its plain HTTP (the start's /ping) open
        "--tls-required=tcp-https")).start()
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def tls(pki) -> dict:
    """The client's TLS settings: nsqd's CA, the test client certificate (common name "test-client")."""
    context = ssl.create_default_context(cafile=pki.ca_file)
    context.load_cert_chain(pki.client_cert, pki.client_key, pki.key_password)
    return {"tls": context, "tls_server_hostname": "localhost"}


def test_auth_with_tls_client_certificate(nsqd, auth_server, tls):
    with Producer(nsqd.tcp_address, auth_secret="writer", **tls) as producer:
        producer.publish("auth_t", b"over tls").result(WAIT)
    assert auth_server.asked[-1] == {"remote_ip": "127.0.0.1", "tls": "true", "secret": "writer",
                                     "common_name": "test-client", "method": "GET"}
    asked = len(auth_server.asked)
    with Consumer("auth_t", "c", nsqd_tcp_addresses=nsqd.tcp_address, auth_secret="writer", **tls) as consumer:
        assert receive(consumer, 1)[0].body == b"over tls"
        identities = [sub.conn.adapter.identity for sub in consumer._subs.values() if sub.conn is not None]
    assert identities == [{"identity": "writer", "identity_url": "http://id/writer", "permission_count": 1}]
    assert len(auth_server.asked) == asked + 1


@pytest.mark.parametrize("secret, error", [(None, "give an auth_secret"), ("nobody", "refused the auth secret")])
def test_auth_refusals_fail_the_publish(nsqd, tls, secret, error):
    with Producer(nsqd.tcp_address, auth_secret=secret, **tls) as producer:
        with pytest.raises((AuthenticationError, NSQNoConnectionsError), match=error):
            producer.publish("auth_t", b"m").result(WAIT)
