"""In-place upgrades of live connections (TLS, snappy, deflate) with a small in-test protocol.

Framing: [size i32][id i32][command u8][body]; id -1 marks a frame the server pushes. Commands: E echo;
Z / D switch to snappy / deflate after the answer, then push as many frames as the body's number says (so
that bytes past the switch arrive with the answer); T switch to TLS after the answer.
"""
from __future__ import annotations

import functools
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import CompressionError
from fastmq.io import Connection, ConnectionClosedError, ConnectionState, Listener, ServerHandler, TLSError
from fastmq.io.adapter import HandshakeStep
from fastmq.io.codecs import DeflateStream, SnappyStream
from fastmq.io.errors import UpgradeError
from fastmq.io.tls import create_client_context, create_server_context

from tests.support.sockets import recv_exact
from tests.support.waiting import wait_for

from .conftest import EchoAdapter, make_frame

WAIT = 10.0
CODECS = {b"Z": SnappyStream, b"D": DeflateStream}
codecs = pytest.mark.parametrize("command", [b"Z", b"D"], ids=["snappy", "deflate"])


def pushed_frame(index: int) -> bytes:
    return make_frame(-1, b"push-%d" % index)


class UpgradingHandler(ServerHandler):
    def __init__(self, server_context=None) -> None:
        self.server_context = server_context
        self.lost: list[BaseException] = []

    def frame_received(self, conn, frame, reply) -> None:
        cid, command, body = frame[:4], frame[4:5], frame[5:]
        if command in CODECS:
            reply(make_frame(int.from_bytes(cid, "big", signed=True), command + b"+"))
            conn.start_compression(CODECS[command]())
            for index in range(int(body or b"0")):
                conn.send_frame(pushed_frame(index))
        elif command == b"T":
            reply(make_frame(int.from_bytes(cid, "big", signed=True), command + b"+"))
            conn.start_tls(self.server_context, server_side=True)
        else:
            reply([struct.pack(">i", len(frame)), frame])

    def connection_lost(self, conn, error) -> None:
        self.lost.append(error)


class Upgrade(HandshakeStep):
    """Send one upgrade command; at its answer switch this side too, then the step is done."""

    def __init__(self, command: bytes, body: bytes = b"", client_context=None) -> None:
        self.command, self.body, self.client_context = command, body, client_context

    def start(self, conn, done) -> None:
        def answered(response, error) -> None:
            if error is not None:
                return
            if self.command == b"T":
                conn.start_tls(self.client_context, server_side=False, server_hostname="localhost", on_done=done)
            else:
                conn.start_compression(CODECS[self.command]())
                done()

        cid = conn.next_correlation_id()
        conn.handshake_request(make_frame(cid, self.command + self.body), answered, cid)


class UpgradingAdapter(EchoAdapter):
    def __init__(self, *steps: HandshakeStep) -> None:
        super().__init__()
        self.steps = list(steps)

    def handshake_steps(self):
        return self.steps


@pytest.fixture
def listen(loop):
    listeners = []

    def _listen(handler: ServerHandler, **options) -> Listener:
        listener = Listener(loop, functools.partial(KafkaFrameSplitter, max_frame_size=1 << 24), handler, **options)
        listeners.append(listener)
        return listener

    yield _listen
    for listener in listeners:
        listener.close()


def server_connection(loop, listener):
    (conn,) = loop.run_in_loop(lambda: list(listener.connections), timeout=WAIT)
    return conn


@codecs
def test_compression_after_a_handshake_answer_with_pushes_read_past_the_switch(loop, listen, connect, command):
    listener = listen(UpgradingHandler())
    adapter = UpgradingAdapter(Upgrade(command, b"5"))
    client = connect(listener.address[1], adapter, max_in_flight=20)
    bodies = [b"small", b"x" * 300_000, bytes(range(256)) * 100]
    futures = [client.send(b"E", body) for body in bodies]
    for body, future in zip(bodies, futures):
        assert future.result(WAIT)[5:] == body
    assert adapter.pushed == [pushed_frame(i)[4:] for i in range(5)]
    assert client.conn.compression == CODECS[command].name
    assert server_connection(loop, listener).compression == CODECS[command].name
    # Compressed on the wire: the 300 kB of one repeated byte took far fewer bytes.
    assert client.conn.metrics.bytes_out < 100_000


def test_tls_in_place_then_snappy_on_top(loop, pki, listen, connect):
    handler = UpgradingHandler(create_server_context(ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key))
    listener = listen(handler)
    client_context = create_client_context(ssl_cafile=pki.ca_file)
    adapter = UpgradingAdapter(Upgrade(b"T", client_context=client_context), Upgrade(b"Z", b"2"))
    client = connect(listener.address[1], adapter)
    assert client.conn.peer_certificate()["subject"] == ((("commonName", "localhost"),),)
    assert client.send(b"E", b"secret" * 1000).result(WAIT)[5:] == b"secret" * 1000
    assert adapter.pushed == [pushed_frame(0)[4:], pushed_frame(1)[4:]]
    assert client.conn.compression == "snappy"
    server_conn = server_connection(loop, listener)
    assert server_conn.state is ConnectionState.READY and server_conn.compression == "snappy"


def test_tls_upgrade_with_an_untrusted_certificate_fails_the_handshake(loop, pki, listen, connect):
    handler = UpgradingHandler(create_server_context(ssl_certfile=pki.rogue_cert, ssl_keyfile=pki.rogue_key))
    listener = listen(handler)
    adapter = UpgradingAdapter(Upgrade(b"T", client_context=create_client_context(ssl_cafile=pki.ca_file)))
    client = connect(listener.address[1], adapter, wait=False)
    with pytest.raises(TLSError, match="certificate verification"):
        client.ready.result(WAIT)


def raw_connection(listener) -> socket.socket:
    return socket.create_connection(listener.address, timeout=WAIT)


@codecs
def test_server_decodes_requests_pipelined_past_the_switch(loop, listen, command):
    listener = listen(UpgradingHandler())
    codec = CODECS[command]()
    requests = [make_frame(i, b"E" + b"body-%d" % i) for i in range(1, 6)]
    with raw_connection(listener) as sock:
        # The switch and the compressed requests after it leave in one write: the server reads them together.
        sock.sendall(make_frame(0, command) + codec.encode(b"".join(requests)))
        answer = make_frame(0, command + b"+")
        assert recv_exact(sock, len(answer)) == answer
        decoded = b""
        for _ in range(100):                 # bounded: every recv waits at most the socket timeout
            if len(decoded) >= sum(map(len, requests)):
                break
            chunk = sock.recv(65536)
            assert chunk, "closed by the server"
            codec.feed(chunk)
            while piece := codec.read():
                decoded += piece
        assert decoded == b"".join(requests)


def test_bytes_past_a_tls_switch_close_the_connection_with_an_upgrade_error(loop, pki, listen):
    handler = UpgradingHandler(create_server_context(ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key))
    listener = listen(handler)
    with raw_connection(listener) as sock:
        sock.sendall(make_frame(0, b"T") + b"not a TLS ClientHello")
        assert sock.recv(100) in (b"", make_frame(0, b"T+"))
    wait_for(lambda: handler.lost)
    assert isinstance(handler.lost[0], UpgradeError) and "must wait" in str(handler.lost[0])


def test_a_client_that_never_starts_its_tls_handshake_is_disconnected(loop, pki, listen):
    handler = UpgradingHandler(create_server_context(ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key))
    listener = listen(handler, handshake_timeout=0.2)
    with raw_connection(listener) as sock:
        sock.sendall(make_frame(0, b"T"))
        assert recv_exact(sock, 10) == make_frame(0, b"T+")
        assert sock.recv(100) == b""                     # closed by the server after its handshake timeout
    wait_for(lambda: handler.lost)
    assert isinstance(handler.lost[0], ConnectionClosedError) and "TLS upgrade within" in str(handler.lost[0])


def test_corrupt_compressed_input_closes_that_connection_only(loop, listen, connect):
    listener = listen(UpgradingHandler())
    healthy = connect(listener.address[1], UpgradingAdapter(Upgrade(b"Z")))
    with raw_connection(listener) as sock:
        sock.sendall(make_frame(0, b"Z") + SnappyStream().encode(b"") + b"\x00\x10\x00\x00garbage-garbage!")
        received = b""
        for _ in range(10):                  # bounded: the answer may or may not leave before the close
            chunk = sock.recv(100)
            if not chunk:
                break
            received += chunk
        assert received in (b"", make_frame(0, b"Z+")) and chunk == b""
    assert healthy.send(b"E", b"still fine").result(WAIT)[5:] == b"still fine"


def test_upgrades_refused_where_they_cannot_happen(loop, listen, connect, pki):
    listener = listen(UpgradingHandler())
    client = connect(listener.address[1], UpgradingAdapter(Upgrade(b"D")))
    conn = client.conn
    with pytest.raises(UpgradeError, match="already compressed"):
        client.call(conn.start_compression, SnappyStream())
    context = create_client_context(ssl_cafile=pki.ca_file)
    with pytest.raises(UpgradeError, match="before that"):
        client.call(functools.partial(conn.start_tls, context, server_side=False))
    client.close()
    with pytest.raises(UpgradeError, match="closed"):
        client.call(conn.start_compression, SnappyStream())


# ---- the switch at every chunking: a peer on a socketpair sends the byte stream cut where hypothesis says ----

@codecs
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pushes=st.lists(st.binary(max_size=3000), max_size=4), data=st.data())
def test_the_switch_point_holds_for_any_chunking_of_the_stream(loop, command, pushes, data):
    ours, peer = socket.socketpair()
    peer.settimeout(WAIT)
    adapter = UpgradingAdapter(Upgrade(command))
    conn = Connection(loop, "peer", 0, adapter)
    ready = threading.Event()
    conn.on_ready = lambda _: ready.set()
    try:
        loop.run_in_loop(conn.adopt_socket, ours, timeout=WAIT)
        request = recv_exact(peer, 4 + 4 + 1)
        assert request == make_frame(0, command)
        encoder = CODECS[command]()
        stream = make_frame(0, command + b"+") + encoder.encode(b"".join(make_frame(-1, body) for body in pushes))
        cuts = sorted(set(data.draw(st.lists(st.integers(1, len(stream) - 1), max_size=6))))
        start = 0
        for end in cuts + [len(stream)]:
            peer.sendall(stream[start:end])
            start = end
            wait_for(lambda: conn.metrics.bytes_in == start, interval=0.001)   # the client has read exactly this far
        assert ready.wait(WAIT)
        wait_for(lambda: len(adapter.pushed) == len(pushes))
        assert adapter.pushed == [struct.pack(">i", -1) + body for body in pushes]
        # And what the client sends after the switch is encoded.
        loop.run_in_loop(conn.request, make_frame(1, b"Eafter"), None, 1, timeout=WAIT)
        decoder = CODECS[command]()
        decoded = b""
        while len(decoded) < 10:
            decoder.feed(peer.recv(4096))
            while piece := decoder.read():
                decoded += piece
        assert decoded == make_frame(1, b"Eafter")
    finally:
        loop.run_in_loop(conn.close, timeout=WAIT)
        peer.close()


def test_a_corrupt_stream_after_the_switch_fails_the_handshake(loop):
    ours, peer = socket.socketpair()
    peer.settimeout(WAIT)
    adapter = UpgradingAdapter(Upgrade(b"Z"))
    conn = Connection(loop, "peer", 0, adapter)
    closed = threading.Event()
    conn.on_close = lambda _, error: closed.set()
    try:
        loop.run_in_loop(conn.adopt_socket, ours, timeout=WAIT)
        recv_exact(peer, 9)
        peer.sendall(make_frame(0, b"Z+") + b"\x00\x05\x00\x00junk")   # no stream identifier
        assert closed.wait(WAIT)
        assert isinstance(conn.close_error.__cause__, CompressionError)
    finally:
        peer.close()


class UpgradeThenOk(HandshakeStep):
    """NSQ's order: the switch is answered, then the peer sends one more answer (OK) through the new layer."""

    def __init__(self, log: list) -> None:
        self.log = log

    def start(self, conn, done) -> None:
        def ok(response, error) -> None:
            if error is None:
                self.log.append(response)
                done()

        def switched(response, error) -> None:
            if error is None:
                self.log.append(response)
                conn.start_compression(SnappyStream())
                conn.expect_frame(ok)

        conn.handshake_request(make_frame(0, b"Z"), switched)


def test_an_answer_the_peer_sends_unasked_after_the_switch_is_awaited_in_fifo_order(loop):
    ours, peer = socket.socketpair()
    peer.settimeout(WAIT)
    log: list = []
    adapter = UpgradingAdapter(UpgradeThenOk(log))
    adapter.fifo = True
    conn = Connection(loop, "peer", 0, adapter)
    ready = threading.Event()
    conn.on_ready = lambda _: ready.set()
    try:
        loop.run_in_loop(conn.adopt_socket, ours, timeout=WAIT)
        assert recv_exact(peer, 9) == make_frame(0, b"Z")
        peer.sendall(make_frame(0, b"Z+") + SnappyStream().encode(make_frame(0, b"OK")))
        assert ready.wait(WAIT)
        assert log == [struct.pack(">i", 0) + b"Z+", struct.pack(">i", 0) + b"OK"]
        assert conn.metrics.requests_sent == 1 and conn.metrics.responses_received == 2
    finally:
        loop.run_in_loop(conn.close, timeout=WAIT)
        peer.close()
