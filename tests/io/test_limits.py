"""max_connections against the open-file limit, and a listener serving more than 1024 clients at once."""
from __future__ import annotations

import resource
import socket
import struct
from pathlib import Path

import pytest

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.errors import ConfigurationError
from fastmq.io import Listener, ServerHandler
from fastmq.io.limits import RESERVED_DESCRIPTORS, ensure_open_file_limit, open_descriptors

WAIT = 10.0
CLIENTS = 1100  # past the 1024 that the listener used to refuse beyond


class EchoHandler(ServerHandler):
    def frame_received(self, conn, frame, reply) -> None:
        reply([struct.pack(">i", len(frame)), frame])


@pytest.fixture
def soft_limit():
    """Restores the soft RLIMIT_NOFILE a test changes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield soft, hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_limit_is_raised_toward_the_hard_one(soft_limit):
    _, hard = soft_limit
    wanted = 600
    needed = open_descriptors() + wanted + RESERVED_DESCRIPTORS
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.fail(f"the hard RLIMIT_NOFILE ({hard}) of this machine is below the {needed} this test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed - 10, hard))
    assert ensure_open_file_limit(wanted) >= needed
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= needed


def test_a_limit_beyond_the_hard_one_is_refused_with_what_to_change(soft_limit, loop):
    _, hard = soft_limit
    # With an unlimited hard limit the kernel's fs.nr_open is the most a process may open.
    most = int(Path("/proc/sys/fs/nr_open").read_text()) if hard == resource.RLIM_INFINITY else hard
    with pytest.raises(ConfigurationError, match="RLIMIT_NOFILE.*--max-connections"):
        Listener(loop, KafkaFrameSplitter, EchoHandler(), max_connections=most + 1)
    if hard != resource.RLIM_INFINITY:
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard  # raised as far as it goes


def test_max_connections_must_be_positive(loop):
    with pytest.raises(ValueError, match="max_connections"):
        Listener(loop, KafkaFrameSplitter, EchoHandler(), max_connections=0)


def test_more_than_1024_clients_are_served_at_once(loop, soft_limit):
    # Both ends of every connection live in this process: two descriptors per client.
    listener = Listener(loop, KafkaFrameSplitter, EchoHandler(), max_connections=2 * CLIENTS, backlog=2048)
    clients: list[socket.socket] = []
    try:
        for index in range(CLIENTS):
            sock = socket.create_connection(listener.address, timeout=WAIT)
            clients.append(sock)
            body = b"client-%d" % index
            sock.sendall(struct.pack(">i", len(body)) + body)
        for index, sock in enumerate(clients):
            expected = b"client-%d" % index
            answer = b""
            while len(answer) < 4 + len(expected):      # bounded: each recv has the socket's timeout
                chunk = sock.recv(64)
                assert chunk, f"client {index} was closed by the server"
                answer += chunk
            assert answer == struct.pack(">i", len(expected)) + expected
        assert loop.run_in_loop(lambda: len(listener.connections), timeout=WAIT) == CLIENTS
        assert listener.metrics.connections_rejected == 0
    finally:
        for sock in clients:
            sock.close()
        listener.close()
