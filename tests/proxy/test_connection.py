"""The proxy's HTTP/1.1 connections (fastmq/proxy/connection.py) under uvicorn's server on a real socket, with a
small ASGI app: keep-alive, pipelining, request bodies (chunked, Expect: 100-continue), HEAD, chunked responses,
Connection: close, idle connections closed, an app that fails, and bad input (garbage, oversized heads, random
bytes) answered 400 / 431 and closed, with the server serving on."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from fastmq.proxy.connection import MAX_HEAD_BYTES, HttpConnection
from fastmq.proxy.server import listening_socket
from tests.support.servers import free_port

KEEP_ALIVE_S = 0.5


async def echo_app(scope, receive, send):
    """Answers what it was asked: method, path, query, headers and the body's length; /fail raises, /half answers
    without finishing, /stream answers in two parts without a Content-Length."""
    if scope["path"] == "/fail":
        raise RuntimeError("the app failed on purpose")
    body = b""
    if scope["method"] in ("POST", "PUT"):
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"first,", "more_body": True})
        await send({"type": "http.response.body", "body": b"second"})
        return
    answer = json.dumps({"method": scope["method"], "path": scope["path"], "query": scope["query_string"].decode(),
                         "length": len(body), "body": body[:64].decode("latin-1"),
                         "headers": {k.decode(): v.decode() for k, v in scope["headers"]}}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]})
    if scope["path"] == "/half":
        return
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def server_port():
    import uvicorn
    import uvloop

    port = free_port()
    config = uvicorn.Config(echo_app, loop="none", http=HttpConnection, lifespan="off", access_log=False,
                            log_config=None, timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(config)
    sock = listening_socket("127.0.0.1", port)
    thread = threading.Thread(target=lambda: uvloop.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.01)
    yield port
    server.should_exit = True
    thread.join(10)
    sock.close()


class Raw:
    """A plain socket speaking HTTP/1.1 by hand."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def response(self, head: bool = False) -> tuple[int, dict[str, str], bytes]:
        """The next response: status, headers (lower-case names), body (Content-Length or chunked; none for an
        answer to HEAD)."""
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), f"the connection closed before a response: {self.buffer!r}"
        lines_text, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = lines_text.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
        if head:
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buffer:
                    assert self._fill()
                size_line, self.buffer = self.buffer.split(b"\r\n", 1)
                size = int(size_line, 16)
                while len(self.buffer) < size + 2:
                    assert self._fill()
                body, self.buffer = body + self.buffer[:size], self.buffer[size + 2:]
                if size == 0:
                    return status, headers, body
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            assert self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        """True when the server closed the connection (within the socket's timeout)."""
        try:
            return not self._fill()
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(server_port):
    connections: list[Raw] = []

    def connect() -> Raw:
        connections.append(Raw(server_port))
        return connections[-1]
    yield connect
    for connection in connections:
        connection.close()


def test_keep_alive_and_pipelined_requests_are_answered_in_order(raw):
    connection = raw()
    connection.send(b"GET /one?a=1 HTTP/1.1\r\nhost: x\r\n\r\n")
    status, headers, body = connection.response()
    assert status == 200 and "date" in headers
    assert json.loads(body)["path"] == "/one" and json.loads(body)["query"] == "a=1"
    # Three requests in one write, one with a body: three answers in order on the same connection.
    connection.send(b"GET /two HTTP/1.1\r\nhost: x\r\n\r\nPOST /three HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\n"
                    b"helloGET /f%6Fur HTTP/1.1\r\nhost: x\r\n\r\n")
    answers = [json.loads(connection.response()[2]) for _ in range(3)]
    assert [a["path"] for a in answers] == ["/two", "/three", "/four"]
    assert answers[1]["body"] == "hello" and answers[1]["method"] == "POST"


def test_request_bodies_chunked_and_after_100_continue(raw):
    connection = raw()
    connection.send(b"POST /c HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
    assert json.loads(connection.response()[2])["body"] == "abcdefg"
    connection.send(b"POST /e HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: 3\r\n\r\n")
    status, _, _ = connection.response()
    assert status == 100                        # the client may send the body now
    connection.send(b"xyz")
    status, _, body = connection.response()
    assert status == 200 and json.loads(body)["body"] == "xyz"
    # A body larger than what is read ahead of the app arrives whole.
    big = os.urandom(300_000).hex().encode()
    connection.send(b"POST /big HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(big) + big)
    assert json.loads(connection.response()[2])["length"] == len(big)


def test_head_chunked_responses_and_connection_close(raw):
    connection = raw()
    connection.send(b"HEAD /h HTTP/1.1\r\nhost: x\r\n\r\nGET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
    status, headers, _ = connection.response(head=True)
    # HEAD: the headers of the GET's answer, no body: what follows at once is the next answer.
    assert status == 200 and int(headers["content-length"]) > 0
    status, headers, body = connection.response()
    assert headers["transfer-encoding"] == "chunked" and body == b"first,second"
    connection.send(b"GET /last HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    status, headers, _ = connection.response()
    assert status == 200 and headers["connection"] == "close"
    assert connection.closed()
    old = raw()
    old.send(b"GET /old HTTP/1.0\r\n\r\n")                  # HTTP/1.0 without keep-alive: closed after
    assert old.response()[0] == 200 and old.closed()


def test_idle_connections_are_closed_and_failing_apps_answer_500(raw):
    idle = raw()
    idle.send(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n")
    assert idle.response()[0] == 200
    started = time.monotonic()
    assert idle.closed()                                    # after KEEP_ALIVE_S without a request
    assert KEEP_ALIVE_S * 0.8 <= time.monotonic() - started < 4
    failing = raw()
    failing.send(b"GET /fail HTTP/1.1\r\nhost: x\r\n\r\n")
    status, _, body = failing.response()
    assert status == 500 and json.loads(body)["error"] == "internal"
    assert failing.closed()
    half = raw()
    half.send(b"GET /half HTTP/1.1\r\nhost: x\r\n\r\n")
    assert half.closed()            # headers promised a body that never came: the connection is dropped


@pytest.mark.parametrize("request_bytes, status, code", [
    (b"NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
    (b"GET / HTTP/1.1\r\nbad header\r\n\r\n", 400, "bad_request"),
    (b"GET / HTTP/1.1\r\nhost: x\r\ncontent-length: nope\r\n\r\n", 400, "bad_request"),
    (b"GET / HTTP/1.1\r\n" + b"x-filler: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n", 431, "head_too_large"),
])
def test_bad_requests_get_a_json_4xx_and_the_connection_closes(raw, request_bytes, status, code):
    connection = raw()
    # After a good request: its answer comes first.
    connection.send(b"GET /first HTTP/1.1\r\nhost: x\r\n\r\n" + request_bytes)
    assert json.loads(connection.response()[2])["path"] == "/first"
    answer_status, headers, body = connection.response()
    assert (answer_status, json.loads(body)["error"]) == (status, code)
    assert headers["connection"] == "close" and connection.closed()


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=300),
                 st.builds(lambda head, tail: head + tail,
                           st.sampled_from([b"GET / HTTP/1.1\r\n", b"POST /p HTTP/1.1\r\ncontent-length: 4\r\n",
                                            b"GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n"]),
                           st.binary(max_size=200))))
def test_random_bytes_get_an_answer_or_a_close_and_the_server_serves_on(server_port, data):
    with socket.create_connection(("127.0.0.1", server_port), timeout=5) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        else:
            raise AssertionError(f"no answer and no close within 5 s for {data!r}")
    assert received == b"" or received.startswith(b"HTTP/1.1 "), received[:100]
    with socket.create_connection(("127.0.0.1", server_port), timeout=5) as sock:
        sock.sendall(b"GET /alive HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_a_client_that_goes_away_mid_body_leaves_no_connection_behind(server_port):
    async def scenario():
        reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
        writer.write(b"POST /gone HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nonly part")
        await writer.drain()
        writer.close()
        await writer.wait_closed()
    asyncio.run(scenario())
    with socket.create_connection(("127.0.0.1", server_port), timeout=5) as sock:
        sock.sendall(b"GET /alive HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
