"""Work the broker repeats on its I/O loop at fixed intervals until it closes.

The core's upkeep, the transaction timeout check and the front ends' scans (silent clients and brokers, expired
messages, rebalancing, a watched file) all run this way. The next run is scheduled when a run ends, so a slow run
never piles up behind itself. A run that raises is logged and the work goes on at its next interval: one bad
entry must not stop a scan for good. After stop() nothing more runs (a run already due finds the work stopped
and does nothing).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

log = logging.getLogger(__name__)


class Scheduler(Protocol):
    """What periodic work needs of an event loop (fastmq.io.IOLoop is one): a call after a delay, from any
    thread, whose handle can be cancelled."""

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Any: ...


class PeriodicWork:
    """The repeated jobs of one owner (a front end, the transaction coordinator, the broker), stopped together."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._timers: dict[str, Any] = {}       # job name -> the handle of its next run
        self._stopped = False

    def every(self, name: str, interval: float, work: Callable[[], None]) -> None:
        """Run work() on the loop every `interval` seconds, the first time one interval from now, until stop().
        `name` names the job in the log and must be unique to this owner. Any thread."""
        def run() -> None:
            if self._stopped:
                return
            try:
                work()
            except Exception:
                log.exception("periodic %s failed", name)
            self._schedule(name, interval, run)
        self._schedule(name, interval, run)

    def _schedule(self, name: str, interval: float, run: Callable[[], None]) -> None:
        if not self._stopped:
            self._timers[name] = self._scheduler.call_later(interval, run)

    def stop(self) -> None:
        """Cancel every job; none runs again. Loop thread (idempotent)."""
        self._stopped = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
