"""Benchmarks of fastmq.io against a plain blocking socket, both talking to the same in-process server.

- echo round trips, one at a time (latency-bound): the loop's per-request cost, driven from the loop thread
  (as the producer's sender is) and from a user thread (one hand-over per request);
- 10k pipelined 100 B requests (what a busy sender does);
- bulk: 64 MiB in 1 MiB requests, each acknowledged with 8 bytes (fastmq keeps 5 in flight);
- call_soon_threadsafe: the cost of handing work to the loop.
The server is a thread with blocking sockets (the same for both sides, so it bounds both). Run with
`pytest benches/bench_io.py --benchmark-only`.
"""
from __future__ import annotations

import socket
import struct
import threading
from concurrent.futures import Future

import pytest

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.io import Connection, IOLoop, ProtocolAdapter

ROUND_TRIPS = 2000
PIPELINED = 10_000
BULK_SIZE = 1 << 20
BULK_COUNT = 64


class EchoAdapter(ProtocolAdapter):
    def make_splitter(self):
        return KafkaFrameSplitter(max_frame_size=1 << 24)

    def correlation_id(self, frame):
        return int.from_bytes(frame[:4], "big")


class Server:
    """Echoes frames whose command byte is E; acknowledges others with their 4-byte id only."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    @staticmethod
    def _serve(conn: socket.socket) -> None:
        # Frames are received in place (no growing buffer to shift), and the answers to pipelined
        # requests leave in one sendall once no further request is waiting in the socket.
        buffer = bytearray(1 << 21)
        view = memoryview(buffer)
        out: list[bytes] = []

        def receive(size: int) -> bool:
            got = 0
            while got < size:
                n = conn.recv_into(view[got:size])
                if not n:
                    return False
                got += n
            return True

        try:
            while True:
                if out:
                    try:
                        conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        conn.sendall(b"".join(out))
                        out.clear()
                if not receive(4):
                    return
                size = struct.unpack_from(">i", buffer)[0]
                if size > len(buffer):
                    buffer = bytearray(size)
                    view = memoryview(buffer)
                if not receive(size):
                    return
                if buffer[4] == ord("E"):
                    out.append(struct.pack(">i", size) + bytes(view[:size]))
                else:
                    out.append(struct.pack(">i", 4) + bytes(view[:4]))
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


def frame(cid: int, payload: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(payload), cid) + payload


@pytest.fixture(scope="module")
def server():
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def engine(server):
    loop = IOLoop(name="bench-io")
    loop.start()
    ready: Future = Future()

    def start():
        conn = Connection(loop, "127.0.0.1", server.port, EchoAdapter(), max_in_flight=2000)
        conn.on_ready = ready.set_result
        conn.connect()

    loop.run_in_loop(start)
    conn = ready.result(10)
    yield loop, conn
    loop.close(10)


@pytest.fixture(scope="module")
def plain(server):
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    yield sock, sock.makefile("rb", buffering=1 << 20)
    sock.close()


def plain_call(sock, reader, payload: bytes, cid: int = 0) -> bytes:
    sock.sendall(frame(cid, payload))
    size = struct.unpack(">i", reader.read(4))[0]
    return reader.read(size)


def test_round_trips_fastmq_on_loop_thread(compare, engine):
    loop, conn = engine

    def chain() -> None:
        done = threading.Event()
        remaining = [ROUND_TRIPS]

        def next_request(response=None, error=None) -> None:
            if remaining[0] == 0:
                done.set()
                return
            remaining[0] -= 1
            cid = conn.next_correlation_id()
            conn.request(frame(cid, b"Eping"), next_request, cid)

        loop.call_soon_threadsafe(next_request)
        assert done.wait(30)

    compare("io-round-trips-2000", "fastmq (sender on loop)", items=ROUND_TRIPS).pedantic(chain, rounds=5)


def test_round_trips_fastmq_from_user_thread(compare, engine):
    loop, conn = engine

    def one_by_one() -> None:
        for _ in range(ROUND_TRIPS):
            done = threading.Event()

            def submit() -> None:
                cid = conn.next_correlation_id()
                conn.request(frame(cid, b"Eping"), lambda r, e: done.set(), cid)

            loop.call_soon_threadsafe(submit)
            done.wait(10)

    compare("io-round-trips-2000", "fastmq (user thread)", items=ROUND_TRIPS).pedantic(one_by_one, rounds=3)


def test_round_trips_blocking_socket(compare, plain):
    sock, reader = plain

    def one_by_one() -> None:
        for _ in range(ROUND_TRIPS):
            plain_call(sock, reader, b"Eping")

    compare("io-round-trips-2000", "blocking socket", items=ROUND_TRIPS).pedantic(one_by_one, rounds=5)


def test_pipelined_fastmq(compare, engine):
    loop, conn = engine
    body = b"E" + bytes(99)

    def pipelined() -> None:
        done = threading.Event()
        state = {"sent": 0, "received": 0}

        def on_response(response, error) -> None:
            state["received"] += 1
            if state["received"] == PIPELINED:
                done.set()
            else:
                fill()

        def fill() -> None:
            while state["sent"] < PIPELINED and conn.can_send():
                cid = conn.next_correlation_id()
                conn.request(frame(cid, body), on_response, cid)
                state["sent"] += 1

        loop.call_soon_threadsafe(fill)
        assert done.wait(60)

    compare("io-pipelined-10k-x100B", "fastmq", items=PIPELINED, nbytes=PIPELINED * 100).pedantic(
        pipelined, rounds=3)


def test_pipelined_blocking_socket(compare, plain):
    sock, reader = plain
    body = b"E" + bytes(99)

    def pipelined() -> None:
        # Windows of 1000: write them all, then read the answers (a blocking client cannot do better
        # without a second thread).
        for start in range(0, PIPELINED, 1000):
            sock.sendall(b"".join(frame(i, body) for i in range(start, start + 1000)))
            for _ in range(1000):
                reader.read(struct.unpack(">i", reader.read(4))[0])

    compare("io-pipelined-10k-x100B", "blocking socket", items=PIPELINED, nbytes=PIPELINED * 100).pedantic(
        pipelined, rounds=3)


def test_bulk_fastmq(compare, engine):
    loop, conn = engine
    chunk = memoryview(bytes(BULK_SIZE))

    def bulk() -> None:
        done = threading.Event()
        state = {"sent": 0, "acked": 0}

        def on_ack(response, error) -> None:
            state["acked"] += 1
            if state["acked"] == BULK_COUNT:
                done.set()
            else:
                fill()

        def fill() -> None:
            while state["sent"] < BULK_COUNT and conn.in_flight_count < 5:
                cid = conn.next_correlation_id()
                conn.request([struct.pack(">ii", 5 + BULK_SIZE, cid), b"A", chunk], on_ack, cid)
                state["sent"] += 1

        loop.call_soon_threadsafe(fill)
        assert done.wait(60)

    compare("io-bulk-64x1MiB", "fastmq", nbytes=BULK_SIZE * BULK_COUNT).pedantic(bulk, rounds=3)


def test_bulk_blocking_socket(compare, plain):
    sock, reader = plain
    chunk = bytes(BULK_SIZE)

    def bulk() -> None:
        for cid in range(BULK_COUNT):
            sock.sendall(struct.pack(">ii", 5 + BULK_SIZE, cid) + b"A" + chunk)
            reader.read(struct.unpack(">i", reader.read(4))[0])

    compare("io-bulk-64x1MiB", "blocking socket", nbytes=BULK_SIZE * BULK_COUNT).pedantic(bulk, rounds=3)


def test_call_soon_threadsafe(compare, engine):
    loop, _ = engine
    count = 100_000

    def hand_over() -> None:
        done = threading.Event()
        noop = int
        for _ in range(count - 1):
            loop.call_soon_threadsafe(noop)
        loop.call_soon_threadsafe(done.set)
        assert done.wait(30)

    compare("io-call-soon-threadsafe-100k", "fastmq", items=count).pedantic(hand_over, rounds=3)
