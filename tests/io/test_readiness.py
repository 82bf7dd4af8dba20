"""wait_readable: blocking waits for one descriptor, also past the 1024 that select() refuses."""
from __future__ import annotations

import fcntl
import resource
import socket

import pytest

from fastmq.io.readiness import wait_readable

HIGH_FD = 1500


@pytest.fixture
def high_socketpair():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH_FD:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    left, right = socket.socketpair()
    # The reading end moved to a descriptor number select() cannot take (as in a process with many connections).
    high = socket.socket(fileno=fcntl.fcntl(left.fileno(), fcntl.F_DUPFD, HIGH_FD))
    left.close()
    yield high, right
    high.close()
    right.close()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_descriptor_above_1024_is_waited_for(high_socketpair):
    high, right = high_socketpair
    assert high.fileno() >= HIGH_FD
    assert wait_readable(high, 0.01) is False
    right.sendall(b"x")
    assert wait_readable(high, 5.0) is True
    assert high.recv(1) == b"x"


def test_a_hang_up_counts_as_readable(high_socketpair):
    high, right = high_socketpair
    right.close()
    assert wait_readable(high, 5.0) is True and high.recv(1) == b""
