"""FrameSplitter.round_trip: one compiled write, poll and receive on a real socket pair (the peer side is fed in
random chunks by a thread, so frames arrive split anywhere), with the writers' lock handed back as documented."""
from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native.frames import KafkaFrameSplitter, RocketMQFrameSplitter
from fastmq.errors import ProtocolError

WAIT = 10.0     # generous deadline: a round trip that works never comes near it


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    try:
        yield ours, peer
    finally:
        ours.close()
        peer.close()


def rocketmq_frame(opaque: int, body: bytes) -> bytes:
    header = b'{"code":0,"opaque":%d}' % opaque
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def feed_in_chunks(peer: socket.socket, wire: bytes, cuts: list[int], expect_request: int) -> threading.Thread:
    # Reads the request first (so it is known to have been written whole), then sends `wire` cut at `cuts`.
    def run() -> None:
        got = 0
        while got < expect_request:
            got += len(peer.recv(65536))
        start = 0
        for end in sorted(set(cuts)) + [len(wire)]:
            if end > start:
                peer.sendall(wire[start:end])
                time.sleep(0.0002)      # lets the receiver see the frame partly
            start = max(start, end)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=4), data=st.data())
def test_frames_split_anywhere_come_out_whole_and_in_order(pair, bodies, data):
    ours, peer = pair
    wire = b"".join(rocketmq_frame(i, body) for i, body in enumerate(bodies))
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=12))
    splitter = RocketMQFrameSplitter()
    request = b"request-bytes"
    feeder = feed_in_chunks(peer, wire, cuts, len(request))
    lock = threading.Lock()
    lock.acquire()
    sent, received, code = splitter.round_trip(ours.fileno(), request, lock, time.monotonic() + WAIT)
    assert (sent, code) == (len(request), 0)
    assert not lock.locked()
    frames = list(splitter)
    assert frames, "round_trip returned before a frame was whole"
    total = received
    while len(frames) < len(bodies):
        lock.acquire()
        _, received, code = splitter.round_trip(ours.fileno(), b"", lock, time.monotonic() + WAIT)
        assert code == 0
        total += received
        frames.extend(splitter)
    feeder.join(WAIT)
    assert frames == [rocketmq_frame(i, body)[4:] for i, body in enumerate(bodies)]
    assert total == len(wire) and splitter.buffered == 0


def test_a_large_frame_is_received_in_place(pair):
    ours, peer = pair
    body = os.urandom(300_000)
    wire = struct.pack(">i", len(body)) + body
    feeder = feed_in_chunks(peer, wire, [3, 1000, 70_000], 1)
    splitter = KafkaFrameSplitter()
    lock = threading.Lock()
    lock.acquire()
    assert splitter.round_trip(ours.fileno(), b"x", lock, time.monotonic() + WAIT) == (1, len(wire), 0)
    feeder.join(WAIT)
    assert splitter.next_frame() == body


def test_the_peer_closing_ends_the_wait_with_code_minus_one(pair):
    ours, peer = pair
    peer.sendall(b"\x00\x00")
    peer.close()
    lock = threading.Lock()
    lock.acquire()
    assert RocketMQFrameSplitter().round_trip(ours.fileno(), b"", lock, time.monotonic() + WAIT) == (0, 2, -1)


def test_a_passed_deadline_returns_what_arrived(pair):
    ours, peer = pair
    peer.sendall(b"\x00\x00\x00\x10")
    splitter = RocketMQFrameSplitter()
    lock = threading.Lock()
    lock.acquire()
    assert splitter.round_trip(ours.fileno(), b"", lock, time.monotonic() + 0.05) == (0, 4, 0)
    assert splitter.next_frame() is None and splitter.buffered == 4


def test_a_full_socket_keeps_the_lock_and_reads_nothing(pair):
    ours, peer = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    lock = threading.Lock()
    lock.acquire()
    big = bytes(4 << 20)
    sent, received, code = RocketMQFrameSplitter().round_trip(ours.fileno(), big, lock, time.monotonic() + WAIT)
    assert 0 < sent < len(big) and (received, code) == (-1, 0)
    assert lock.locked()


def test_a_failed_send_reports_its_errno_and_keeps_the_lock(pair):
    ours, peer = pair
    peer.close()
    lock = threading.Lock()
    lock.acquire()
    sent, received, code = RocketMQFrameSplitter().round_trip(ours.fileno(), b"abc", lock, time.monotonic() + WAIT)
    assert (sent, received) == (0, -1) and code in (errno.EPIPE, errno.ECONNRESET)
    assert lock.locked()


def test_a_bad_header_raises_after_the_lock_was_released(pair):
    ours, peer = pair
    peer.sendall(struct.pack(">ii", 2, 0))      # total < 4
    splitter = RocketMQFrameSplitter()
    lock = threading.Lock()
    lock.acquire()
    with pytest.raises(ProtocolError):
        splitter.round_trip(ours.fileno(), b"", lock, time.monotonic() + WAIT)
    assert not lock.locked()
    with pytest.raises(ProtocolError):
        splitter.next_frame()
    # A broken splitter still writes and releases the lock before it raises: the caller never has to guess.
    lock.acquire()
    with pytest.raises(ProtocolError):
        splitter.round_trip(ours.fileno(), b"late", lock, time.monotonic() + WAIT)
    assert not lock.locked()
    assert peer.recv(16) == b"late"
