"""CommitLog: every message of every topic, appended to one MappedFileQueue (SmartGo-Store 1.3).

Appends are serialized by `put_lock`; inside it a MessageBatch gets its queue offsets, its records are encoded
straight into the mapped file (store_codec.MessageBatch.encode), and the batch is handed to the dispatcher
(ConsumeQueue + IndexFile) before the lock is released, so that queue offsets, CommitLog order and ConsumeQueue
order always agree. Replays (recovery, replication) dispatch one DispatchRequest per record instead.
Record layout: fastmq/_native/store_codec.pyx.
"""
from __future__ import annotations

import errno
import logging
import threading
from pathlib import Path
from typing import Callable

from fastmq._native import store_codec
from fastmq._native.store_codec import DispatchRequest, MessageBatch
from fastmq.store.errors import DiskFullError, HAProtocolError, MessageIllegalError
from fastmq.store.mapped_file import MappedFile, MappedFileQueue, OpenMappings
from fastmq.store.message import StoredMessage, pack_host
from fastmq.store.store_config import MessageStoreConfig

log = logging.getLogger(__name__)

TRANSACTION_TYPE_MASK = store_codec.SYSFLAG_TRANSACTION_TYPE_MASK
TRANSACTION_PREPARED = store_codec.SYSFLAG_PREPARED
TRANSACTION_ROLLBACK = store_codec.SYSFLAG_ROLLBACK


def is_consumable(sys_flag: int) -> bool:
    """Prepared and rolled-back transactional messages get no queue offset and no ConsumeQueue unit."""
    return sys_flag & TRANSACTION_TYPE_MASK not in (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK)


class ScanResult:
    """Where a scan of the CommitLog stopped and why (a store_codec STATUS_* value)."""

    __slots__ = ("offset", "status", "error")

    def __init__(self, offset: int, status: int, error: str | None) -> None:
        self.offset = offset
        self.status = status
        self.error = error


class CommitLog:
    def __init__(self, root: Path, config: MessageStoreConfig, read_only: bool = False,
                 mappings: OpenMappings | None = None) -> None:
        self.config = config
        self.mapped_file_queue = MappedFileQueue(
            root / "commitlog", config.mapped_file_size_commit_log, read_only,
            mappings if mappings is not None else OpenMappings(config.max_open_mapped_files),
            config.commit_log_reserve_ahead)
        self.put_lock = threading.Lock()
        # (topic, queue id) -> the queue offset the next message of that queue gets.
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.store_host = pack_host(config.store_host)
        # Called under put_lock with each appended batch (set by the MessageStore).
        self.batch_dispatcher: Callable[[MessageBatch], None] = lambda batch: None
        self._clock = config.clock

    @property
    def file_size(self) -> int:
        return self.mapped_file_queue.mapped_file_size

    def load(self, infer_size: bool = False) -> None:
        self.mapped_file_queue.load(infer_size)

    # -- appending --------------------------------------------------------------------------------------------

    def new_batch(self, topic: str, queue_id: int, sys_flag: int = 0, reconsume_times: int = 0,
                  prepared_transaction_offset: int = 0) -> MessageBatch:
        """An empty batch for topic/queue_id whose add() enforces max_message_size and the file size."""
        return MessageBatch(topic, queue_id, self.store_host, self.config.max_message_size,
                            self.file_size - store_codec.END_FILE_MIN_BLANK, sys_flag, reconsume_times,
                            prepared_transaction_offset)

    def put_batch(self, batch: MessageBatch) -> None:
        """Append the batch's messages (consecutive queue offsets, one STORETIMESTAMP) and dispatch them."""
        key = (batch.topic, batch.queue_id)
        consumable = is_consumable(batch.sys_flag)
        queue = self.mapped_file_queue
        with self.put_lock:
            store_timestamp = self._clock()
            batch.begin(self.topic_queue_table.get(key, 0) if consumable else 0, store_timestamp)
            try:
                while not batch.done:
                    mapped = queue.get_writable_file()
                    view = mapped.append_view(mapped.wrote_position + batch.total_bytes)
                    position = batch.encode(view, mapped.wrote_position, mapped.file_from_offset)
                    if position == mapped.file_size and mapped.wrote_position == 0:
                        raise MessageIllegalError(f"a message does not fit in an empty {self.file_size}-byte "
                                                  "CommitLog file")
                    mapped.wrote_position = position
                    mapped.store_timestamp = store_timestamp
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise DiskFullError(f"no space for a new CommitLog file in {queue.store_path}") from exc
                raise
            finally:
                # Records already written are messages: they get their queue offsets and units even when a
                # later one failed, so that the CommitLog and the ConsumeQueue never disagree.
                if batch.written:
                    if consumable:
                        self.topic_queue_table[key] = batch.first_queue_offset + batch.written
                    self.batch_dispatcher(batch)

    def append_data(self, start_offset: int, data: bytes) -> None:
        """Replicated bytes from a master, written at exactly `start_offset` (an HA slave's only writes).
        The caller holds put_lock."""
        files = self.mapped_file_queue.files
        if files:
            if start_offset != self.get_max_offset():
                raise HAProtocolError(f"master data starts at {start_offset}, the slave's CommitLog ends at "
                                      f"{self.get_max_offset()}")
        elif start_offset % self.file_size:
            raise HAProtocolError(f"an empty slave can only start at a file boundary, not at {start_offset}")
        mapped = self.mapped_file_queue.get_writable_file(start_offset)
        position = mapped.wrote_position
        if position + len(data) > mapped.file_size:
            raise HAProtocolError(f"{len(data)} bytes at {start_offset} cross the end of CommitLog file "
                                  f"{mapped.path.name}: master and slave file sizes differ")
        mapped.append_view(position + len(data))[position:position + len(data)] = data
        mapped.wrote_position = position + len(data)

    # -- reading ----------------------------------------------------------------------------------------------

    def get_min_offset(self) -> int:
        return self.mapped_file_queue.get_min_offset()

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def find_file(self, offset: int) -> MappedFile | None:
        return self.mapped_file_queue.find_mapped_file_by_offset(offset)

    def get_data(self, offset: int, size: int | None = None) -> memoryview | None:
        """Zero-copy view of CommitLog bytes [offset, offset + size) (to the end of the file's data when size is
        None); None when they are not readable (not written yet, or deleted)."""
        mapped = self.find_file(offset)
        if mapped is None:
            return None
        return mapped.select(offset - mapped.file_from_offset, size)

    def get_message(self, offset: int, size: int = -1, check_crc: bool = False) -> StoredMessage | None:
        """The message whose record starts at `offset`, None if that offset is not readable."""
        mapped = self.find_file(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        data = mapped.select(position, size if size >= 0 else None)
        if data is None:
            return None
        return StoredMessage.decode(data, 0, size, check_crc)

    def pick_store_timestamp(self, offset: int) -> int:
        mapped = self.find_file(offset)
        if mapped is None or offset - mapped.file_from_offset >= mapped.wrote_position:
            return -1
        try:
            return store_codec.pick_store_timestamp(mapped.view, offset - mapped.file_from_offset)
        except ValueError:   # the file was destroyed concurrently
            return -1

    def scan(self, from_offset: int, check_crc: bool, on_message: Callable[[DispatchRequest], None]) -> ScanResult:
        """Walk the records from `from_offset` (a record boundary) until the data ends or stops making sense;
        every intact message goes to on_message. Blank records lead to the next file."""
        offset = from_offset
        mapped = self.find_file(offset)
        while mapped is not None:
            request = store_codec.check_message(mapped.view, offset - mapped.file_from_offset,
                                                mapped.wrote_position, offset, check_crc)
            if request.status == store_codec.STATUS_OK:
                on_message(request)
                offset += request.msg_size
            elif request.status == store_codec.STATUS_BLANK:
                offset = mapped.file_from_offset + mapped.file_size
                next_file = self.find_file(offset)
                if next_file is None:
                    return ScanResult(offset, request.status, None)
                mapped = next_file
            else:
                return ScanResult(offset, request.status, request.error)
        return ScanResult(offset, store_codec.STATUS_END, None)

    # -- upkeep -----------------------------------------------------------------------------------------------

    def flush(self, least_pages: int) -> int:
        """Flush dirty CommitLog pages; returns the STORETIMESTAMP of the newest flushed message (0: none)."""
        return self.mapped_file_queue.flush(least_pages)[1]

    @property
    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    def close(self) -> None:
        self.mapped_file_queue.close()
