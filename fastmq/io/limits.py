"""The process's open-file limit (RLIMIT_NOFILE) against the connections a server promises to serve.

Every accepted connection is a file descriptor. A listener that allows more connections than the limit
leaves room for would fail accept() with EMFILE under load, long after it started; so it checks at start:
it raises the soft limit toward the hard one when that is enough (as the JVM does for Kafka), and refuses
to start with a message saying what to change when it is not.
"""
from __future__ import annotations

import os
import resource

from fastmq.errors import ConfigurationError

# Descriptors kept free beside the connections: the listening socket, epoll, eventfd, the store's files.
RESERVED_DESCRIPTORS = 64


def open_descriptors() -> int:
    """How many file descriptors this process has open now."""
    return len(os.listdir("/proc/self/fd"))


def ensure_open_file_limit(max_connections: int) -> int:
    """Make RLIMIT_NOFILE's soft limit cover max_connections more descriptors than are open now (plus a
    reserve), raising it up to the hard limit if needed; returns the soft limit in force.

    Raises ConfigurationError when even the hard limit is too low.
    """
    needed = open_descriptors() + max_connections + RESERVED_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    refused = None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:   # beyond the kernel's fs.nr_open, even with an unlimited hard limit
        refused = exc
    if target < needed or refused is not None:
        most = "unlimited" if hard == resource.RLIM_INFINITY else hard
        raise ConfigurationError(
            f"max_connections={max_connections} needs {needed} open files ({open_descriptors()} are open, "
            f"{RESERVED_DESCRIPTORS} kept in reserve) but the process may not open that many (RLIMIT_NOFILE soft "
            f"limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, hard limit {most}"
            f"{f': {refused}' if refused is not None else ''}): raise it (ulimit -n, systemd LimitNOFILE=, "
            f"docker --ulimit nofile=, sysctl fs.nr_open) or lower max_connections (fastmq broker --max-connections)")
    return target
