"""The broker's JSON config files under {store}/config/ (seed 003, broker chapter), in RocketMQ's format.

- topics.json:            {"dataVersion": {...}, "topicConfigTable": {name: {topicName, readQueueNums, ...}}}
- consumerOffset.json:    {"offsetTable": {"topic@group": {queueId: offset}}}
- subscriptionGroup.json: {"dataVersion": {...}, "subscriptionGroupTable": {group: {groupName, ...}}}

A file is replaced atomically: the new content goes to {name}.tmp and is fsynced, the current file is copied to
{name}.bak, then the temporary file is renamed over it. Loading falls back to the .bak when the file is missing or
unreadable. RocketMQ's fastjson writes integer map keys unquoted ({0:12}); such files are read too, as are the
variants the seed shows (a doubled "topicConfigTable", "offsets" keyed group@topic).

A table changed one entry at a time (topics.json, the broker's kafkaTopics.json) journals its changes instead
(JournaledConfigManager): a change appends one fsynced JSON line {"key": k, "value": v or null} to {name}.log, so
creating the 1000th topic costs what the first did, not a rewrite of 999 others. The file is rewritten and the
journal emptied once the journal holds as many lines as the table has entries (O(1) amortised), at load when a
journal was left, and when the store closes, so that a closed store's topics.json is whole for RocketMQ's tools.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from fastmq.store.errors import CorruptStoreError, ReadOnlyStoreError
from fastmq.store.mapped_file import fsync_directory

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"
PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4


def quote_bare_keys(text: str) -> str:
    """Quote the integer object keys fastjson leaves bare ({0:12} -> {"0":12}); strings are left alone."""
    out = []
    containers = []          # the open brackets, innermost last
    expecting_key = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            expecting_key = False
            continue
        if c in "{[":
            containers.append(c)
            expecting_key = c == "{"
        elif c in "}]":
            if containers:
                containers.pop()
            expecting_key = False
        elif c == ",":
            expecting_key = bool(containers) and containers[-1] == "{"
        elif expecting_key and (c.isdigit() or c == "-"):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            out.append(f'"{text[i:j]}"')
            i = j
            expecting_key = False
            continue
        elif not c.isspace():
            expecting_key = False
        out.append(c)
        i += 1
    return "".join(out)


def loads_lenient(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(quote_bare_keys(text))


def write_durably(path: Path, data: bytes, flags: int) -> None:
    """Write all of data to path opened with flags (O_TRUNC or O_APPEND) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write_durably(tmp, text.encode("utf-8"), os.O_TRUNC)
    if path.exists():
        shutil.copyfile(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    fsync_directory(path.parent)


@dataclasses.dataclass
class DataVersion:
    timestamp: int = 0
    counter: int = 0

    def next_version(self) -> None:
        self.timestamp = time.time_ns() // 1_000_000
        self.counter += 1

    def to_json(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        if not isinstance(obj, dict):
            return cls()
        return cls(int(obj.get("timestamp", 0)), int(obj.get("counter", 0)))


class ConfigManager:
    """Load/persist one JSON file; subclasses say how their table maps to JSON."""

    file_name = ""

    def __init__(self, config_dir: Path, read_only: bool = False) -> None:
        self.path = config_dir / self.file_name
        self.read_only = read_only
        self.lock = threading.RLock()

    def load(self) -> None:
        """Read the file (or its .bak); a store without the file starts empty."""
        errors = []
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            if not candidate.exists():
                continue
            try:
                obj = loads_lenient(candidate.read_text("utf-8"))
                with self.lock:
                    self.decode(obj)
                if candidate != self.path:
                    log.warning("%s was unreadable; loaded its backup %s", self.path, candidate)
                return
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
                errors.append(f"{candidate.name}: {exc}")
        if errors:
            raise CorruptStoreError(f"cannot read {self.path} or its backup ({'; '.join(errors)}); "
                                    "fix or remove the file")

    def persist(self) -> None:
        self._check_writable()
        with self.lock:
            text = json.dumps(self.encode(), indent=4, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, text)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"{self.path} belongs to a store opened read-only")

    def encode(self) -> dict[str, Any]:
        raise NotImplementedError

    def decode(self, obj: Any) -> None:
        raise NotImplementedError


class JournaledConfigManager(ConfigManager):
    """A keyed table whose changes go to the journal {file_name}.log (see the module's doc). Replaying a line the
    file already holds changes nothing (a line sets or removes one key), so a crash between rewriting the file
    and emptying the journal loses nothing; a torn last line is a change that never returned, and is dropped."""

    # The journal is compacted once it holds this many lines, or as many as the file had entries when written.
    min_compaction_lines = 64

    def __init__(self, config_dir: Path, read_only: bool = False) -> None:
        super().__init__(config_dir, read_only)
        self.journal_path = config_dir / (self.file_name + ".log")
        self.journal_lines = 0
        self.file_entries = 0

    def table(self) -> dict[str, Any]:
        """The journaled table: name -> entry."""
        raise NotImplementedError

    def decode_entry(self, key: str, value: Any) -> Any:
        """One entry of the table from its JSON object."""
        raise NotImplementedError

    def table_size(self) -> int:
        return len(self.table())

    def apply_change(self, key: str, value: Any) -> None:
        """Set key to value (a JSON object) in the table, or remove it when value is None."""
        if value is None:
            self.table().pop(key, None)
        else:
            self.table()[key] = self.decode_entry(key, value)

    def record_change(self, key: str, value: Any) -> None:
        """Make one change (already applied to the table) durable."""
        self._check_writable()
        line = json.dumps({"key": key, "value": value}, separators=(",", ":")) + "\n"
        with self.lock:
            created = not self.journal_path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            write_durably(self.journal_path, line.encode("utf-8"), os.O_APPEND)
            if created:
                fsync_directory(self.journal_path.parent)
            self.journal_lines += 1
            if self.journal_lines >= max(self.min_compaction_lines, self.file_entries):
                self.persist()

    def load(self) -> None:
        super().load()
        self.file_entries = self.table_size()
        data = self.journal_path.read_bytes() if self.journal_path.exists() else b""
        if not data:
            return
        lines = data.split(b"\n")
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                change = _require_dict(json.loads(raw), "a journal line")
                key = change["key"]
                if not isinstance(key, str):
                    raise TypeError(f"a journal key is a string, not {type(key).__name__}")
                with self.lock:
                    self.apply_change(key, change["value"])
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
                if number == len(lines):        # no newline after it: torn by a crash while appending
                    log.warning("%s: dropped a torn last line (a change that was never acknowledged)",
                                self.journal_path)
                    break
                raise CorruptStoreError(f"{self.journal_path} line {number}: {exc}; fix or remove the line") from exc
            self.journal_lines += 1
        if not self.read_only:
            self.persist()          # the file whole again, and no torn line for the next append to follow

    def persist(self) -> None:
        """Rewrite the file from the table and empty the journal (under the lock: no change slips between)."""
        with self.lock:
            super().persist()
            if self.journal_lines or self.journal_path.exists():
                write_durably(self.journal_path, b"", os.O_TRUNC)
            self.journal_lines = 0
            self.file_entries = self.table_size()

    def close(self) -> None:
        """Leave the file whole (RocketMQ's own tools read it, not the journal)."""
        if self.journal_lines and not self.read_only:
            self.persist()


def _require_dict(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj


@dataclasses.dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm, "topicFilterType": self.topic_filter_type,
                "topicSysFlag": self.topic_sys_flag, "order": self.order}

    @classmethod
    def from_json(cls, name: str, obj: Any) -> TopicConfig:
        obj = _require_dict(obj, f"topic {name!r}")
        filter_type = obj.get("topicFilterType", "SINGLE_TAG")
        if isinstance(filter_type, int):      # the seed's SmartGo writes the enum's ordinal
            filter_type = "MULTI_TAG" if filter_type == 1 else "SINGLE_TAG"
        return cls(str(obj.get("topicName", name)), int(obj.get("readQueueNums", 16)),
                   int(obj.get("writeQueueNums", 16)), int(obj.get("perm", PERM_READ | PERM_WRITE)),
                   str(filter_type), int(obj.get("topicSysFlag", 0)), bool(obj.get("order", False)))


class TopicConfigManager(JournaledConfigManager):
    file_name = "topics.json"

    def __init__(self, config_dir: Path, read_only: bool = False) -> None:
        super().__init__(config_dir, read_only)
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def update_topic_config(self, topic_config: TopicConfig) -> None:
        with self.lock:
            self.apply_change(topic_config.topic_name, topic_config.to_json())
            self.record_change(topic_config.topic_name, topic_config.to_json())

    def delete_topic_config(self, topic: str) -> None:
        with self.lock:
            if topic not in self.topic_config_table:
                return
            self.apply_change(topic, None)
            self.record_change(topic, None)

    def table(self) -> dict[str, TopicConfig]:
        return self.topic_config_table

    def decode_entry(self, key: str, value: Any) -> TopicConfig:
        return TopicConfig.from_json(key, value)

    def apply_change(self, key: str, value: Any) -> None:
        super().apply_change(key, value)
        self.data_version.next_version()

    def encode(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {name: cfg.to_json() for name, cfg in self.topic_config_table.items()}}

    def decode(self, obj: Any) -> None:
        obj = _require_dict(obj, "topics.json")
        table = _require_dict(obj.get("topicConfigTable", {}), "topicConfigTable")
        if set(table) == {"topicConfigTable"}:   # the seed's SmartGo nests the table once more
            table = _require_dict(table["topicConfigTable"], "topicConfigTable")
        self.topic_config_table = {name: TopicConfig.from_json(name, value) for name, value in table.items()}
        self.data_version = DataVersion.from_json(obj.get("dataVersion"))


class ConsumerOffsetManager(ConfigManager):
    file_name = "consumerOffset.json"

    def __init__(self, config_dir: Path, read_only: bool = False) -> None:
        super().__init__(config_dir, read_only)
        # "topic@group" -> {queue id: next offset to consume}
        self.offset_table: dict[str, dict[int, int]] = {}

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self.lock:
            self.offset_table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when the group never committed one for this queue."""
        return self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def encode(self) -> dict[str, Any]:
        return {"offsetTable": {key: {str(queue): offset for queue, offset in queues.items()}
                                for key, queues in self.offset_table.items()}}

    def decode(self, obj: Any) -> None:
        obj = _require_dict(obj, "consumerOffset.json")
        table: dict[str, dict[int, int]] = {}
        for key, queues in _require_dict(obj.get("offsetTable", {}), "offsetTable").items():
            table[key] = {int(queue): int(offset) for queue, offset in _require_dict(queues, key).items()}
        # The seed's SmartGo writes "offsets" keyed group@topic.
        for key, queues in _require_dict(obj.get("offsets", {}), "offsets").items():
            group, _, topic = key.partition(TOPIC_GROUP_SEPARATOR)
            table[f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"] = {
                int(queue): int(offset) for queue, offset in _require_dict(queues, key).items()}
        self.offset_table = table


@dataclasses.dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _JSON_NAMES = {"group_name": "groupName", "consume_enable": "consumeEnable",
                   "consume_from_min_enable": "consumeFromMinEnable",
                   "consume_broadcast_enable": "consumeBroadcastEnable", "retry_queue_nums": "retryQueueNums",
                   "retry_max_times": "retryMaxTimes", "broker_id": "brokerId",
                   "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
                   "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable"}

    def to_json(self) -> dict[str, Any]:
        return {json_name: getattr(self, name) for name, json_name in self._JSON_NAMES.items()}

    @classmethod
    def from_json(cls, name: str, obj: Any) -> SubscriptionGroupConfig:
        obj = _require_dict(obj, f"subscription group {name!r}")
        config = cls(str(obj.get("groupName", name)))
        for field in dataclasses.fields(cls):
            json_name = cls._JSON_NAMES[field.name]
            if field.name != "group_name" and json_name in obj:
                kind = type(getattr(config, field.name))
                setattr(config, field.name, kind(obj[json_name]))
        return config


class SubscriptionGroupManager(ConfigManager):
    file_name = "subscriptionGroup.json"

    def __init__(self, config_dir: Path, read_only: bool = False) -> None:
        super().__init__(config_dir, read_only)
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        return self.subscription_group_table.get(group)

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        with self.lock:
            self.subscription_group_table[config.group_name] = config
            self.data_version.next_version()
        self.persist()

    def delete_subscription_group_config(self, group: str) -> None:
        with self.lock:
            if self.subscription_group_table.pop(group, None) is None:
                return
            self.data_version.next_version()
        self.persist()

    def encode(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(),
                "subscriptionGroupTable": {name: cfg.to_json()
                                           for name, cfg in self.subscription_group_table.items()}}

    def decode(self, obj: Any) -> None:
        obj = _require_dict(obj, "subscriptionGroup.json")
        table = _require_dict(obj.get("subscriptionGroupTable", {}), "subscriptionGroupTable")
        self.subscription_group_table = {name: SubscriptionGroupConfig.from_json(name, value)
                                         for name, value in table.items()}
        self.data_version = DataVersion.from_json(obj.get("dataVersion"))


class DeletedTopicManager(ConfigManager):
    """deletedTopics.json (fastmq's own): {"deletedTopics": {topic: CommitLog offset at deletion}}. A replay after
    a crash skips a deleted topic's messages below that offset, so that deleting a topic (and creating it again)
    never brings its old messages back."""

    file_name = "deletedTopics.json"

    def __init__(self, config_dir: Path, read_only: bool = False) -> None:
        super().__init__(config_dir, read_only)
        self.deleted: dict[str, int] = {}

    def encode(self) -> dict[str, Any]:
        return {"deletedTopics": dict(self.deleted)}

    def decode(self, obj: Any) -> None:
        table = _require_dict(_require_dict(obj, "deletedTopics.json").get("deletedTopics", {}), "deletedTopics")
        self.deleted = {str(topic): int(offset) for topic, offset in table.items()}
