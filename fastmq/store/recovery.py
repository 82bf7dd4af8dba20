"""Recovery at start-up: find the last intact CommitLog record, cut what follows, and make the ConsumeQueues and
index files agree with the CommitLog again.

- A clean shutdown removes the `abort` file. Then the CommitLog is checked from its third-last file.
- Otherwise (a crash) checking starts at the newest file whose first message is older than the checkpoint's
  minimum timestamp (minus a margin), and every message from there is dispatched again; dispatching is
  idempotent, so units and index entries that survived are not duplicated. Index files newer than the
  checkpoint are destroyed and rebuilt the same way.
A record counts only if its magic, lengths, PHYSICALOFFSET and body CRC all hold, so a torn tail or stale bytes
are cut, never turned into messages. The cut zeroes the rest of the file for the same reason.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastmq._native import store_codec
from fastmq._native.store_codec import DispatchRequest
from fastmq.store.mapped_file import MappedFile

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.store.store import MessageStore

log = logging.getLogger(__name__)


def find_recovery_start(store: MessageStore, last_exit_ok: bool) -> MappedFile | None:
    files = store.commit_log.mapped_file_queue.files
    if not files:
        return None
    if last_exit_ok:
        return files[max(0, len(files) - 3)]
    min_timestamp = store.checkpoint.min_timestamp(store.index_service is not None)
    for mapped in reversed(files):
        store_timestamp = store_codec.pick_store_timestamp(mapped.view, 0)
        if 0 < store_timestamp <= min_timestamp:
            log.info("recovering from CommitLog file %s (first message stored at %d, checkpoint %d)",
                     mapped.path.name, store_timestamp, min_timestamp)
            return mapped
    return files[0]


def record_boundary(store: MessageStore, offset: int, end: int) -> int:
    """`offset` if a record (or the end of the data) starts there, else the start of its file: replay positions
    come from files that may be damaged themselves."""
    mapped = store.commit_log.find_file(offset)
    if offset == end or mapped is None:
        return offset
    request = store_codec.check_message(mapped.view, offset - mapped.file_from_offset, mapped.wrote_position,
                                        offset, False)
    if request.status in (store_codec.STATUS_OK, store_codec.STATUS_BLANK):
        return offset
    log.warning("replay position %d is not a record boundary; replaying its whole file", offset)
    return mapped.file_from_offset


def recover(store: MessageStore, last_exit_ok: bool) -> None:
    commit_log = store.commit_log
    rebuild_from: list[int] = []
    for consume_queue in store.consume_queues():
        if consume_queue.recover():
            rebuild_from.append(max(0, consume_queue.max_physic_offset))
    if store.index_service is not None:
        destroyed = store.index_service.load(last_exit_ok, store.checkpoint.index_msg_timestamp)
        if destroyed is not None:
            rebuild_from.append(destroyed)

    start = find_recovery_start(store, last_exit_ok)
    if start is None:
        # No CommitLog at all: units or index entries pointing into it are stale.
        for consume_queue in store.consume_queues():
            consume_queue.truncate_dirty_logic_files(0)
        if store.index_service is not None:
            store.index_service.destroy_files_beyond(0)
        return

    newest: list[DispatchRequest | None] = [None]

    def remember(request: DispatchRequest) -> None:
        newest[0] = request

    result = commit_log.scan(start.file_from_offset, store.config.check_crc_on_recover, remember)
    end = result.offset
    if result.status == store_codec.STATUS_CORRUPT:
        log.warning("CommitLog: %s at offset %d; the data after it is discarded", result.error, end)
    elif result.status == store_codec.STATUS_INCOMPLETE:
        log.warning("CommitLog: torn record at offset %d; cut there", end)
    commit_log.mapped_file_queue.truncate_dirty_files(end)
    newest_request = newest[0]
    if newest_request is not None:
        # Flushing later records the newest message's STORETIMESTAMP in the checkpoint.
        mapped = commit_log.find_file(newest_request.commitlog_offset)
        assert mapped is not None, "the scan read the newest message from this file, and the cut at `end` kept it"
        mapped.store_timestamp = newest_request.store_timestamp
    for consume_queue in store.consume_queues():
        consume_queue.truncate_dirty_logic_files(end)
    if store.index_service is not None:
        destroyed = store.index_service.destroy_files_beyond(end)
        if destroyed is not None:
            rebuild_from.append(destroyed)

    if not store.read_only:
        # Dispatch what the ConsumeQueues have not seen: after a crash everything since the recovery start,
        # otherwise only what follows the newest unit (normally nothing).
        dispatched = [cq.max_physic_offset for cq in store.consume_queues() if cq.max_physic_offset >= 0]
        rebuild_from.append(max(dispatched) if dispatched else commit_log.get_min_offset())
        if not last_exit_ok:
            rebuild_from.append(start.file_from_offset)
        replay_from = record_boundary(store, max(commit_log.get_min_offset(), min(min(rebuild_from), end)), end)
        if replay_from < end:
            log.info("dispatching CommitLog [%d, %d) again", replay_from, end)
            replay = commit_log.scan(replay_from, False, store.dispatch)
            if replay.offset != end:
                log.error("replay stopped at %d before the recovered end %d (%s)", replay.offset, end, replay.error)

    min_offset = commit_log.get_min_offset()
    for consume_queue in store.consume_queues():
        consume_queue.correct_min_offset(min_offset)
    commit_log.topic_queue_table = {(cq.topic, cq.queue_id): cq.get_max_offset_in_queue()
                                    for cq in store.consume_queues()}
