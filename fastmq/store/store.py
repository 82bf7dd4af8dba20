"""MessageStore: the CommitLog, its ConsumeQueues and index, flushing, recovery, cleanup and replication behind one
API (RocketMQ's DefaultMessageStore).

Layout under the store directory (RocketMQ's, so either can open the other's files):
    commitlog/{20-digit offset}                 consumequeue/{topic}/{queueId}/{20-digit offset}
    index/{yyyyMMddHHmmssSSS}                   checkpoint   abort   lock   config/*.json

Threads: any number of readers and appenders (appends are serialized by the CommitLog's put lock); the flush,
cleanup and replication services run in background threads that close() stops.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from fastmq._native import queue_codec, store_codec
from fastmq._native.queue_codec import QueueUnits
from fastmq._native.store_codec import DispatchRequest, MessageBatch
from fastmq.closeable import Closeable
from fastmq.errors import ProtocolError
from fastmq.store.checkpoint import StoreCheckpoint
from fastmq.store.cleanup import CleanupService
from fastmq.store.commitlog import CommitLog, is_consumable
from fastmq.store.config import (ConsumerOffsetManager, DeletedTopicManager, SubscriptionGroupManager,
                                 TopicConfigManager)
from fastmq.store.consumequeue import ConsumeQueue
from fastmq.store.errors import (DiskFullError, MessageIllegalError, ReadOnlyStoreError, StoreClosedError,
                                 StoreConfigError, StoreLockedError)
from fastmq.store.flush import FlushConsumeQueueService, FlushRealTimeService, GroupCommitService
from fastmq.store.ha import HAClient, HAService
from fastmq.store.index import IndexService
from fastmq.store.mapped_file import OpenMappings, fsync_directory
from fastmq.store.message import (PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, Message, StoredMessage,
                                  build_properties, decode_message_id, join_keys, pack_host)
from fastmq.store.recovery import recover
from fastmq.store.results import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus
from fastmq.store.service_thread import ServiceThread
from fastmq.store.store_config import BrokerRole, FlushDiskType, MessageStoreConfig

if TYPE_CHECKING:
    from typing_extensions import Buffer

log = logging.getLogger(__name__)

# Topic names are directory names: RocketMQ's characters plus '.', at most one path component long.
TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_.\-]+")
MAX_TOPIC_BYTES = 255
MAX_QUEUE_ID = 2 ** 31 - 1
MIN_FILTER_SCAN_UNITS = 800   # RocketMQ scans at least 16000 bytes of units when filtering by tag

ArrivalListener = Callable[[str, int, int], None]


def parse_tag_filter(tags: str | Iterable[str] | None) -> tuple[frozenset[str] | None, array[int] | None]:
    """("TagA || TagB" or an iterable of tags) -> (the tag names, their sorted tags codes); (None, None) = all."""
    if tags is None:
        return None, None
    if isinstance(tags, str):
        if tags.strip() in ("", "*"):
            return None, None
        tags = tags.split("||")
    names = frozenset(tag.strip() for tag in tags if tag.strip())
    if not names:
        return None, None
    return names, array("q", sorted({store_codec.tags_hash_code(name) for name in names}))


class MessageStore(Closeable):
    """A RocketMQ 4.x compatible message store in the directory `path`."""

    def __init__(self, path: str | os.PathLike[str], config: MessageStoreConfig | None = None) -> None:
        self.root = Path(path)
        self.config = config = config if config is not None else MessageStoreConfig()
        config.validate()
        self.read_only = config.read_only
        self.disk_full = False
        self.last_dispatched_timestamp = 0
        self.reput_from_offset = 0
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self._closed = False
        self._clock = config.clock
        self._valid_topics: set[str] = set()
        self._arrival = threading.Condition()
        self._arrival_waiters = 0
        self._arrival_listeners: list[ArrivalListener] = []
        self._lock_fd = -1
        self._services: list[ServiceThread] = []
        self.group_commit_service: GroupCommitService | None = None
        # Serves when_flushed(): the group commit service in SYNC_FLUSH mode, an idle one of its own otherwise.
        self._flush_on_request: GroupCommitService | None = None
        self.flush_consume_queue_service: FlushConsumeQueueService | None = None
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.cleanup: CleanupService | None = None

        if self.read_only:
            if not self.root.is_dir():
                raise StoreConfigError(f"{self.root} is not a store directory")
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()
        try:
            self._open()
        except BaseException:
            self._release_files()
            raise

    # -- opening and closing ----------------------------------------------------------------------------------

    def _acquire_lock(self) -> None:
        self._lock_fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise StoreLockedError(f"{self.root} is in use by another process (its lock file is held)") from None

    def _open(self) -> None:
        config = self.config
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint", self.read_only)
        # One bound on open mappings for the CommitLog and every ConsumeQueue.
        self.open_mappings = OpenMappings(config.max_open_mapped_files)
        self.commit_log = CommitLog(self.root, config, self.read_only, self.open_mappings)
        self.commit_log.batch_dispatcher = self.dispatch_batch
        self.index_service = (IndexService(self.root, config.max_hash_slot_num, config.max_index_num, self._clock,
                                           self.read_only) if config.message_index_enable else None)
        config_dir = self.root / "config"
        self.topic_config_manager = TopicConfigManager(config_dir, self.read_only)
        self.consumer_offset_manager = ConsumerOffsetManager(config_dir, self.read_only)
        self.subscription_group_manager = SubscriptionGroupManager(config_dir, self.read_only)
        self.deleted_topic_manager = DeletedTopicManager(config_dir, self.read_only)
        for manager in (self.topic_config_manager, self.consumer_offset_manager, self.subscription_group_manager,
                        self.deleted_topic_manager):
            manager.load()

        abort_file = self.root / "abort"
        last_exit_ok = not abort_file.exists()
        self.commit_log.load(infer_size=self.read_only)
        self._load_consume_queues()
        recover(self, last_exit_ok)
        self.reput_from_offset = self.commit_log.get_max_offset()
        log.info("store %s opened (%s shutdown before): CommitLog [%d, %d), %d queues", self.root,
                 "clean" if last_exit_ok else "crash", self.commit_log.get_min_offset(),
                 self.commit_log.get_max_offset(), len(self.consume_queue_table))
        if self.read_only:
            return
        abort_file.touch()
        fsync_directory(self.root)
        self._start_services()

    def _load_consume_queues(self) -> None:
        root = self.root / "consumequeue"
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if not (queue_dir.is_dir() and queue_dir.name.isdigit()):
                    log.warning("ignoring %s: not a queue directory", queue_dir)
                    continue
                consume_queue = ConsumeQueue(topic_dir.name, int(queue_dir.name), root,
                                             self.config.consume_queue_file_size, self.read_only, self.open_mappings)
                consume_queue.load(infer_size=self.read_only)
                self.consume_queue_table[(consume_queue.topic, consume_queue.queue_id)] = consume_queue

    def _start_services(self) -> None:
        config = self.config
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.group_commit_service = GroupCommitService(self.commit_log, self.checkpoint)
            self._flush_on_request = self.group_commit_service
        else:
            self._flush_on_request = GroupCommitService(self.commit_log, self.checkpoint)
            self._services.append(FlushRealTimeService(self.commit_log, self.checkpoint, config))
        self._services.append(self._flush_on_request)
        self.flush_consume_queue_service = FlushConsumeQueueService(self)
        self.cleanup = CleanupService(self)
        self.cleanup.clean_commit_log.is_space_to_delete()    # refuse writes at once on a full disk
        self._services += [self.flush_consume_queue_service, self.cleanup]
        if config.broker_role is BrokerRole.SLAVE:
            assert config.ha_master_address is not None, "validate() refuses a SLAVE without one"
            self.ha_client = HAClient(self, config.ha_master_address)
            self._services.append(self.ha_client)
        elif config.ha_listen_port is not None:
            self.ha_service = HAService(self)
            self._services.append(self.ha_service)
        for service in self._services:
            service.start()

    def close(self) -> None:
        """Stop the services, flush everything, write the checkpoint and mark the shutdown as clean."""
        if self._closed:
            return
        self._closed = True
        with self._arrival:
            self._arrival.notify_all()
        for service in reversed(self._services):
            service.shutdown()
        if self.flush_consume_queue_service is not None:
            with self.commit_log.put_lock:
                self.commit_log.flush(0)
                last = self.commit_log.mapped_file_queue.get_last_mapped_file()
                if last is not None:
                    self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp,
                                                               last.store_timestamp)
                self.flush_consume_queue_service.flush(thorough=True)
                self.consumer_offset_manager.persist()
                self.topic_config_manager.close()
            (self.root / "abort").unlink(missing_ok=True)
            fsync_directory(self.root)
        self._release_files()
        log.info("store %s closed", self.root)

    def _release_files(self) -> None:
        for name in ("commit_log", "index_service", "checkpoint"):
            component = getattr(self, name, None)
            if component is not None:
                component.close()
        for consume_queue in self.consume_queues():
            consume_queue.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    @property
    def closed(self) -> bool:
        return self._closed

    # -- dispatch ---------------------------------------------------------------------------------------------

    def consume_queues(self) -> list[ConsumeQueue]:
        return list(self.consume_queue_table.values())

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queue_table.get((topic, queue_id))

    def _consume_queue_for(self, topic: str, queue_id: int) -> ConsumeQueue:
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        if consume_queue is None:
            consume_queue = ConsumeQueue(topic, queue_id, self.root / "consumequeue",
                                         self.config.consume_queue_file_size, self.read_only, self.open_mappings)
            self.consume_queue_table[(topic, queue_id)] = consume_queue
        return consume_queue

    def dispatch(self, request: DispatchRequest) -> None:
        """Record one replayed CommitLog message (recovery, replication) in its ConsumeQueue and the index."""
        deleted = self.deleted_topic_manager.deleted
        if deleted and request.commitlog_offset < deleted.get(request.topic, -1):
            return      # a message of a topic deleted since
        if is_consumable(request.sys_flag):
            self._consume_queue_for(request.topic, request.queue_id).put_message_position_info(request)
        if self.index_service is not None:
            self.index_service.build_index(request)
        self.last_dispatched_timestamp = request.store_timestamp

    def dispatch_batch(self, batch: MessageBatch) -> None:
        """Record a freshly appended batch in its ConsumeQueue and the index (under the put lock)."""
        if is_consumable(batch.sys_flag):
            self._consume_queue_for(batch.topic, batch.queue_id).put_batch(batch)
        if self.index_service is not None and batch.index_items:
            self.index_service.build_batch_index(batch)
        self.last_dispatched_timestamp = batch.store_timestamp

    def delete_topic(self, topic: str) -> None:
        """Forget every queue of `topic`: their ConsumeQueue files go now; the messages stay in the CommitLog until
        the cleanup deletes their files, and replays skip them from now on (the tombstone in deletedTopics.json)."""
        self._check_writable()
        with self.commit_log.put_lock:
            self.deleted_topic_manager.deleted[topic] = self.commit_log.get_max_offset()
            self.deleted_topic_manager.persist()
            for key in [key for key in self.consume_queue_table if key[0] == topic]:
                self.consume_queue_table.pop(key).destroy()
                self.commit_log.topic_queue_table.pop(key, None)
        try:
            (self.root / "consumequeue" / topic).rmdir()
        except OSError:
            pass
        log.info("deleted topic %s from the store", topic)

    # -- writing ----------------------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if self.read_only or self.config.broker_role is BrokerRole.SLAVE:
            raise ReadOnlyStoreError(f"store {self.root} does not accept messages (read-only or slave)")
        if self.disk_full:
            raise DiskFullError(f"disk usage above {self.config.disk_space_warning_level_ratio}%: writes refused")

    def _check_destination(self, topic: str, queue_id: int) -> None:
        if topic not in self._valid_topics:
            if not isinstance(topic, str) or not TOPIC_PATTERN.fullmatch(topic) or topic in (".", "..") \
                    or len(topic.encode()) > MAX_TOPIC_BYTES:
                raise MessageIllegalError(f"topic {topic!r} must be 1..{MAX_TOPIC_BYTES} characters of "
                                          "a-z A-Z 0-9 % | _ . - (and not '.' or '..')")
            self._valid_topics.add(topic)
        if not 0 <= queue_id <= MAX_QUEUE_ID:
            raise MessageIllegalError(f"queue id {queue_id} out of range 0..{MAX_QUEUE_ID}")

    def _add(self, batch: MessageBatch, body: Buffer, tags: str | None, keys: str | Sequence[str] | None,
             properties: Mapping[str, str] | None, born_timestamp: int | None, born_host: tuple[str, int] | None,
             flag: int) -> None:
        if properties:
            tags = tags if tags is not None else properties.get(PROPERTY_TAGS)
            keys = keys if keys is not None else properties.get(PROPERTY_KEYS)
            uniq_key = properties.get(PROPERTY_UNIQ_KEY)
        else:
            uniq_key = None
        if keys is not None:
            keys = join_keys(keys)
        try:
            batch.add(body, build_properties(tags, keys, properties), store_codec.tags_hash_code(tags) if tags else 0,
                      self._clock() if born_timestamp is None else born_timestamp, flag, keys, uniq_key,
                      None if born_host is None else pack_host(born_host))
        except (TypeError, ValueError) as exc:
            raise MessageIllegalError(str(exc)) from None

    def put_message(self, topic: str, queue_id: int, body: Buffer, tags: str | None = None,
                    keys: str | Sequence[str] | None = None, properties: Mapping[str, str] | None = None, *,
                    born_timestamp: int | None = None, born_host: tuple[str, int] | None = None, flag: int = 0,
                    sys_flag: int = 0, reconsume_times: int = 0,
                    prepared_transaction_offset: int = 0) -> PutMessageResult:
        """Append one message to topic/queue_id. With SYNC_FLUSH this returns once the record is fsynced (status
        FLUSH_DISK_TIMEOUT if that took longer than sync_flush_timeout_ms)."""
        self._check_writable()
        self._check_destination(topic, queue_id)
        batch = self.commit_log.new_batch(topic, queue_id, sys_flag, reconsume_times, prepared_transaction_offset)
        self._add(batch, body, tags, keys, properties, born_timestamp, born_host, flag)
        self.commit_log.put_batch(batch)
        return self._complete_put(batch)

    def put_messages(self, topic: str, queue_id: int, messages: Iterable[Message | bytes]) -> PutMessageResult:
        """Append a batch to one queue: consecutive queue offsets, one lock acquisition, one flush wait. Every
        message is validated before any is written."""
        self._check_writable()
        self._check_destination(topic, queue_id)
        batch = self.commit_log.new_batch(topic, queue_id)
        add = batch.add
        born_timestamp = self._clock()
        try:
            for message in messages:
                if type(message) is bytes:
                    add(message, b"", 0, born_timestamp)
                elif isinstance(message, Message):
                    self._add(batch, message.body, message.tags, message.keys, message.properties,
                              message.born_timestamp, None, message.flag)
                else:
                    add(message, b"", 0, born_timestamp)
        except (TypeError, ValueError) as exc:
            raise MessageIllegalError(str(exc)) from None
        if not batch.count:
            raise MessageIllegalError("put_messages needs at least one message")
        self.commit_log.put_batch(batch)
        return self._complete_put(batch)

    def new_batch(self, topic: str, queue_id: int) -> MessageBatch:
        """An empty batch for topic/queue_id, for front ends that fill it themselves (compiled converters from
        their wire format) and hand it to append_batch()."""
        return self.commit_log.new_batch(topic, queue_id)

    def append_batch(self, batch: MessageBatch) -> PutMessageResult:
        """Append a filled batch and return at once, whatever the flush mode: a front end that must not block
        (acks=all answered from an I/O thread) asks for durability separately with when_flushed(result.end_offset).
        """
        self._check_writable()
        self._check_destination(batch.topic, batch.queue_id)
        if not batch.count:
            raise MessageIllegalError("append_batch needs at least one message")
        self.commit_log.put_batch(batch)
        self._notify_arrival(batch.topic, batch.queue_id, batch.first_queue_offset + batch.count)
        if self.ha_service is not None:
            self.ha_service.notify_data()
        return PutMessageResult(PutMessageStatus.PUT_OK, batch, self.commit_log.store_host)

    def when_flushed(self, offset: int, callback: Callable[[bool], None]) -> None:
        """callback(True) once the CommitLog is durable (fsynced) up to `offset`: at once if it already is, else
        from the flush thread, where concurrent requests share one fsync (group commit). callback(False) if the
        flush failed or the store closed first. Never blocks."""
        service = self._flush_on_request
        if service is None:       # read-only or slave: nothing is appended here
            callback(self.commit_log.flushed_where >= offset)
            return
        service.request_flush(offset, callback)

    def _complete_put(self, batch: MessageBatch) -> PutMessageResult:
        self._notify_arrival(batch.topic, batch.queue_id, batch.first_queue_offset + batch.count)
        last = batch.count - 1
        end_offset = batch.commitlog_offset(last) + batch.size(last)
        status = PutMessageStatus.PUT_OK
        timeout = self.config.sync_flush_timeout_ms / 1000
        if self.group_commit_service is not None and not self.group_commit_service.wait_for_flush(end_offset, timeout):
            log.error("flush to disk timed out after %.1f s (CommitLog offset %d)", timeout, end_offset)
            status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        if self.ha_service is not None:
            self.ha_service.notify_data()
            if status is PutMessageStatus.PUT_OK and self.config.broker_role is BrokerRole.SYNC_MASTER:
                if not self.ha_service.is_slave_ok(end_offset):
                    status = PutMessageStatus.SLAVE_NOT_AVAILABLE
                elif not self.ha_service.wait_for_slave(end_offset, timeout):
                    status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return PutMessageResult(status, batch, self.commit_log.store_host)

    def append_to_commit_log(self, start_offset: int, data: bytes) -> None:
        """Apply replicated CommitLog bytes (HA slave) and dispatch the messages they complete."""
        arrived: dict[tuple[str, int], int] = {}

        def dispatch_and_note(request: DispatchRequest) -> None:
            self.dispatch(request)
            arrived[(request.topic, request.queue_id)] = request.consume_queue_offset + 1

        with self.commit_log.put_lock:
            self.commit_log.append_data(start_offset, data)
            # An empty slave's CommitLog starts wherever the master's transfer did.
            self.reput_from_offset = max(self.reput_from_offset, self.commit_log.get_min_offset())
            result = self.commit_log.scan(self.reput_from_offset, False, dispatch_and_note)
            if result.status == store_codec.STATUS_CORRUPT:
                log.error("replicated data at %d is not a valid record (%s); dispatching stalls there",
                          result.offset, result.error)
            self.reput_from_offset = result.offset
            last = self.commit_log.mapped_file_queue.get_last_mapped_file()
            if last is not None and arrived:
                last.store_timestamp = self.last_dispatched_timestamp
        for (topic, queue_id), next_offset in arrived.items():
            self._notify_arrival(topic, queue_id, next_offset)

    # -- waiting for messages ---------------------------------------------------------------------------------

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """listener(topic, queue_id, max_offset) runs in the appending thread after each put (keep it short)."""
        self._arrival_listeners.append(listener)

    def remove_arrival_listener(self, listener: ArrivalListener) -> None:
        self._arrival_listeners.remove(listener)

    def _notify_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if self._arrival_waiters:
            with self._arrival:
                self._arrival.notify_all()
        for listener in self._arrival_listeners:
            try:
                listener(topic, queue_id, max_offset)
            except Exception:
                log.exception("arrival listener %r failed", listener)

    def wait_for_messages(self, topic: str, queue_id: int, offset: int, timeout: float) -> bool:
        """Block until the queue has a message at `offset` (max offset > offset) or timeout seconds pass (long
        polling). True if there is one."""
        deadline = time.monotonic() + timeout
        with self._arrival:
            self._arrival_waiters += 1
            try:
                while self.get_max_offset(topic, queue_id) <= offset:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._closed:
                        return False
                    self._arrival.wait(remaining)
                return True
            finally:
                self._arrival_waiters -= 1

    # -- reading ----------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        """The queue's first logical offset still readable."""
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        return consume_queue.get_min_offset_in_queue() if consume_queue is not None else 0

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        """The logical offset the queue's next message gets."""
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        return consume_queue.get_max_offset_in_queue() if consume_queue is not None else 0

    def get_offset_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(get_min_offset, get_max_offset) of the queue, with one lookup."""
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        return consume_queue.offset_range() if consume_queue is not None else (0, 0)

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first logical offset stored at or after `timestamp` (ms since the epoch); the max offset if none."""
        self._check_open()
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        if consume_queue is None:
            return 0
        return consume_queue.get_offset_in_queue_by_time(timestamp, self.commit_log.pick_store_timestamp)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """STORETIMESTAMP of the message at a logical offset, -1 if there is none."""
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        unit = consume_queue.get_unit(offset) if consume_queue is not None else None
        return self.commit_log.pick_store_timestamp(unit[0]) if unit is not None else -1

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                     tags: str | Iterable[str] | None = None, max_bytes: int | None = None) -> GetMessageResult:
        """Up to max_count messages of one queue from logical offset `offset` on.

        tags: None or "*" for all, "TagA || TagB" or an iterable of tags to keep only those. max_bytes bounds the
        records' total size (the first message is always returned). The status and next_begin_offset follow
        RocketMQ's pull semantics.
        """
        self._check_open()
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        if consume_queue is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, [], 0, 0, 0)
        min_offset = consume_queue.get_min_offset_in_queue()
        max_offset = consume_queue.get_max_offset_in_queue()
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, [], 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, [], min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, [], offset, min_offset, max_offset)
        if offset > max_offset:
            next_offset = min_offset if min_offset == 0 else max_offset
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, [], next_offset, min_offset, max_offset)

        names, codes = parse_tag_filter(tags)
        units = QueueUnits(max(1, max_count), queue_id)
        consume_queue.scan(offset, units, codes, -1 if max_bytes is None else max_bytes,
                           max(MIN_FILTER_SCAN_UNITS, max_count) if codes is not None else -1)
        messages = []
        removed = False
        for i in range(len(units)):
            commitlog_offset, size, queue_offset = units[i]
            message = self.commit_log.get_message(commitlog_offset, size)
            if message is None:
                removed = True
            elif (message.queue_offset, message.queue_id, message.topic) != (queue_offset, queue_id, topic):
                log.error("%s/%d: the unit at queue offset %d points at a message of %s/%d offset %d; skipped",
                          topic, queue_id, queue_offset, message.topic, message.queue_id, message.queue_offset)
            elif names is None or message.tags in names:
                messages.append(message)
        next_offset = units.next_offset
        if messages:
            status = GetMessageStatus.FOUND
        elif removed:
            status = GetMessageStatus.MESSAGE_WAS_REMOVING
        elif next_offset > offset:
            status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            # Not even the unit could be read: skip to the next ConsumeQueue file.
            status = GetMessageStatus.OFFSET_FOUND_NULL
            units_per_file = consume_queue.file_size // queue_codec.CQ_UNIT_SIZE
            next_offset = min(max_offset, offset + units_per_file - offset % units_per_file)
        return GetMessageResult(status, messages, next_offset, min_offset, max_offset)

    def scan_queue(self, topic: str, queue_id: int, offset: int, max_count: int,
                   tags: str | Iterable[str] | None = None, max_bytes: int | None = None) -> QueueUnits:
        """The zero-copy read path: ConsumeQueue units from `offset` as arrays (commitlog_offsets, sizes,
        queue_offsets), filtered by tags code only (no per-message objects); next_offset says where to go on."""
        self._check_open()
        units = QueueUnits(max(0, max_count), queue_id)
        consume_queue = self.consume_queue_table.get((topic, queue_id))
        if consume_queue is None:
            units.next_offset = offset
            return units
        _names, codes = parse_tag_filter(tags)
        consume_queue.scan(offset, units, codes, -1 if max_bytes is None else max_bytes,
                           max(MIN_FILTER_SCAN_UNITS, max_count) if codes is not None else -1)
        return units

    def read_records(self, units: QueueUnits, buffer: bytearray | None = None) -> tuple[bytearray | memoryview, int]:
        """Copy the records of `units` (from scan_queue) back to back into one buffer (a RocketMQ pull response
        body). Returns (buffer, number of leading units whose records it holds); records
        deleted meanwhile end it. A unit that does not point at its own record raises CorruptDataError.
        With `buffer` (a bytearray a reader reuses, grown when too small, to spare a fresh allocation and its
        page faults per read) the records are copied there and a memoryview of them is returned."""
        if buffer is None:
            out = bytearray(units.total_bytes)
        else:
            if len(buffer) < units.total_bytes:
                buffer.extend(bytes(units.total_bytes - len(buffer)))
            out = buffer
        position = 0
        index = 0
        while index < len(units):
            mapped = self.commit_log.find_file(units[index][0])
            if mapped is None:
                break
            try:
                gathered, position = units.gather(mapped.view, mapped.file_from_offset, mapped.wrote_position,
                                                  index, out, position)
            except ValueError:   # the file was deleted while copying
                break
            if gathered == index:
                break
            index = gathered
        if buffer is not None:
            return memoryview(out)[:position], index
        del out[position:]
        return out, index

    def get_data(self, commitlog_offset: int, size: int) -> memoryview | None:
        """Zero-copy view of one record (or any CommitLog range inside one file); None if not readable."""
        return self.commit_log.get_data(commitlog_offset, size)

    def get_message_by_offset(self, commitlog_offset: int, size: int = -1) -> StoredMessage | None:
        """The message whose record starts at this CommitLog offset (None if nothing is readable there)."""
        self._check_open()
        return self.commit_log.get_message(commitlog_offset, size)

    def get_message_by_id(self, msg_id: str) -> StoredMessage | None:
        """The message with this offset message id (as returned in PutMessageResult.msg_id)."""
        _host, commitlog_offset = decode_message_id(msg_id)
        return self.get_message_by_offset(commitlog_offset)

    def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                      end: int = 2 ** 63 - 1) -> list[StoredMessage]:
        """Messages of `topic` whose KEYS (or UNIQ_KEY) include `key`, stored between begin and end (ms), newest
        first. Hash collisions are filtered out by reading each message back."""
        self._check_open()
        if self.index_service is None:
            raise StoreConfigError("message_index_enable is off: there is no index to query")
        found = []
        for offset in self.index_service.query_offsets(topic, key, max_num, begin, end):
            try:
                message = self.commit_log.get_message(offset)
            except ProtocolError:
                log.warning("index entry for %s#%s points at %d, where no record starts (damaged index)", topic,
                            key, offset)
                continue
            if message is not None and message.topic == topic and (key in message.keys
                                                                   or message.unique_key == key):
                found.append(message)
        return found
