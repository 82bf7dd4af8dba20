"""Writes made in one turn of the event loop go to the socket as one write: a syscall (and, on loopback, a wake-up
of the reader) per turn instead of one per piece. Under load many requests finish in the same turn, so the saving
grows with the load; alone, a piece waits only until the running callbacks of this turn are done.

Used for the proxy's Redis scripts (every command of a turn in one write) and for its HTTP responses: uvicorn
writes a response's status line and headers, then its body, as two writes; a CoalescedTransport (given to it by
server.py's protocol) joins them.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable


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


class CoalescedTransport:
    """A transport whose writes wait for the end of the loop turn; everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._writes = Coalescer(loop, self._write_now)

    def _write_now(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def write(self, data: bytes) -> None:
        self._writes.add(data)

    def close(self) -> None:
        self._writes.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
