"""Flush services (SmartGo-Store 1.7).

- GroupCommitService (SYNC_FLUSH): an appender asks for its end offset to be durable and waits; the service
  fsyncs everything written so far, so every appender that arrived during one fsync is covered by the next one.
  request_flush() is the same without waiting: a callback runs on the service thread once the offset is durable
  (front ends answering acks=all from their I/O thread; the store runs one for them in ASYNC_FLUSH mode too).
- FlushRealTimeService (ASYNC_FLUSH): every flush_interval_commit_log_ms, fsync when at least
  flush_commit_log_least_pages are dirty, and everything every flush_commit_log_thorough_interval_ms.
- FlushConsumeQueueService: the same for ConsumeQueues and index files; a thorough round also advances and
  writes the checkpoint. Many dirty ConsumeQueues are synced from several threads at once: the filesystem's
  journal then commits once for many of them (one fdatasync after another costs a journal commit each, some
  milliseconds: tens of seconds for thousands of queues).
fsync (os.fdatasync) releases the GIL, so appends continue while the disk works.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

from fastmq.store.checkpoint import StoreCheckpoint
from fastmq.store.commitlog import CommitLog
from fastmq.store.service_thread import ServiceThread
from fastmq.store.store_config import MessageStoreConfig

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.store.store import MessageStore

log = logging.getLogger(__name__)

RETRY_AFTER_ERROR_SECONDS = 0.05
# Concurrent fdatasync calls of a ConsumeQueue flush round.
CONSUME_QUEUE_FLUSH_THREADS = 16


class FlushRealTimeService(ServiceThread):
    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, config: MessageStoreConfig) -> None:
        super().__init__("FlushRealTimeService")
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.config = config

    def run(self) -> None:
        last_thorough = time.monotonic()
        while not self.stopped:
            self.wait_for_running(self.config.flush_interval_commit_log_ms / 1000)
            least_pages = self.config.flush_commit_log_least_pages
            if time.monotonic() - last_thorough >= self.config.flush_commit_log_thorough_interval_ms / 1000:
                least_pages = 0
                last_thorough = time.monotonic()
            self.flush(least_pages)

    def flush(self, least_pages: int) -> None:
        try:
            store_timestamp = self.commit_log.flush(least_pages)
        except Exception:   # keep flushing: a failed round is retried at the next interval
            log.exception("CommitLog flush failed")
            return
        if store_timestamp:
            self.checkpoint.physic_msg_timestamp = store_timestamp


class GroupCommitService(ServiceThread):
    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
        super().__init__("GroupCommitService")
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        lock = threading.Lock()
        self._requests = threading.Condition(lock)   # appenders -> service: "please flush up to here"
        self._flushed = threading.Condition(lock)    # service -> appenders: "durable up to flushed_offset"
        self._requested = 0
        self._callbacks: list[tuple[int, Callable[[bool], None]]] = []   # (offset, callback) not yet durable
        self.flushed_offset = commit_log.flushed_where
        self.flush_count = 0     # fsync rounds so far: far fewer than appends when appenders are concurrent

    def wait_for_flush(self, offset: int, timeout_seconds: float) -> bool:
        """Block until the CommitLog is durable up to `offset`; False on timeout."""
        with self._requests:
            if self.flushed_offset >= offset:
                return True
            if offset > self._requested:
                self._requested = offset
                self._requests.notify()
            return self._flushed.wait_for(lambda: self.flushed_offset >= offset, timeout_seconds)

    def request_flush(self, offset: int, callback: Callable[[bool], None]) -> None:
        """Have callback(True) called once the CommitLog is durable up to `offset`, without waiting: at once if
        it is already, else on the service thread. callback(False) when a flush fails or the service stops
        first (the data may or may not be durable)."""
        with self._requests:
            durable: bool | None = self.flushed_offset >= offset    # None: unknown, the service stopped first
            if not durable and self.stopped:
                durable = None
            elif not durable:
                self._callbacks.append((offset, callback))
                if offset > self._requested:
                    self._requested = offset
                    self._requests.notify()
        if durable is not False:
            callback(bool(durable))

    def run(self) -> None:
        while not self.stopped:
            with self._requests:
                self._requests.wait_for(lambda: self._requested > self.flushed_offset or self.stopped, 1.0)
                pending = self._requested > self.flushed_offset
            if pending and not self._flush():
                time.sleep(RETRY_AFTER_ERROR_SECONDS)
        self._flush()
        self._complete_callbacks(False)

    def _flush(self) -> bool:
        try:
            store_timestamp = self.commit_log.flush(0)
        except Exception:   # waiting appenders time out with FLUSH_DISK_TIMEOUT; the next request retries
            log.exception("CommitLog flush failed")
            self._complete_callbacks(False)
            return False
        if store_timestamp:
            self.checkpoint.physic_msg_timestamp = store_timestamp
        with self._requests:
            self.flush_count += 1
            self.flushed_offset = self.commit_log.flushed_where
            self._flushed.notify_all()
        self._complete_callbacks(True)
        return True

    def _complete_callbacks(self, ok: bool) -> None:
        # With ok, the callbacks whose offsets are durable now; without, every pending one (a failed round).
        with self._requests:
            if ok:
                done = [entry for entry in self._callbacks if entry[0] <= self.flushed_offset]
                self._callbacks = [entry for entry in self._callbacks if entry[0] > self.flushed_offset]
            else:
                done, self._callbacks = self._callbacks, []
        for _offset, callback in done:
            try:
                callback(ok)
            except Exception:   # one front end's bug must not stop the flushing
                log.exception("flush callback %r failed", callback)

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        with self._requests:
            self._requests.notify()
        super().shutdown(timeout)


class FlushConsumeQueueService(ServiceThread):
    def __init__(self, store: MessageStore) -> None:
        super().__init__("FlushConsumeQueueService")
        self.store = store
        self.config = store.config

    def run(self) -> None:
        last_thorough = time.monotonic()
        while not self.stopped:
            self.wait_for_running(self.config.flush_interval_consume_queue_ms / 1000)
            thorough = time.monotonic() - last_thorough >= self.config.flush_consume_queue_thorough_interval_ms / 1000
            if thorough:
                last_thorough = time.monotonic()
            try:
                self.flush(thorough)
            except Exception:   # keep flushing: a failed round is retried at the next interval
                log.exception("ConsumeQueue flush failed")

    def flush(self, thorough: bool) -> None:
        """Flush ConsumeQueues (only those with enough dirty pages unless thorough). A thorough round flushes the
        index too; everything dispatched before it started is then durable, which the checkpoint records."""
        store = self.store
        dispatched_timestamp = store.last_dispatched_timestamp
        least_pages = 0 if thorough else self.config.flush_consume_queue_least_pages
        # Chosen here, not in the pool: with thousands of queues most hold too few dirty pages for a round, and a
        # task each cost more than the flushes (a fifth of a consuming broker's CPU at 4096 partitions).
        dirty = [consume_queue for consume_queue in store.consume_queues() if consume_queue.flush_due(least_pages)]
        if len(dirty) > 1:
            with ThreadPoolExecutor(min(CONSUME_QUEUE_FLUSH_THREADS, len(dirty)), "ConsumeQueueFlush") as pool:
                for _ in pool.map(lambda consume_queue: consume_queue.flush(least_pages), dirty):
                    pass
        elif dirty:
            dirty[0].flush(least_pages)
        if thorough:
            if store.index_service is not None:
                store.index_service.flush()
            if dispatched_timestamp:
                store.checkpoint.logics_msg_timestamp = dispatched_timestamp
                store.checkpoint.index_msg_timestamp = dispatched_timestamp
            store.checkpoint.flush()
