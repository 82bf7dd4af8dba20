"""SASL state machines: RFC 5802 / RFC 7677 vectors, refusals, fuzzing, and a round trip over the loop
(the client's handshake hook authenticates against a Listener before the connection becomes ready)."""
from __future__ import annotations

import base64
import functools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import ConfigurationError, ProtocolError
from fastmq.io import AuthenticationError, ConnectionClosedError, Listener, ServerHandler
from fastmq.io.adapter import HandshakeStep
from fastmq.io.sasl import (
    PlainClient,
    PlainServer,
    SaslStep,
    ScramClient,
    ScramCredential,
    ScramServer,
    create_client,
    escape_username,
    saslprep,
    unescape_username,
)

WAIT = 10.0

# RFC 5802 section 5 (SCRAM-SHA-1) and RFC 7677 section 3 (SCRAM-SHA-256), user "user", password "pencil".
RFC5802 = dict(
    hash_name="sha1", client_nonce="fyko+d2lbbFgONRv9qkxdawL", server_nonce="3rfcNHYJY1ZVvWVs7j",
    salt="QSXCR+Q6sek8bf92",
    client_first=b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    server_first=b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    client_final=b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    server_final=b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
)
RFC7677 = dict(
    hash_name="sha256", client_nonce="rOprNGfwEbeRWgbNEkqO", server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    salt="W22ZaJ0SNY7soEsUEjb6gQ==",
    client_first=b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    server_first=b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    client_final=(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                  b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
    server_final=b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
)


@pytest.mark.parametrize("vector", [RFC5802, RFC7677], ids=["rfc5802-sha1", "rfc7677-sha256"])
def test_client_reproduces_the_rfc_exchange(vector):
    client = ScramClient("user", "pencil", vector["hash_name"], nonce=vector["client_nonce"])
    assert client.mechanism == {"sha1": "SCRAM-SHA-1", "sha256": "SCRAM-SHA-256"}[vector["hash_name"]]
    assert client.first_message() == vector["client_first"]
    assert client.process(vector["server_first"]) == vector["client_final"]
    assert not client.complete
    assert client.process(vector["server_final"]) is None
    assert client.complete


@pytest.mark.parametrize("vector", [RFC5802, RFC7677], ids=["rfc5802-sha1", "rfc7677-sha256"])
def test_server_reproduces_the_rfc_exchange(vector):
    credential = ScramCredential.from_password("pencil", vector["hash_name"],
                                               salt=base64.b64decode(vector["salt"]), iterations=4096)
    server = ScramServer(vector["hash_name"], {"user": credential}.get, nonce=vector["server_nonce"])
    assert server.process(vector["client_first"]) == vector["server_first"]
    assert server.process(vector["client_final"]) == vector["server_final"]
    assert server.complete and server.username == "user"


def test_client_refuses_a_server_that_does_not_know_the_password():
    client = ScramClient("user", "pencil", "sha256", nonce=RFC7677["client_nonce"])
    client.first_message()
    client.process(RFC7677["server_first"])
    with pytest.raises(AuthenticationError, match="signature"):
        client.process(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert not client.complete


@pytest.mark.parametrize("server_first, match", [
    (b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),  # not extended
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000", "iteration"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=999999999", "iteration"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=***,i=4096", "base64"),
    (b"e=unknown-user", "refused"),
    (b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "extension"),
    (b"s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "expected"),
])
def test_client_refuses_bad_server_first_messages(server_first, match):
    client = ScramClient("user", "pencil", "sha256", nonce=RFC7677["client_nonce"])
    client.first_message()
    with pytest.raises(AuthenticationError, match=match):
        client.process(server_first)


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_scram_round_trip_and_wrong_password(hash_name):
    store = {"alice": ScramCredential.from_password("s3cret,=", hash_name)}
    client = ScramClient("alice", "s3cret,=", hash_name)
    server = ScramServer(hash_name, store.get)
    final = client.process(server.process(client.first_message()))
    assert client.process(server.process(final)) is None
    assert client.complete and server.complete and server.username == "alice"

    for user, password in (("alice", "wrong"), ("mallory", "s3cret,=")):
        client = ScramClient(user, password, hash_name)
        server = ScramServer(hash_name, store.get)
        final = client.process(server.process(client.first_message()))
        # Wrong password and unknown user fail the same way, at the proof.
        with pytest.raises(AuthenticationError, match="authentication failed"):
            server.process(final)


def test_scram_server_checks_the_channel_binding_and_nonce_and_extensions():
    store = {"u": ScramCredential.from_password("p", "sha256")}
    server = ScramServer("sha256", store.get)
    with pytest.raises(AuthenticationError, match="channel binding"):
        server.process(b"p=tls-unique,,n=u,r=abc")
    server = ScramServer("sha256", store.get)
    with pytest.raises(AuthenticationError, match="mandatory"):
        server.process(b"n,,n=u,r=abc,m=x")
    server = ScramServer("sha256", store.get)
    server.process(b"n,,n=u,r=abc")
    with pytest.raises(AuthenticationError, match="nonce"):
        server.process(b"c=biws,r=abcdifferent,p=AAAA")
    server = ScramServer("sha256", store.get)
    server.process(b"n,,n=u,r=abc")
    with pytest.raises(AuthenticationError, match="channel binding"):
        server.process(b"c=eSws,r=abc" + server._server_nonce.encode() + b",p=AAAA")
    with pytest.raises(AuthenticationError, match="over"):
        server.process(b"anything")


def test_authzid_and_extensions_reach_the_server():
    store = {"a,b=c": ScramCredential.from_password("pw", "sha512")}
    client = ScramClient("a,b=c", "pw", "sha512", authzid="a,b=c", extensions={"tokenauth": "true"})
    first = client.first_message()
    assert first == b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=" + client._nonce.encode() + b",tokenauth=true"
    server = ScramServer("sha512", store.get)
    final = client.process(server.process(first))
    client.process(server.process(final))
    assert server.username == "a,b=c" and server.authzid == "a,b=c"
    assert server.extensions == {"tokenauth": "true"}


def test_username_escaping_round_trips():
    for name in ("plain", "a=b", "a,b", "=,=2C,=3D", ""):
        assert unescape_username(escape_username(name)) == name
    with pytest.raises(AuthenticationError):
        unescape_username("bad=XYname")


def test_saslprep_follows_rfc_4013_examples():
    assert saslprep("I\u00adX") == "IX"        # soft hyphen mapped to nothing
    assert saslprep("user") == "user"
    assert saslprep("USER") == "USER"          # no case folding
    assert saslprep("\u00aa") == "a"           # NFKC
    assert saslprep("\u2168") == "IX"          # NFKC
    assert saslprep("a\u00a0b") == "a b"       # non-ASCII space
    with pytest.raises(AuthenticationError, match="prohibited"):
        saslprep("\u0007")
    with pytest.raises(AuthenticationError, match="bidirectional"):
        saslprep("\u0627\u0031")
    # Kafka's brokers hash the raw UTF-8: the switch keeps such passwords compatible.
    raw = ScramCredential.from_password("I\u00adX", "sha256", salt=b"s" * 16, use_saslprep=False)
    prepped = ScramCredential.from_password("I\u00adX", "sha256", salt=b"s" * 16)
    assert raw != prepped


def test_plain_client_and_server():
    client = PlainClient("alice", "pw")
    assert client.mechanism == "PLAIN" and client.first_message() == b"\0alice\0pw"
    server = PlainServer(lambda user, password: (user, password) == ("alice", "pw"))
    assert server.process(client.first_message()) == b"" and server.complete and server.username == "alice"
    assert client.process(b"") is None and client.complete
    assert PlainServer(lambda u, p: True).process(b"alice\0alice\0pw") == b""
    for message, match in ((b"\0alice\0wrong", "failed"), (b"bob\0alice\0pw", "authorization"),
                           (b"alice\0pw", "malformed"), (b"\0\0pw", "empty"), (b"\0\xff\0pw", "UTF-8")):
        with pytest.raises(AuthenticationError, match=match):
            PlainServer(lambda user, password: (user, password) == ("alice", "pw")).process(message)


def test_create_client_by_mechanism_name():
    assert isinstance(create_client("PLAIN", "u", "p"), PlainClient)
    assert create_client("SCRAM-SHA-256", "u", "p").mechanism == "SCRAM-SHA-256"
    assert create_client("SCRAM-SHA-512", "u", "p").mechanism == "SCRAM-SHA-512"
    with pytest.raises(ConfigurationError, match="GSSAPI"):
        create_client("GSSAPI", "u", "p")
    with pytest.raises(ValueError):
        ScramClient("u", "p", "md5")


@settings(max_examples=300, deadline=None)
@given(first=st.binary(max_size=200), second=st.binary(max_size=200))
def test_random_client_messages_only_raise_authentication_errors(first, second):
    store = {"user": ScramCredential.from_password("pencil", "sha256", iterations=4096)}
    server = ScramServer("sha256", store.get)
    try:
        server.process(first)
        server.process(second)
    except AuthenticationError:
        pass
    try:
        PlainServer(lambda u, p: False).process(first)
    except AuthenticationError:
        pass


@settings(max_examples=300, deadline=None)
@given(message=st.one_of(
    st.binary(max_size=200),
    st.text(max_size=60).map(lambda tail: ("r=rOprNGfwEbeRWgbNEkqO" + tail).encode("utf-8", "surrogatepass"))))
def test_random_server_messages_only_raise_authentication_errors(message):
    client = ScramClient("user", "pencil", "sha256", nonce=RFC7677["client_nonce"], max_iterations=8192)
    client.first_message()
    try:
        final = client.process(message)
        client.process(message if final is None else b"v=" + message)
    except AuthenticationError:
        pass


# ---- over the loop: the handshake hook authenticates before the connection is ready ---------------

CREDENTIALS = {"alice": "wonderland"}


class AuthenticatingHandler(ServerHandler):
    """Command M = choose the mechanism; A = one SASL step; E = echo, only once authenticated."""

    def frame_received(self, conn, frame, reply):
        cid, command, body = frame[:4], frame[4:5], frame[5:]
        if command == b"M":
            conn.session = self._server(body.decode())
            payload = cid + b"+"
        elif command == b"A":
            try:
                answer, status = conn.session.process(body), b"+"
            except AuthenticationError as exc:
                answer, status = str(exc).encode(), b"-"
            payload = cid + status + answer
        elif conn.session is not None and conn.session.complete:
            payload = frame
        else:
            raise ProtocolError("request before authentication")
        reply(struct.pack(">i", len(payload)) + payload)

    @staticmethod
    def _server(mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer(lambda user, password: CREDENTIALS.get(user) == password)
        hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        store = {user: ScramCredential.from_password(password, hash_name) for user, password in CREDENTIALS.items()}
        return ScramServer(hash_name, store.get)


@pytest.fixture
def sasl_listener(loop):
    listener = Listener(loop, functools.partial(KafkaFrameSplitter, max_frame_size=1 << 16),
                        AuthenticatingHandler())
    yield listener
    listener.close()


@pytest.fixture
def sasl_adapter(echo_adapter_cls, frame):
    def exchange(conn, command: bytes, message: bytes, on_reply) -> None:
        """One request of the test protocol; a "-" answer is a refusal."""
        def answered(response, error) -> None:
            if error is not None:
                return  # the connection is closing with that error already
            status, data = response[4:5], response[5:]
            if status != b"+":
                conn.close(AuthenticationError(f"the server refused: {data.decode()}"))
            else:
                on_reply(data)

        cid = conn.next_correlation_id()
        conn.handshake_request(frame(cid, command + message), answered, cid)

    class ChooseMechanism(HandshakeStep):
        def __init__(self, mechanism: str) -> None:
            self.mechanism = mechanism

        def start(self, conn, done) -> None:
            exchange(conn, b"M", self.mechanism.encode(), lambda _: done())

    class SaslAdapter(echo_adapter_cls):
        """SASL as two handshake steps: the mechanism, then fastmq.io.sasl.SaslStep over command A."""

        def __init__(self, mechanism: str, username: str, password: str) -> None:
            super().__init__()
            self.mechanism, self.username, self.password = mechanism, username, password

        def handshake_steps(self):
            client = create_client(self.mechanism, self.username, self.password)
            return [ChooseMechanism(self.mechanism),
                    SaslStep(client, lambda conn, message, on_reply: exchange(conn, b"A", message, on_reply))]

    return SaslAdapter


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_handshake_over_the_loop(loop, sasl_listener, sasl_adapter, connect, mechanism):
    client = connect(sasl_listener.address[1], sasl_adapter(mechanism, "alice", "wonderland"))
    assert client.send(b"E", b"authenticated").result(WAIT)[4:] == b"Eauthenticated"
    (server_conn,) = sasl_listener.connections
    assert server_conn.session.username == "alice"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_refusal_fails_the_connection_for_good(loop, sasl_listener, sasl_adapter, connect, mechanism):
    client = connect(sasl_listener.address[1], sasl_adapter(mechanism, "alice", "wrong"), wait=False)
    with pytest.raises(AuthenticationError, match="authentication failed") as info:
        client.ready.result(WAIT)
    assert not info.value.retriable


def test_requests_before_authentication_are_refused_by_the_server(loop, sasl_listener, connect):
    client = connect(sasl_listener.address[1])  # the plain echo adapter skips the handshake
    with pytest.raises(ConnectionClosedError, match="closed by the peer"):
        client.send(b"E", b"sneaky").result(WAIT)
