"""StoreCheckpoint: the `checkpoint` file, RocketMQ's record of how far each part of the store is durable.

Layout (one 4 KiB page, big-endian): physicMsgTimestamp i64 at 0 (STORETIMESTAMP of the newest CommitLog
message known flushed), logicsMsgTimestamp i64 at 8 (same for ConsumeQueues), indexMsgTimestamp i64 at 16
(same for index files); the rest is zero. After a crash, recovery replays the CommitLog from the file whose
first message is older than the smallest of these, minus three seconds of margin.
"""
from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

from fastmq.store.mapped_file import OS_PAGE_SIZE, fsync_directory

log = logging.getLogger(__name__)

CHECKPOINT = struct.Struct(">qqq")
RECOVERY_MARGIN_MS = 3_000


class StoreCheckpoint:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self._fd = -1
        if read_only:
            if path.exists():
                self._load(path.read_bytes())
            return
        created = not path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not created:
            self._load(os.pread(self._fd, CHECKPOINT.size, 0))
        if os.fstat(self._fd).st_size < OS_PAGE_SIZE:
            os.ftruncate(self._fd, OS_PAGE_SIZE)
        if created:
            fsync_directory(path.parent)

    def _load(self, data: bytes) -> None:
        if len(data) < CHECKPOINT.size:
            # A checkpoint torn while being created: recovery then replays everything, which is always safe.
            log.warning("checkpoint %s holds %d bytes, not %d: treating it as empty", self.path, len(data),
                        CHECKPOINT.size)
            return
        # Negative values can only come from damage; zero makes recovery replay from the start.
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
            max(0, value) for value in CHECKPOINT.unpack_from(data, 0))

    def min_timestamp(self, include_index: bool) -> int:
        """The newest STORETIMESTAMP before which everything is durable, less the recovery margin."""
        timestamp = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if include_index:
            timestamp = min(timestamp, self.index_msg_timestamp)
        return max(0, timestamp - RECOVERY_MARGIN_MS)

    def flush(self) -> None:
        if self._fd < 0:
            return
        os.pwrite(self._fd, CHECKPOINT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp,
                                            self.index_msg_timestamp), 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1
