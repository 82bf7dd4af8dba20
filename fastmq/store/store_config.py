"""MessageStoreConfig: sizes, flush and cleanup policy, replication role (RocketMQ's names, RocketMQ's defaults).

Tests shrink the files (a CommitLog of 64 KiB, ConsumeQueues of a few hundred units, a small index) and inject
`clock` and `disk_usage` so that expiry, the deletion hour and disk watermarks are reached in milliseconds.
"""
from __future__ import annotations

import dataclasses
import enum
import resource
import shutil
import time
from typing import Callable

from fastmq.store.errors import StoreConfigError

CQ_STORE_UNIT_SIZE = 20


class FlushDiskType(str, enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"   # acknowledge once in the page cache; a flush thread fsyncs periodically
    SYNC_FLUSH = "SYNC_FLUSH"     # acknowledge after fsync (group commit: concurrent appends share one fsync)


class BrokerRole(str, enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"  # accepts writes; slaves replicate in the background
    SYNC_MASTER = "SYNC_MASTER"    # accepts writes; a put also waits until a slave has the message
    SLAVE = "SLAVE"                # replicates a master's CommitLog; refuses writes


def current_millis() -> int:
    return time.time_ns() // 1_000_000


def disk_usage_ratio(path: str) -> float:
    """Fraction (0..1) of the partition holding `path` that is in use, as RocketMQ computes it."""
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) / usage.total if usage.total else 0.0


def default_open_mapped_files() -> int:
    """Most of the process's file descriptors stay for sockets: an open mapped file holds two."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft // 4))


@dataclasses.dataclass
class MessageStoreConfig:
    # Files
    mapped_file_size_commit_log: int = 1 << 30
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    message_index_enable: bool = True
    max_message_size: int = 4 << 20
    # Disk follows the data: files are sparse, and appends reserve blocks ahead of what they write in steps that
    # double from one page up to this much (CommitLog; ConsumeQueues: consumequeue.RESERVE_AHEAD).
    commit_log_reserve_ahead: int = 4 << 20
    # Files are mapped on first use; beyond this many open mappings the least recently used are closed (and
    # mapped again on their next use), so thousands of queues exhaust neither memory maps nor descriptors.
    max_open_mapped_files: int = dataclasses.field(default_factory=default_open_mapped_files)

    # Flush (SmartGo-Store 1.7)
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    sync_flush_timeout_ms: int = 5_000
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    flush_interval_consume_queue_ms: int = 1_000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000

    # Cleanup (SmartGo-Store 1.8)
    file_reserved_time_hours: float = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    clean_resource_interval_ms: int = 10_000
    delete_commit_log_files_interval_ms: int = 100
    delete_consume_queue_files_interval_ms: int = 100

    # Recovery
    check_crc_on_recover: bool = True

    # Replication (SmartGo-Store 1.6)
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    ha_listen_host: str = "127.0.0.1"
    ha_listen_port: int | None = None    # RocketMQ listens on 10912; None: no replication listener, 0: any port
    ha_master_address: tuple[str, int] | None = None
    ha_send_heartbeat_interval_ms: int = 5_000
    ha_housekeeping_interval_ms: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_max_frame_size: int = 4 << 20
    ha_slave_fall_behind_max: int = 256 * 1024 * 1024

    # Identity, mode and injectable sources
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    read_only: bool = False
    clock: Callable[[], int] = current_millis
    disk_usage: Callable[[str], float] = disk_usage_ratio

    def validate(self) -> None:
        """Raise StoreConfigError for values the store cannot work with."""
        if self.mapped_file_size_commit_log < 4096:
            raise StoreConfigError("mapped_file_size_commit_log must be at least 4096 bytes")
        if self.mapped_file_size_consume_queue < CQ_STORE_UNIT_SIZE:
            raise StoreConfigError("mapped_file_size_consume_queue must hold at least one "
                                   f"{CQ_STORE_UNIT_SIZE}-byte unit")
        if self.commit_log_reserve_ahead < 0:
            raise StoreConfigError("commit_log_reserve_ahead must be >= 0")
        if self.max_open_mapped_files < 1:
            raise StoreConfigError("max_open_mapped_files must be at least 1")
        if self.max_hash_slot_num < 1 or self.max_index_num < 2:
            raise StoreConfigError("the index needs at least one hash slot and two entries")
        if self.max_message_size <= 0:
            raise StoreConfigError("max_message_size must be positive (records must also fit in one CommitLog file)")
        if not (0 < self.disk_max_used_space_ratio <= self.disk_space_clean_forcibly_ratio
                <= self.disk_space_warning_level_ratio <= 100):
            raise StoreConfigError("disk ratios must satisfy 0 < max_used <= clean_forcibly <= warning_level <= 100")
        for name in ("sync_flush_timeout_ms", "flush_interval_commit_log_ms", "flush_interval_consume_queue_ms",
                     "clean_resource_interval_ms", "ha_send_heartbeat_interval_ms"):
            if getattr(self, name) <= 0:
                raise StoreConfigError(f"{name} must be positive")
        if self.ha_transfer_batch_size <= 0 or self.ha_max_frame_size < self.ha_transfer_batch_size:
            raise StoreConfigError("ha_max_frame_size must be at least ha_transfer_batch_size (> 0)")
        try:
            self.flush_disk_type = FlushDiskType(self.flush_disk_type)
            self.broker_role = BrokerRole(self.broker_role)
        except ValueError as exc:
            raise StoreConfigError(str(exc)) from None
        if self.broker_role is BrokerRole.SLAVE and self.ha_master_address is None:
            raise StoreConfigError("a SLAVE needs ha_master_address (host, port)")
        for hour in self.delete_when.split(";"):
            if not hour.strip().isdigit() or not 0 <= int(hour) <= 23:
                raise StoreConfigError(f"delete_when holds hours 00..23 separated by ';', got {self.delete_when!r}")

    @property
    def consume_queue_file_size(self) -> int:
        """The ConsumeQueue file size rounded up to whole units (seed 003: ceil(size / 20) * 20)."""
        units = -(-self.mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

