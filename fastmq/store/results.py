"""What put_message(s) and get_messages return (RocketMQ's PutMessageResult and GetMessageResult)."""
from __future__ import annotations

import enum
from typing import Iterator

from fastmq._native.store_codec import MessageBatch
from fastmq.store.commitlog import is_consumable
from fastmq.store.message import StoredMessage, create_message_id


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"      # stored, but not yet known durable (SYNC_FLUSH timed out)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"    # stored, but no slave confirmed it in time (SYNC_MASTER)
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"    # stored, but no slave is connected and caught up (SYNC_MASTER)


class PutMessageResult:
    """Where a put stored its message(s). For a batch the offsets are those of the first message."""

    __slots__ = ("status", "_batch", "_store_host")

    def __init__(self, status: PutMessageStatus, batch: MessageBatch, store_host: bytes) -> None:
        self.status = status
        self._batch = batch
        self._store_host = store_host

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def commitlog_offset(self) -> int:
        return self._batch.commitlog_offset(0)

    @property
    def queue_offset(self) -> int:
        return self._batch.first_queue_offset

    @property
    def store_timestamp(self) -> int:
        return self._batch.store_timestamp

    @property
    def message_count(self) -> int:
        return self._batch.count

    @property
    def size(self) -> int:
        """Bytes the records take in the CommitLog."""
        return self._batch.total_bytes

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the last record."""
        last = self._batch.count - 1
        return self._batch.commitlog_offset(last) + self._batch.size(last)

    @property
    def commitlog_offsets(self) -> list[int]:
        return list(self._batch.commitlog_offsets)

    @property
    def queue_offsets(self) -> list[int]:
        if not is_consumable(self._batch.sys_flag):
            return [0] * self.message_count
        return list(range(self.queue_offset, self.queue_offset + self.message_count))

    @property
    def msg_id(self) -> str:
        return create_message_id(self._store_host, self.commitlog_offset)

    @property
    def msg_ids(self) -> list[str]:
        return [create_message_id(self._store_host, offset) for offset in self._batch.commitlog_offsets]

    def __repr__(self) -> str:
        return (f"PutMessageResult({self.status.value}, commitlog_offset={self.commitlog_offset}, "
                f"queue_offset={self.queue_offset}, messages={self.message_count})")


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"          # units were read but none matched the tag filter
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"      # the units point at CommitLog files already deleted
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"            # the unit itself could not be read
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"    # offset > max offset
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"        # offset == max offset: wait for new messages
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"              # offset < min offset (cleaned up)
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"  # no such topic/queue
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"        # the queue exists but holds nothing


class GetMessageResult:
    """Messages read from one queue, and where the next read should start (next_begin_offset)."""

    __slots__ = ("status", "messages", "next_begin_offset", "min_offset", "max_offset")

    def __init__(self, status: GetMessageStatus, messages: list[StoredMessage], next_begin_offset: int,
                 min_offset: int, max_offset: int) -> None:
        self.status = status
        self.messages = messages
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset

    def __iter__(self) -> Iterator[StoredMessage]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return (f"GetMessageResult({self.status.value}, messages={len(self.messages)}, "
                f"next_begin_offset={self.next_begin_offset}, min={self.min_offset}, max={self.max_offset})")
