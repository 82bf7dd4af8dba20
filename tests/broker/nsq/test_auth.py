"""nsqd's AUTH on the embedded broker, against an auth server run by the test (nsqd's --auth-http-address)."""
from __future__ import annotations

import json
import socket
import ssl
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.broker.nsq.auth import AuthServerError, parse_state
from fastmq.errors import ConfigurationError
from fastmq.nsq import Consumer, Producer
from fastmq.nsq._native import codec
from tests.broker.nsq.test_nsqd import read_frame
from tests.support.nsq import AuthServer, receive
from tests.support.servers import free_port

WAIT = 20.0
# secret -> the auth server's answer (None: it fails with a 500; "": any other secret)
ANSWERS = {
    "publisher": {"ttl": 3600, "identity": "pub", "identity_url": "http://id/pub", "authorizations": [
        {"topic": "^auth_", "channels": [".*"], "permissions": ["publish"]}]},
    "reader": {"ttl": 1, "identity": "reader", "authorizations": [
        {"topic": "^auth_t$", "channels": ["^ok$"], "permissions": ["subscribe"]},
        {"topic": "^auth_t$", "channels": [".*"], "permissions": ["publish"]}]},
    "": {"ttl": 60, "authorizations": []},
    "broken": None,
}


@pytest.fixture(scope="module")
def auth_server():
    with AuthServer(ANSWERS) as server:
        yield server


@pytest.fixture(scope="module")
def broker(auth_server):
    # Two auth servers, the first one dead: nsqd asks them in turn (from a random one on) until one answers.
    with EmbeddedBroker(listeners=[ListenerConfig(protocol="nsq")], front_end_options={"nsq": {
            "auth_http_addresses": [f"127.0.0.1:{free_port()}", auth_server.address]}}) as started:
        yield started


def address(broker) -> str:
    return "%s:%d" % broker.addresses[0]


def session(broker, secret: str | None) -> socket.socket:
    """A raw connection after IDENTIFY (and AUTH with the secret, whose answer the caller reads)."""
    sock = socket.create_connection(broker.addresses[0], timeout=WAIT)
    sock.sendall(codec.MAGIC_V2 + codec.identify({"feature_negotiation": True}))
    frame_type, data = read_frame(sock)
    assert frame_type == codec.FRAME_RESPONSE and json.loads(data)["auth_required"] is True
    if secret is not None:
        sock.sendall(codec.auth(secret))
    return sock


def test_auth_answer_and_publish_permissions(broker, auth_server):
    asked = auth_server.asked
    with session(broker, "publisher") as sock:
        # PUB right behind AUTH: it waits for the auth server's answer, in order
        sock.sendall(codec.pub("auth_x", b"m"))
        frame_type, data = read_frame(sock)
        assert json.loads(data) == {"identity": "pub", "identity_url": "http://id/pub", "permission_count": 1}
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        assert asked[-1]["secret"] == "publisher" and asked[-1]["remote_ip"] == "127.0.0.1"
        assert asked[-1]["tls"] == "false" and asked[-1]["common_name"] == "" and asked[-1]["method"] == "GET"
        sock.sendall(codec.sub("auth_x", "c"))             # publish only
        frame_type, data = read_frame(sock)
        assert frame_type == codec.FRAME_ERROR and data.startswith(b"E_UNAUTHORIZED AUTH failed for SUB")
        assert sock.recv(1) == b""                         # fatal
    with session(broker, "publisher") as sock:
        read_frame(sock)
        sock.sendall(codec.pub("other", b"m"))
        assert read_frame(sock)[1].startswith(b"E_UNAUTHORIZED")


@pytest.mark.parametrize("secret, error", [(None, b"E_AUTH_FIRST AUTH required before PUB"),
                                           ("nobody", b"E_UNAUTHORIZED AUTH no authorizations found"),
                                           ("broken", b"E_AUTH_FAILED AUTH failed")])
def test_auth_refusals_are_fatal(broker, secret, error):
    with session(broker, secret) as sock:
        if secret is None:
            sock.sendall(codec.pub("auth_x", b"m"))
        assert read_frame(sock) == (codec.FRAME_ERROR, error)
        assert sock.recv(1) == b""


def test_subscribe_permission_and_expired_answers_are_asked_again(broker, auth_server):
    asked = auth_server.asked
    with Producer(address(broker), auth_secret="reader") as producer, \
            Consumer("auth_t", "ok", nsqd_tcp_addresses=address(broker), auth_secret="reader") as consumer:
        producer.publish("auth_t", b"first").result(WAIT)
        assert receive(consumer, 1)[0].body == b"first"
        before = sum(1 for query in asked if query["secret"] == "reader")
        # the reader's answer lives 1 s: the next PUB after that asks the auth server again
        threading.Event().wait(1.1)
        producer.publish("auth_t", b"second").result(WAIT)
        assert sum(1 for query in asked if query["secret"] == "reader") == before + 1
        assert receive(consumer, 1)[0].body == b"second"
    with session(broker, "reader") as sock:
        read_frame(sock)
        sock.sendall(codec.sub("auth_t", "other"))         # not the reader's channel
        assert read_frame(sock)[1].startswith(b"E_UNAUTHORIZED AUTH failed for SUB on 'auth_t' 'other'")


def test_auth_without_an_auth_server_is_disabled():
    with EmbeddedBroker(listeners=[ListenerConfig(protocol="nsq")]) as broker:
        with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
            sock.sendall(codec.MAGIC_V2 + codec.auth("secret"))
            assert read_frame(sock) == (codec.FRAME_ERROR, b"E_AUTH_DISABLED AUTH disabled")


@pytest.mark.parametrize("answer", [b"[]", b"not json", b'{"ttl": 0}', b'{"ttl": 5, "authorizations": [1]}',
                                    b'{"ttl": 5, "authorizations": [{"topic": "(", "permissions": []}]}',
                                    b'{"ttl": 5, "authorizations": [{"topic": "t", "permissions": ["admin"]}]}'])
def test_bad_auth_server_answers_are_refused(answer):
    with pytest.raises(AuthServerError):
        parse_state(answer)


def test_cli_flag_turns_auth_on(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--nsqd", "127.0.0.1:0",
                                      "--nsqd-auth-http-address", "127.0.0.1:4181"])
    assert broker_config(args).front_end_options == {"nsq": {"auth_http_addresses": ["127.0.0.1:4181"],
                                                             "auth_http_request_method": "get"}}
    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--nsqd", "127.0.0.1:0",
                                      "--nsqd-auth-http-address", "127.0.0.1:4181", "--nsqd-auth-http-address",
                                      "http://127.0.0.1:4182/check", "--nsqd-auth-http-request-method", "post"])
    assert broker_config(args).front_end_options == {"nsq": {
        "auth_http_addresses": ["127.0.0.1:4181", "http://127.0.0.1:4182/check"],
        "auth_http_request_method": "post"}}


def test_unknown_request_method_is_refused():
    with pytest.raises(ConfigurationError, match="get or post"):
        EmbeddedBroker(listeners=[ListenerConfig(protocol="nsq")], front_end_options={"nsq": {
            "auth_http_addresses": ["127.0.0.1:1"], "auth_http_request_method": "put"}}).start()


def test_post_questions_and_the_tls_common_name(auth_server, pki):
    """nsqd's --auth-http-request-method=post, a URL as the address, and the verified client certificate's
    common name in the question once the connection upgraded to TLS."""
    listener = ListenerConfig(protocol="nsq", ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key,
                              ssl_cafile=pki.ca_file, ssl_client_auth="requested")
    tls = ssl.create_default_context(cafile=pki.ca_file)
    tls.load_cert_chain(pki.client_cert, pki.client_key, pki.key_password)
    with EmbeddedBroker(listeners=[listener], front_end_options={"nsq": {
            "auth_http_addresses": [f"http://{auth_server.address}/auth"],
            "auth_http_request_method": "post"}}) as started:
        with Producer(address(started), auth_secret="publisher", tls=tls,
                      tls_server_hostname="localhost") as producer:
            producer.publish("auth_tls", b"m").result(WAIT)
        assert auth_server.asked[-1] == {"remote_ip": "127.0.0.1", "tls": "true", "secret": "publisher",
                                         "common_name": "test-client", "method": "POST"}
        with Producer(address(started), auth_secret="publisher") as producer:
            producer.publish("auth_tls", b"m").result(WAIT)
        assert auth_server.asked[-1]["tls"] == "false" and auth_server.asked[-1]["common_name"] == ""


def test_auth_fails_when_no_auth_server_answers(auth_server):
    with EmbeddedBroker(listeners=[ListenerConfig(protocol="nsq")], front_end_options={"nsq": {
            "auth_http_addresses": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}}) as started:
        with session(started, "publisher") as sock:
            assert read_frame(sock) == (codec.FRAME_ERROR, b"E_AUTH_FAILED AUTH failed")
            assert sock.recv(1) == b""


AUTH_NAMES = st.sampled_from(["ttl", "identity", "identity_url", "authorizations", "topic", "channels",
                              "permissions", "subscribe", "publish", ".*", "("])
AUTH_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3600) | st.text(max_size=5) | AUTH_NAMES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(AUTH_NAMES, inner, max_size=5),
    max_leaves=20)
AUTHORIZATIONS = st.lists(st.fixed_dictionaries({}, optional={
    "topic": AUTH_VALUES, "channels": st.one_of(st.lists(AUTH_VALUES, max_size=2), AUTH_VALUES),
    "permissions": st.one_of(st.lists(st.sampled_from(["subscribe", "publish"]), max_size=2), AUTH_VALUES)}),
    max_size=3)
ANSWER_DOCUMENTS = st.fixed_dictionaries({"ttl": st.one_of(st.integers(1, 3600), AUTH_VALUES)}, optional={
    "authorizations": st.one_of(AUTHORIZATIONS, AUTH_VALUES), "identity": AUTH_VALUES})


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=40),
                 st.one_of(ANSWER_DOCUMENTS, AUTH_VALUES).map(lambda value: json.dumps(value).encode())))
def test_any_auth_server_answer_parses_or_is_refused(answer):
    try:
        state = parse_state(answer)
    except AuthServerError:
        return
    assert state.expires > 0 and all(isinstance(a.permissions, frozenset) for a in state.authorizations)
