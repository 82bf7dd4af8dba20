"""Waiting for one file descriptor outside the loop (blocking helpers: HA replication, a child's pipe)."""
from __future__ import annotations

import select
from typing import Any


def wait_readable(fileobj: Any, timeout: float) -> bool:
    """Whether fileobj (a socket, a pipe or a descriptor) has input or hung up within timeout seconds.

    poll(), not select(): select() refuses descriptors of 1024 and above, which a process serving thousands of
    connections or partitions reaches."""
    poller = select.poll()
    poller.register(fileobj, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout) * 1000.0))
