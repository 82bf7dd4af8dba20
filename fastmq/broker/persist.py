"""ConfigWriter: the thread that writes the broker's JSON files, so that the I/O thread never waits on fsync.

A caller marks a file dirty (write(target, callback)); the thread persists every dirty file and then calls the
callbacks waiting for it, with True, or with False if writing failed. Requests that arrive while a file is being
written are covered by its next write, so a burst of offset commits costs one or two fsyncs (group commit, as the
CommitLog's flush does). A target is anything with persist() (the store's ConfigManagers, the broker's own files).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)

Callback = Callable[[bool], None]


class ConfigWriter:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._dirty: dict[int, tuple[Any, list[Callback]]] = {}   # id(target) -> (target, callbacks)
        self._stopped = False
        self.writes = 0
        self._thread = threading.Thread(target=self._run, name="fastmq-config-writer", daemon=True)
        self._thread.start()

    def write(self, target: Any, callback: Callback | None = None) -> None:
        """Persist target soon; callback(ok) once its content as of now is on disk. After close() the write
        happens in the caller's thread."""
        with self._lock:
            if not self._stopped:
                entry = self._dirty.setdefault(id(target), (target, []))
                if callback is not None:
                    entry[1].append(callback)
                self._lock.notify()
                return
        self._persist(target, [callback] if callback is not None else [])

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._dirty or self._stopped)
                if not self._dirty and self._stopped:
                    return
                batch, self._dirty = list(self._dirty.values()), {}
            for target, callbacks in batch:
                self._persist(target, callbacks)

    def _persist(self, target: Any, callbacks: list[Callback]) -> None:
        try:
            target.persist()
            ok = True
            self.writes += 1
        except Exception:      # the callers answer with an error; the next write tries again
            log.exception("writing %r failed", target)
            ok = False
        for callback in callbacks:
            try:
                callback(ok)
            except Exception:
                log.exception("config write callback %r failed", callback)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is dirty, then stop."""
        with self._lock:
            self._stopped = True
            self._lock.notify()
        self._thread.join(timeout)
