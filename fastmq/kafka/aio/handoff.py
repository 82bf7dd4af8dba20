"""Handing work from fastmq's I/O thread to an asyncio event loop.

The I/O thread completes producer batches and buffers fetched records; the loop's futures and events may
only be touched on the loop's own thread. LoopHandoff queues calls for the loop and wakes it with one
call_soon_threadsafe per burst (a batch of 500 acknowledged records costs one wake-up, not 500), and runs
the queued calls in the order they were queued.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable


class LoopHandoff:
    """Calls queued from any thread, run on one event loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._scheduled = False

    def submit(self, function: Callable[..., Any], *args: Any) -> None:
        """Any thread: run function(*args) on the loop soon."""
        self._calls.append((function, args))
        # Checked after appending: a _run that already cleared the flag either sees this call or the flag
        # is clear here and a new _run is scheduled.
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._run)
            except RuntimeError:
                self._calls.clear()         # the loop is closed: nobody is left to wait for these calls

    def _run(self) -> None:
        self._scheduled = False
        calls = self._calls
        while calls:
            function, args = calls.popleft()
            function(*args)

