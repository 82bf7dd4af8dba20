"""Fixtures for fastmq.io: a running IOLoop, a tiny length-prefixed echo protocol and a threaded echo
server written with plain blocking sockets (independent of the engine under test), and clients.

Test framing: [size i32][correlation id i32][command u8][body]. The server answers with the same
payload. Commands: E echo now, H hold (answered, newest first, when an F arrives), F flush the held
ones then echo, S never answer, G send the body raw (garbage), C close the connection, U push an
unsolicited frame (correlation id -1) then echo, X answer with a wrong correlation id.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import ProtocolError
from fastmq.io import Connection, IOLoop, ProtocolAdapter
from tests.support.loops import running_loop

WAIT = 10.0  # the longest any test waits for one event; every wait is bounded


def make_frame(correlation_id: int, payload: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(payload), correlation_id) + payload


class EchoAdapter(ProtocolAdapter):
    """The test protocol: responses carry the request's correlation id in their first 4 bytes."""

    def __init__(self, max_frame_size: int = 1 << 24) -> None:
        self.max_frame_size = max_frame_size
        self.pushed: list[bytes] = []

    def make_splitter(self) -> KafkaFrameSplitter:
        return KafkaFrameSplitter(max_frame_size=self.max_frame_size)

    def correlation_id(self, frame: bytes) -> int | None:
        if len(frame) < 4:
            raise ProtocolError(f"a {len(frame)}-byte frame has no correlation id")
        value = int.from_bytes(frame[:4], "big", signed=True)
        return None if value == -1 else value

    def on_unsolicited(self, conn: Connection, frame: bytes) -> None:
        self.pushed.append(frame)


class FifoEchoAdapter(EchoAdapter):
    """The same protocol matched in FIFO order, as NSQ's is (the ids are ignored)."""

    fifo = True


class EchoServer:
    """Thread-per-connection blocking server on 127.0.0.1 (see the module docstring for commands)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.requests: list[bytes] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accept_thread = threading.Thread(target=self._accept_loop, name="echo-accept", daemon=True)
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), name="echo-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _read_exact(self, conn: socket.socket, size: int) -> bytes | None:
        chunks = []
        while size:
            if self._stop.is_set():
                return None
            try:
                chunk = conn.recv(min(size, 1 << 20))
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def _write_all(self, conn: socket.socket, data: bytes) -> None:
        """conn.sendall() with the connection's 50 ms timeout would give the client 50 ms to read the whole answer
        (the timeout bounds all of sendall): a large echo to a client slowed by a loaded machine was cut off."""
        view = memoryview(data)
        deadline = time.monotonic() + WAIT
        while view:
            if self._stop.is_set():
                raise ConnectionAbortedError("the echo server is closing")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the client did not read the answer within {WAIT:g} s")
            try:
                view = view[conn.send(view):]
            except (TimeoutError, socket.timeout):
                continue

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        held: list[bytes] = []
        try:
            while True:
                header = self._read_exact(conn, 4)
                if header is None:
                    return
                payload = self._read_exact(conn, struct.unpack(">i", header)[0])
                if payload is None:
                    return
                with self.lock:
                    self.requests.append(payload)
                command, body = payload[4:5], payload[5:]
                if command == b"E":
                    self._write_all(conn, header + payload)
                elif command == b"H":
                    held.append(header + payload)
                elif command == b"F":
                    self._write_all(conn, b"".join(reversed(held)) + header + payload)
                    held.clear()
                elif command == b"G":
                    self._write_all(conn, body)
                elif command == b"C":
                    return
                elif command == b"U":
                    self._write_all(conn, make_frame(-1, b"pushed") + header + payload)
                elif command == b"X":
                    wrong = struct.pack(">i", struct.unpack(">i", payload[:4])[0] + 1000)
                    self._write_all(conn, header + wrong + payload[4:])
                # S: never answer
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._accept_thread.join(WAIT)
        for thread in self._threads:
            thread.join(WAIT)


def future_callback() -> tuple[Future, Any]:
    """A Future and the request callback that completes it with the response frame or the error."""
    future: Future = Future()

    def callback(frame: Any, error: BaseException | None) -> None:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(frame)
    return future, callback


class EchoClient:
    """A Connection driven from the test thread: every call goes through IOLoop.run_in_loop."""

    def __init__(self, loop: IOLoop, conn: Connection) -> None:
        self.loop = loop
        self.conn = conn
        self.ready: Future = Future()
        self.closed: Future = Future()

    def _on_ready(self, conn: Connection) -> None:
        if not self.ready.done():
            self.ready.set_result(conn)

    def _on_close(self, conn: Connection, error: BaseException) -> None:
        if not self.ready.done():
            self.ready.set_exception(error)
        self.closed.set_result(error)

    def send(self, command: bytes, body: bytes = b"", *, correlation_id: int | None = None,
             expect_response: bool = True, timeout: float | None = None) -> Future:
        """Queue one request; the returned future gets the response payload or the error."""
        future, callback = future_callback()

        def submit() -> None:
            cid = self.conn.next_correlation_id() if correlation_id is None else correlation_id
            self.conn.request(make_frame(cid, command + body), callback, cid,
                              expect_response=expect_response, timeout=timeout)

        self.loop.run_in_loop(submit, timeout=WAIT)
        return future

    def call(self, fn: Any, *args: Any) -> Any:
        return self.loop.run_in_loop(fn, *args, timeout=WAIT)

    def close(self, error: BaseException | None = None) -> None:
        self.call(self.conn.close, error)


@pytest.fixture
def loop():
    with running_loop("fastmq-io-test") as io_loop:
        yield io_loop


@pytest.fixture
def echo_server():
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def echo_adapter_cls():
    return EchoAdapter


@pytest.fixture
def fifo_adapter_cls():
    return FifoEchoAdapter


@pytest.fixture
def frame():
    return make_frame


@pytest.fixture
def connect(loop):
    """connect(port, adapter=None, wait=True, host="127.0.0.1", **Connection options) -> EchoClient."""

    def _connect(port: int, adapter: ProtocolAdapter | None = None, *, wait: bool = True,
                 host: str = "127.0.0.1", sock: socket.socket | None = None, **options: Any) -> EchoClient:
        holder: dict[str, EchoClient] = {}

        def start() -> None:
            conn = Connection(loop, host, port, adapter if adapter is not None else EchoAdapter(), **options)
            client = holder["client"] = EchoClient(loop, conn)
            conn.on_ready = client._on_ready
            conn.on_close = client._on_close
            if sock is not None:
                conn.adopt_socket(sock)
            else:
                conn.connect()

        loop.run_in_loop(start, timeout=WAIT)
        client = holder["client"]
        if wait:
            client.ready.result(WAIT)
        return client

    return _connect
