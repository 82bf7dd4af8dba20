"""fastmq._native.nonblocking: the I/O loop's system calls that keep the GIL behave as the socket, select and os
calls they replace (results, and errors as the same OSError subclasses)."""
from __future__ import annotations

import os
import select
import socket

import pytest

from fastmq._native.nonblocking import eventfd_reset, eventfd_signal, poll_now, recv_into, send_parts


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    left.setblocking(False)
    right.setblocking(False)
    yield left, right
    left.close()
    right.close()


def test_parts_are_sent_in_order_and_read_back(pair):
    left, right = pair
    parts = [b"ab", bytearray(b"cde"), memoryview(b"xfgx")[1:3], b""]
    assert send_parts(left.fileno(), parts) == 7
    target = bytearray(16)
    assert recv_into(right.fileno(), target) == 7
    assert bytes(target[:7]) == b"abcdefg"


def test_an_empty_socket_and_a_full_one_raise_blocking_io_error(pair):
    left, right = pair
    with pytest.raises(BlockingIOError):
        recv_into(right.fileno(), bytearray(8))
    chunk = b"x" * 65536
    sent = 0
    with pytest.raises(BlockingIOError):
        for _ in range(10_000):             # the socket buffers fill long before (a few MiB at most)
            sent += send_parts(left.fileno(), [chunk])
    assert sent > 0


def test_more_parts_than_one_call_takes_sends_the_first_1024(pair):
    left, right = pair
    assert send_parts(left.fileno(), [b"a"] * 1500) == 1024


def test_a_closed_peer_reads_as_zero_and_writes_fail_without_a_signal(pair):
    left, right = pair
    right.close()
    assert recv_into(left.fileno(), bytearray(8)) == 0
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        send_parts(left.fileno(), [b"data"])


def test_a_bad_descriptor_and_a_read_only_buffer_are_refused():
    with pytest.raises(OSError):
        send_parts(-1, [b"x"])
    with pytest.raises(BufferError):
        recv_into(0, b"read-only")
    with pytest.raises(TypeError):
        send_parts(0, ["text"])


def test_poll_now_answers_as_epoll_poll_with_no_timeout(pair):
    left, right = pair
    epoll = select.epoll()
    try:
        epoll.register(right.fileno(), select.EPOLLIN)
        assert poll_now(epoll.fileno()) == [] == epoll.poll(0)
        left.send(b"x")
        assert poll_now(epoll.fileno()) == [(right.fileno(), select.EPOLLIN)] == epoll.poll(0)
    finally:
        epoll.close()


def test_eventfd_signal_wakes_a_poll_and_reset_clears_it():
    fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    epoll = select.epoll()
    try:
        epoll.register(fd, select.EPOLLIN)
        eventfd_signal(fd)
        eventfd_signal(fd)
        assert poll_now(epoll.fileno()) == [(fd, select.EPOLLIN)]
        eventfd_reset(fd)
        assert poll_now(epoll.fileno()) == []
        with pytest.raises(BlockingIOError):
            eventfd_reset(fd)
    finally:
        epoll.close()
        os.close(fd)
