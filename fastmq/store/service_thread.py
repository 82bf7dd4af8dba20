"""ServiceThread: a named daemon thread that runs a loop until shut down (RocketMQ's ServiceThread)."""
from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ServiceThread:
    """Subclasses implement run(); it loops while not self.stopped, pausing with wait_for_running()."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stopped = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self.run()
        except Exception:  # a service must never die silently
            log.exception("%s stopped by an unexpected error", self.name)

    def run(self) -> None:
        raise NotImplementedError

    def wait_for_running(self, interval_seconds: float) -> None:
        """Sleep up to interval_seconds, or until shutdown()."""
        self._wakeup.wait(interval_seconds)
        self._wakeup.clear()

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        self._wakeup.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("%s did not stop within %.1f s", self.name, timeout)
