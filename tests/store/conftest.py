"""Fixtures of the store tests: tiny files, a settable clock and disk-usage source, and stores that always close."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from fastmq.store import MessageStore, MessageStoreConfig


# 2026-01-15 10:00:00 local time: not the deletion hour.
BASE_MILLIS = 1_768_467_600_000


class ManualClock:
    """A clock tests move by hand (milliseconds)."""

    def __init__(self, millis: int = BASE_MILLIS) -> None:
        self.millis = millis

    def __call__(self) -> int:
        return self.millis

    def advance(self, millis: int) -> None:
        self.millis += millis


class DiskUsage:
    """A disk-usage source tests set (fraction 0..1)."""

    def __init__(self, ratio: float = 0.10) -> None:
        self.ratio = ratio
        self.paths: list[str] = []

    def __call__(self, path: str) -> float:
        self.paths.append(path)
        return self.ratio


def allocated(path) -> int:
    """Disk blocks a file holds, in bytes (not its apparent size)."""
    return os.stat(path).st_blocks * 512


def maps_of(directory) -> int:
    """Memory maps of files under `directory` in this process."""
    with open("/proc/self/maps") as maps:
        return sum(str(directory) in line for line in maps)


def descriptors_of(directory) -> int:
    """File descriptors of this process open on files under `directory`."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}").startswith(str(directory))
        except OSError:     # closed meanwhile (the listing's own descriptor)
            pass
    return count


def small_config(**overrides) -> MessageStoreConfig:
    """64 KiB CommitLog files, 50-unit ConsumeQueue files, a 64-slot index of 256 entries, a disk 10% full
    (whatever the machine's is: above 90% the store refuses writes)."""
    values = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=50 * 20,
                  max_hash_slot_num=64, max_index_num=256, delete_commit_log_files_interval_ms=0,
                  delete_consume_queue_files_interval_ms=0, flush_interval_commit_log_ms=50,
                  flush_interval_consume_queue_ms=50, disk_usage=DiskUsage())
    values.update(overrides)
    return MessageStoreConfig(**values)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def disk() -> DiskUsage:
    return DiskUsage()


@pytest.fixture
def open_store(tmp_path):
    """open_store(path=None, **config overrides) -> MessageStore; every store opened is closed at teardown."""
    stores: list[MessageStore] = []

    def opener(path: Path | None = None, config: MessageStoreConfig | None = None, **overrides) -> MessageStore:
        if config is None:
            config = small_config(**overrides)
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        store = MessageStore(path or tmp_path / "store", config)
        stores.append(store)
        return store

    yield opener
    for store in stores:
        store.close()
