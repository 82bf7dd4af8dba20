"""A task that measures how long an asyncio event loop is kept from other tasks: the tests of fastmq.kafka.aio
(the loop must never block on the broker) and benches/bench_aio.py (stalls against aiokafka's) use it."""
from __future__ import annotations

import asyncio
import time

TICK_S = 0.001


class Ticker:
    """While entered, a task sleeps TICK_S at a time; gaps: how late each wake-up came (seconds), the time other
    work held the loop beyond the tick."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def ticks(self) -> int:
        return len(self.gaps)

    @property
    def worst_stall(self) -> float:
        return max(self.gaps, default=0.0)

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.gaps.append(max(0.0, time.perf_counter() - before - TICK_S))

    def __enter__(self) -> Ticker:
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
