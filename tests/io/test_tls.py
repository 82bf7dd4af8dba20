"""TLS through the loop: a throwaway PKI made with `cryptography`, fastmq's Listener as the TLS server
(and the plain echo server for the stalled-handshake case)."""
from __future__ import annotations

import functools
import socket
import struct

import pytest

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import ConfigurationError, FastMQError
from fastmq.io import ConnectTimeoutError, Listener, ServerHandler, TLSError
from fastmq.io.tls import create_client_context, create_server_context
from tests.support.waiting import WAIT, wait_for


class EchoHandler(ServerHandler):
    def __init__(self) -> None:
        self.peers: list = []
        self.lost: list = []

    def connection_made(self, conn) -> None:
        self.peers.append(conn.peer_certificate())

    def frame_received(self, conn, frame, reply) -> None:
        reply([struct.pack(">i", len(frame)), frame])

    def connection_lost(self, conn, error) -> None:
        self.lost.append(error)


@pytest.fixture
def tls_listener(loop, pki):
    listeners = []

    def _listen(handler=None, handshake_timeout: float = 2.0, **context_options) -> Listener:
        context = create_server_context(ssl_certfile=context_options.pop("certfile", pki.server_cert),
                                        ssl_keyfile=context_options.pop("keyfile", pki.server_key),
                                        **context_options)
        listener = Listener(loop, functools.partial(KafkaFrameSplitter, max_frame_size=1 << 24),
                            handler if handler is not None else EchoHandler(), ssl_context=context,
                            handshake_timeout=handshake_timeout)
        listeners.append(listener)
        return listener

    yield _listen
    for listener in listeners:
        listener.close()


def closed_by_peer(sock: socket.socket) -> bool:
    """Read (an alert, perhaps) until the peer closes; False if it does not within the bounds."""
    for _ in range(10):
        try:
            if sock.recv(4096) == b"":
                return True
        except ConnectionResetError:
            return True
        except (TimeoutError, socket.timeout):
            return False
    return False


def expect_failure(client, error_type):
    """The connection fails with error_type, at the handshake or (TLS 1.3 client auth) at first use."""
    try:
        client.ready.result(WAIT)
    except error_type as exc:
        return exc
    try:
        client.send(b"E").result(WAIT)
    except FastMQError:
        pass  # the request fails with the close error, or at once if the close came first
    else:
        pytest.fail("the request succeeded on a connection the server refused")
    error = client.closed.result(WAIT)
    assert isinstance(error, error_type), error
    return error


def test_tls_round_trips_with_ca_verification(loop, pki, tls_listener, connect):
    listener = tls_listener()
    context = create_client_context(ssl_cafile=pki.ca_file)
    for host in ("127.0.0.1", "localhost"):  # IP and DNS subject alternative names
        client = connect(listener.address[1], host=host, ssl_context=context, max_in_flight=50)
        futures = [client.send(b"E", b"secret-%d" % i) for i in range(50)]
        for i, future in enumerate(futures):
            assert future.result(WAIT)[4:] == b"Esecret-%d" % i
        assert client.conn.peer_certificate()["subject"] == ((("commonName", "localhost"),),)
        client.close()


def test_tls_large_and_many_small_writes(loop, pki, tls_listener, connect, frame):
    listener = tls_listener()
    options = ((socket.SOL_SOCKET, socket.SO_SNDBUF, 8192), (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1))
    client = connect(listener.address[1], ssl_context=create_client_context(ssl_cafile=pki.ca_file),
                     socket_options=options, max_in_flight=300)
    body = bytes(range(256)) * 8192  # 2 MiB in 200 parts: joined into TLS writes, partially written
    parts = [b"E"] + [memoryview(body)[i:i + 10486] for i in range(0, len(body), 10486)]
    results = {}

    def submit():
        cid = client.conn.next_correlation_id()
        header = struct.pack(">ii", 4 + sum(len(p) for p in parts), cid)
        client.conn.request([header] + parts, lambda r, e: results.setdefault("big", (r, e)), cid)

    client.call(submit)
    small = [client.send(b"E", b"%d" % i) for i in range(200)]
    for i, future in enumerate(small):
        assert future.result(WAIT)[5:] == b"%d" % i
    response, error = wait_for(lambda: results.get("big"), message="the big request's answer")
    assert error is None and response[4:] == b"E" + body


def test_untrusted_server_certificate_is_a_non_retriable_tls_error(loop, pki, tls_listener, connect):
    listener = tls_listener(certfile=pki.rogue_cert, keyfile=pki.rogue_key)
    client = connect(listener.address[1], wait=False, ssl_context=create_client_context(ssl_cafile=pki.ca_file))
    with pytest.raises(TLSError, match="certificate verification") as info:
        client.ready.result(WAIT)
    assert not info.value.retriable


def test_host_name_mismatch_fails_unless_the_check_is_off(loop, pki, tls_listener, connect):
    listener = tls_listener()
    client = connect(listener.address[1], wait=False, server_hostname="wrong.example",
                     ssl_context=create_client_context(ssl_cafile=pki.ca_file))
    with pytest.raises(TLSError, match="certificate verification"):
        client.ready.result(WAIT)
    lenient = connect(listener.address[1], server_hostname="wrong.example",
                      ssl_context=create_client_context(ssl_cafile=pki.ca_file, ssl_check_hostname=False))
    assert lenient.send(b"E", b"ok").result(WAIT)[4:] == b"Eok"


def test_client_certificate_authentication(loop, pki, tls_listener, connect):
    handler = EchoHandler()
    listener = tls_listener(handler, ssl_cafile=pki.ca_file, ssl_client_auth="required")
    anonymous = connect(listener.address[1], wait=False, ssl_context=create_client_context(ssl_cafile=pki.ca_file))
    # TLS 1.3: our handshake completes before the server checks; its alert surfaces at first use.
    error = expect_failure(anonymous, TLSError)
    assert not error.retriable

    context = create_client_context(ssl_cafile=pki.ca_file, ssl_certfile=pki.client_cert,
                                    ssl_keyfile=pki.client_key, ssl_password=pki.key_password)
    client = connect(listener.address[1], ssl_context=context)
    assert client.send(b"E", b"authenticated").result(WAIT)[4:] == b"Eauthenticated"
    assert handler.peers[-1]["subject"] == ((("commonName", "test-client"),),)


def test_revoked_client_certificate_is_refused_with_a_crl(loop, pki, tls_listener, connect):
    listener = tls_listener(ssl_cafile=pki.ca_file, ssl_client_auth="required", ssl_crlfile=pki.crl_file)
    revoked = connect(listener.address[1], wait=False, ssl_context=create_client_context(
        ssl_cafile=pki.ca_file, ssl_certfile=pki.revoked_cert, ssl_keyfile=pki.revoked_key))
    expect_failure(revoked, TLSError)
    good = connect(listener.address[1], ssl_context=create_client_context(
        ssl_cafile=pki.ca_file, ssl_certfile=pki.client_cert, ssl_keyfile=pki.client_key,
        ssl_password=pki.key_password.decode()))
    assert good.send(b"E").result(WAIT)


def test_tls_client_against_a_server_that_never_answers_times_out(loop, pki, echo_server, connect):
    # The plain echo server reads the ClientHello as the start of a huge frame and waits forever.
    client = connect(echo_server.port, wait=False, connect_timeout=0.3,
                     ssl_context=create_client_context(ssl_cafile=pki.ca_file))
    with pytest.raises(ConnectTimeoutError, match="tls_handshake"):
        client.ready.result(WAIT)


def test_tls_server_survives_plaintext_and_stalled_clients(loop, pki, tls_listener, connect):
    handler = EchoHandler()
    listener = tls_listener(handler, handshake_timeout=0.3)
    plaintext = socket.create_connection(listener.address, timeout=WAIT)
    plaintext.sendall(b"\x00\x00\x00\x05hello, not TLS")
    stalled = socket.create_connection(listener.address, timeout=WAIT)
    client = connect(listener.address[1], ssl_context=create_client_context(ssl_cafile=pki.ca_file))
    assert client.send(b"E", b"fine").result(WAIT)[4:] == b"Efine"
    for sock in (plaintext, stalled):  # both are closed: bad handshake, handshake timeout
        assert closed_by_peer(sock)
        sock.close()
    assert handler.lost == []  # they never became connections of the handler


def test_context_configuration_errors(pki, tmp_path):
    with pytest.raises(ConfigurationError, match="ssl_cafile"):
        create_client_context(ssl_cafile=str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigurationError, match="ssl_certfile"):
        create_client_context(ssl_cafile=pki.ca_file, ssl_certfile=pki.client_cert, ssl_keyfile=pki.client_key,
                              ssl_password=b"wrong password")
    with pytest.raises(ConfigurationError):
        create_client_context(ssl_keyfile=pki.client_key)
    with pytest.raises(ConfigurationError, match="ssl_ciphers"):
        create_client_context(ssl_cafile=pki.ca_file, ssl_ciphers="NO-SUCH-CIPHER")
    with pytest.raises(ConfigurationError, match="ssl_certfile"):
        create_server_context()
    with pytest.raises(ConfigurationError, match="ssl_client_auth"):
        create_server_context(ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key, ssl_client_auth="maybe")
    with pytest.raises(ConfigurationError, match="ssl_cafile"):
        create_server_context(ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key, ssl_client_auth="required")
    given = create_client_context(ssl_cafile=pki.ca_file)
    assert create_client_context(ssl_context=given) is given
