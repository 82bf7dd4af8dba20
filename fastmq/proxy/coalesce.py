"""Writes made in one turn of the event loop go to the socket as one write: a syscall (and, on loopback, a wake-up
of the reader) per turn instead of one per piece. Under load many requests finish in the same turn, so the saving
grows with the load; alone, a piece waits only until the running callbacks of this turn are done.

Used for the proxy's Redis scripts: every command of a turn in one write. (An HTTP response is written whole by
connection.py.)
"""
from __future__ import annotations

import asyncio
from typing import Callable


class Coalescer:
    def __init__(self, loop: asyncio.AbstractEventLoop, write: Callable[[bytes], None]) -> None:
        self._loop = loop
        self._write = write
        self._pending: list[bytes] = []

    def add(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._write(data)
