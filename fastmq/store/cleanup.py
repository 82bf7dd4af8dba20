"""File cleanup (SmartGo-Store 1.8).

CommitLog files are deleted, oldest first and never the newest, when any of these holds:
1. they expired (older than file_reserved_time_hours, 72 by default) and it is the deletion hour (delete_when,
   "04" by default);
2. they expired and disk usage is above disk_max_used_space_ratio (75%);
3. disk usage is above disk_space_clean_forcibly_ratio (85%): files go whether expired or not, at most
   DELETE_FILES_BATCH_MAX per round, until there is room.
Above disk_space_warning_level_ratio (90%) the store refuses writes until usage drops again.
Then ConsumeQueue files whose units all point below the new minimum CommitLog offset go, and so do index files.
The clock and the disk-usage source come from MessageStoreConfig, so tests drive all of this in milliseconds.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from fastmq.store.service_thread import ServiceThread

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.store.store import MessageStore

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10


class CleanCommitLogService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.config = store.config
        self.clean_immediately = False
        self.manual_delete_file_several_times = 0

    def execute_delete_files_manually(self, times: int = 20) -> None:
        """Delete expired files on the next `times` rounds whatever the hour (RocketMQ's admin command)."""
        self.manual_delete_file_several_times = times

    def is_time_to_delete(self) -> bool:
        hour = time.localtime(self.config.clock() / 1000).tm_hour
        return any(int(when) == hour for when in self.config.delete_when.split(";"))

    def is_space_to_delete(self) -> bool:
        """Reads disk usage, raises or lowers the disk-full flag, and says whether usage calls for deletion."""
        config = self.config
        ratio = config.disk_usage(str(self.store.root))
        self.clean_immediately = False
        if ratio > config.disk_space_warning_level_ratio / 100:
            if not self.store.disk_full:
                log.error("disk usage %.1f%% is above %d%%: writes are refused until cleanup frees space",
                          ratio * 100, config.disk_space_warning_level_ratio)
            self.store.disk_full = True
            self.clean_immediately = True
        elif ratio > config.disk_space_clean_forcibly_ratio / 100:
            self.clean_immediately = True
            self._disk_ok()
        else:
            self._disk_ok()
        return ratio > config.disk_max_used_space_ratio / 100

    def _disk_ok(self) -> None:
        if self.store.disk_full:
            log.info("disk usage is below %d%% again: writes accepted", self.config.disk_space_warning_level_ratio)
        self.store.disk_full = False

    def delete_expired_files(self) -> int:
        """One cleanup round; returns how many CommitLog files were deleted."""
        time_up = self.is_time_to_delete()
        space_full = self.is_space_to_delete()
        manual = self.manual_delete_file_several_times > 0
        if manual:
            self.manual_delete_file_several_times -= 1
        if not (time_up or space_full or manual):
            return 0
        clean_at_once = self.config.clean_file_forcibly_enable and self.clean_immediately
        reserved_ms = int(self.config.file_reserved_time_hours * 3_600_000)
        now = self.config.clock()
        queue = self.store.commit_log.mapped_file_queue
        deleted = 0
        for mapped in queue.files[:-1]:
            if deleted >= DELETE_FILES_BATCH_MAX:
                break
            expired = now >= mapped.last_modified_ms() + reserved_ms
            if not clean_at_once and not expired:
                break
            if queue.delete_first_files(1) != [mapped]:
                break
            if expired:
                log.info("deleted CommitLog file %s (expired)", mapped.path.name)
            else:
                # Messages go before their retention ends: say so loudly, it is data loss to whoever still reads.
                log.warning("deleted CommitLog file %s before its retention ended: disk usage is above %d%% "
                            "(disk_space_clean_forcibly_ratio)", mapped.path.name,
                            self.config.disk_space_clean_forcibly_ratio)
            deleted += 1
            if self.config.delete_commit_log_files_interval_ms:
                time.sleep(self.config.delete_commit_log_files_interval_ms / 1000)
        if deleted == 0 and space_full:
            log.warning("disk usage is high but no CommitLog file could be deleted")
        return deleted


class CleanConsumeQueueService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.last_physical_min_offset = 0

    def delete_expired_files(self) -> int:
        """Delete ConsumeQueue and index files below the CommitLog's minimum offset; returns the ConsumeQueue
        files deleted."""
        min_offset = self.store.commit_log.get_min_offset()
        if min_offset <= self.last_physical_min_offset:
            return 0
        self.last_physical_min_offset = min_offset
        deleted = 0
        interval = self.store.config.delete_consume_queue_files_interval_ms / 1000
        for consume_queue in self.store.consume_queues():
            count = consume_queue.delete_expired_files(min_offset)
            deleted += count
            if count and interval:
                time.sleep(interval)
        if self.store.index_service is not None:
            self.store.index_service.delete_expired_files(min_offset)
        return deleted


class CleanupService(ServiceThread):
    """Runs both cleanups every clean_resource_interval_ms."""

    def __init__(self, store: MessageStore) -> None:
        super().__init__("CleanupService")
        self.store = store
        self.clean_commit_log = CleanCommitLogService(store)
        self.clean_consume_queue = CleanConsumeQueueService(store)

    def run_once(self) -> tuple[int, int]:
        """One round: (CommitLog files deleted, ConsumeQueue files deleted)."""
        return self.clean_commit_log.delete_expired_files(), self.clean_consume_queue.delete_expired_files()

    def run(self) -> None:
        while not self.stopped:
            self.wait_for_running(self.store.config.clean_resource_interval_ms / 1000)
            if self.stopped:
                break
            try:
                self.run_once()
            except Exception:
                log.exception("cleanup round failed")
