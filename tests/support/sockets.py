"""Blocking socket reads for tests that speak a protocol by hand."""
from __future__ import annotations

import socket


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Exactly `size` bytes from the socket, waiting as its timeout allows; ConnectionError when the peer closes
    first. (MSG_WAITALL is no substitute: Python makes a socket with a timeout non-blocking, and then it does not
    wait.)"""
    chunks = []
    missing = size
    while missing:
        chunk = sock.recv(missing)
        if not chunk:
            raise ConnectionError(f"the peer closed the connection after {size - missing} of {size} bytes")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
