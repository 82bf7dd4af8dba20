"""Committed consumer offsets (seed 003, broker chapter 4.2).

The offsets themselves live in the store's consumerOffset.json ("topic@group" -> {queue id: next offset}), where
RocketMQ consumers of the same store find them. What a protocol commits besides the offset (Kafka: a metadata
string, the leader epoch, the commit time) is the commit's `extra`, values the core keeps without reading them,
in config/kafkaOffsetMetadata.json (named when Kafka was the only front end; the name stays so that existing data
directories load), only for commits that carry any.

A commit is acknowledged once both files are on disk: the ConfigWriter thread writes them and calls back, and
commits that arrive during a write share the next one (the seed persists every 5 s; a Kafka client treats an
acknowledged commit as durable, so this broker does not answer before it is).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from fastmq.broker.persist import ConfigWriter
from fastmq.store import MessageStore
from fastmq.store.config import TOPIC_GROUP_SEPARATOR, ConfigManager, _require_dict


@dataclasses.dataclass(frozen=True)
class CommittedOffset:
    """A committed offset and what its protocol commits besides (JSON values: str, int, None), () for nothing."""

    offset: int
    extra: tuple[Any, ...] = ()


class OffsetExtrasFile(ConfigManager):
    """config/kafkaOffsetMetadata.json: {"metadata": {"topic@group": {queue id: [extra values]}}}."""

    file_name = "kafkaOffsetMetadata.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.table: dict[str, dict[int, tuple[Any, ...]]] = {}

    def encode(self) -> dict[Any, Any]:
        return {"metadata": {key: {str(queue): list(value) for queue, value in queues.items()}
                             for key, queues in self.table.items() if queues}}

    def decode(self, obj: Any) -> None:
        table = _require_dict(_require_dict(obj, self.file_name).get("metadata", {}), "metadata")
        self.table = {key: {int(queue): tuple(value) for queue, value in _require_dict(queues, key).items()}
                      for key, queues in table.items()}


def table_key(group: str, topic: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class OffsetStore:
    def __init__(self, store: MessageStore, writer: ConfigWriter, clock: Callable[[], float] = time.time) -> None:
        self._offsets = store.consumer_offset_manager
        self._metadata = OffsetExtrasFile(store.root / "config")
        self._metadata.load()
        self._writer = writer
        self._clock = clock
        self._lock = threading.Lock()

    def commit(self, group: str, offsets: Iterable[tuple[str, int, CommittedOffset]],
               on_durable: Callable[[bool], None]) -> None:
        """Record (topic, partition, committed) entries; on_durable(ok) once they are on disk."""
        changed_metadata = False
        with self._lock:
            for topic, partition, committed in offsets:
                self._offsets.commit_offset(group, topic, partition, committed.offset)
                key = table_key(group, topic)
                queues = self._metadata.table.get(key)
                if committed.extra:
                    self._metadata.table.setdefault(key, {})[partition] = committed.extra
                    changed_metadata = True
                elif queues is not None and queues.pop(partition, None) is not None:
                    changed_metadata = True
        if not changed_metadata:
            self._writer.write(self._offsets, on_durable)
            return
        results: list[bool] = []

        def one_done(ok: bool) -> None:
            with self._lock:
                results.append(ok)
                both = len(results) == 2
            if both:
                on_durable(all(results))

        self._writer.write(self._offsets, one_done)
        self._writer.write(self._metadata, one_done)

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        offset = self._offsets.query_offset(group, topic, partition)
        if offset < 0:
            return None
        return CommittedOffset(offset, self._metadata.table.get(table_key(group, topic), {}).get(partition, ()))

    def partitions(self, group: str) -> dict[str, list[int]]:
        """topic -> partitions with a committed offset, for one group."""
        found: dict[str, list[int]] = {}
        for key, queues in list(self._offsets.offset_table.items()):
            # Topic names never contain the separator; group names may.
            topic, _, key_group = key.partition(TOPIC_GROUP_SEPARATOR)
            if key_group == group and queues:
                found[topic] = sorted(queues)
        return found

    def groups(self) -> set[str]:
        return {key.split(TOPIC_GROUP_SEPARATOR, 1)[1] for key, queues in list(self._offsets.offset_table.items())
                if TOPIC_GROUP_SEPARATOR in key and queues}

    def delete(self, group: str, entries: Iterable[tuple[str, int]] | None = None,
               on_durable: Callable[[bool], None] | None = None) -> None:
        """Forget a group's offsets: the given (topic, partition) entries, or all of them."""
        with self._lock:
            table = self._offsets.offset_table
            if entries is None:
                entries = [(topic, partition) for topic, partitions in self.partitions(group).items()
                           for partition in partitions]
            for topic, partition in entries:
                key = table_key(group, topic)
                with self._offsets.lock:
                    queues = table.get(key)
                    if queues is not None:
                        queues.pop(partition, None)
                        if not queues:
                            del table[key]
                metadata = self._metadata.table.get(key)
                if metadata is not None:
                    metadata.pop(partition, None)
        self._writer.write(self._metadata)
        self._writer.write(self._offsets, on_durable)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic takes its committed offsets with it."""
        prefix = f"{topic}{TOPIC_GROUP_SEPARATOR}"
        with self._lock, self._offsets.lock:
            for key in [key for key in self._offsets.offset_table if key.startswith(prefix)]:
                del self._offsets.offset_table[key]
                self._metadata.table.pop(key, None)
        self._writer.write(self._metadata)
        self._writer.write(self._offsets)
