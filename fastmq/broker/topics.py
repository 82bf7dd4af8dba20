"""Topics of the broker (seed 003, broker chapter 4.1): a topic is a store topic, a partition a store queue.

Every topic lives in the store's topics.json (RocketMQ's TopicConfig: read/write queue numbers = partitions,
perm read+write), so that other front ends and RocketMQ tools see it. What Kafka adds is kept beside it in
config/kafkaTopics.json: the topic id (a UUID, new for every creation, so that clients holding the id of a
deleted topic never read its successor) and the configs set at creation or altered since.

Deleting a topic removes its ConsumeQueues (its messages stay in the CommitLog until the store's cleanup removes
their files, as RocketMQ does) and its committed offsets. Partitions can be added, never removed.
"""
from __future__ import annotations

import dataclasses
import logging
import re
import threading
import uuid
from pathlib import Path
from typing import Any, Callable

from fastmq.broker.errors import CoreError, TopicError
from fastmq.store import MessageStore, TopicConfig
from fastmq.store.config import ConfigManager, _require_dict

log = logging.getLogger(__name__)

# Kafka's legal topic names (a subset of the store's): letters, digits, '.', '_', '-'; at most 249 characters.
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# What the store takes (RocketMQ's names: '%' and '|' too, as in %RETRY%group), for front ends whose protocol
# allows them.
STORE_TOPIC_NAME = re.compile(r"[%|a-zA-Z0-9._-]{1,249}")
MAX_PARTITIONS = 10000
PERM_READ_WRITE = 6


@dataclasses.dataclass(frozen=True)
class TopicConfigDef:
    """One Kafka topic config this broker knows: its default and whether the broker acts on it."""

    default: str
    enforced: bool
    validate: Callable[[str], bool] = lambda value: True
    read_only: bool = False
    # Set when the topic is created, never changed: records keep what they were written with.
    fixed: bool = False


def _positive_int(value: str) -> bool:
    return value.isdigit() and 0 < int(value) < 2 ** 31


def _long(value: str) -> bool:
    return re.fullmatch(r"-?\d{1,19}", value) is not None


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    # Acted on.
    "max.message.bytes": TopicConfigDef("1048588", True, _positive_int),
    "cleanup.policy": TopicConfigDef("delete", True, lambda v: v == "delete"),
    "compression.type": TopicConfigDef("producer", True, lambda v: v == "producer"),
    "message.timestamp.type": TopicConfigDef("CreateTime", True, lambda v: v in ("CreateTime", "LogAppendTime"),
                                             fixed=True),
    "min.insync.replicas": TopicConfigDef("1", True, lambda v: v == "1"),
    # Stored and reported, not acted on: the store's retention is the same for every topic.
    "retention.ms": TopicConfigDef("604800000", False, _long),
    "retention.bytes": TopicConfigDef("-1", False, _long),
    "segment.bytes": TopicConfigDef("1073741824", False, _positive_int),
    "segment.ms": TopicConfigDef("604800000", False, _long),
    "delete.retention.ms": TopicConfigDef("86400000", False, _long),
    "file.delete.delay.ms": TopicConfigDef("60000", False, _long),
    "flush.messages": TopicConfigDef("9223372036854775807", False, _long),
    "flush.ms": TopicConfigDef("9223372036854775807", False, _long),
    "index.interval.bytes": TopicConfigDef("4096", False, _positive_int),
    "message.timestamp.difference.max.ms": TopicConfigDef("9223372036854775807", False, _long),
    "min.cleanable.dirty.ratio": TopicConfigDef("0.5", False),
    "min.compaction.lag.ms": TopicConfigDef("0", False, _long),
    "max.compaction.lag.ms": TopicConfigDef("9223372036854775807", False, _long),
    "preallocate": TopicConfigDef("false", False, lambda v: v in ("true", "false")),
    "unclean.leader.election.enable": TopicConfigDef("false", False, lambda v: v in ("true", "false")),
    "message.downconversion.enable": TopicConfigDef("true", False, lambda v: v in ("true", "false")),
}


@dataclasses.dataclass
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID
    configs: dict[str, str] = dataclasses.field(default_factory=dict)   # set explicitly (not defaults)

    def config(self, name: str) -> str:
        return self.configs.get(name, TOPIC_CONFIGS[name].default)

    @property
    def max_message_bytes(self) -> int:
        return int(self.config("max.message.bytes"))

    @property
    def log_append_time(self) -> bool:
        """Records take the broker's time when appended (message.timestamp.type=LogAppendTime)."""
        return self.config("message.timestamp.type") == "LogAppendTime"


class KafkaTopicFile(ConfigManager):
    """config/kafkaTopics.json: {"topics": {name: {"topicId": "...", "configs": {...}}}}."""

    file_name = "kafkaTopics.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.entries: dict[str, dict[str, Any]] = {}

    def encode(self) -> dict:
        return {"topics": self.entries}

    def decode(self, obj: Any) -> None:
        topics = _require_dict(_require_dict(obj, "kafkaTopics.json").get("topics", {}), "topics")
        self.entries = {name: _require_dict(entry, name) for name, entry in topics.items()}


class TopicManager:
    """The topics, by name and by id. Changes are persisted before they return (topic changes are rare)."""

    def __init__(self, store: MessageStore, default_partitions: int, default_max_message_bytes: int) -> None:
        self.store = store
        self.default_partitions = default_partitions
        self.default_max_message_bytes = default_max_message_bytes
        self._lock = threading.RLock()
        self._file = KafkaTopicFile(store.root / "config")
        self._file.load()
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        # Called with a topic's name after it is deleted (offsets, producer state, stats forget it).
        self.deletion_listeners: list[Callable[[str], None]] = []
        self._load()

    def _load(self) -> None:
        changed = False
        for name, topic_config in self.store.topic_config_manager.topic_config_table.items():
            entry = self._file.entries.get(name)
            if entry is None:
                entry = self._file.entries[name] = {"topicId": str(uuid.uuid4()), "configs": {}}
                changed = True
            topic = Topic(name, max(topic_config.read_queue_nums, topic_config.write_queue_nums),
                          uuid.UUID(str(entry["topicId"])),
                          {str(k): str(v) for k, v in dict(entry.get("configs") or {}).items()})
            self._topics[name] = topic
            self._by_id[topic.topic_id] = topic
        for name in set(self._file.entries) - set(self._topics):
            del self._file.entries[name]
            changed = True
        if changed:
            self._file.persist()

    # -- lookup -----------------------------------------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._topics.values())

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def has_partition(self, name: str, partition: int) -> bool:
        topic = self._topics.get(name)
        return topic is not None and 0 <= partition < topic.partitions

    # -- changes ----------------------------------------------------------------------------------------------

    @staticmethod
    def check_name(name: str, name_rule: re.Pattern[str] = TOPIC_NAME) -> None:
        if not isinstance(name, str) or not name_rule.fullmatch(name) or name in (".", ".."):
            raise TopicError(CoreError.INVALID_TOPIC_NAME, f"topic name {name!r} is not legal: 1-249 of "
                                                           f"{name_rule.pattern[:-7]}, not '.' or '..'")

    def check_configs(self, configs: dict[str, str]) -> None:
        for key, value in configs.items():
            definition = TOPIC_CONFIGS.get(key)
            if definition is None:
                raise TopicError(CoreError.INVALID_CONFIG, f"unknown topic config {key!r}")
            if value is None or not definition.validate(str(value)):
                raise TopicError(CoreError.INVALID_CONFIG, f"topic config {key}={value!r} is not supported here")
            if not definition.enforced:
                log.info("topic config %s=%s is stored and reported but not acted on", key, value)

    def create(self, name: str, partitions: int | None = None, configs: dict[str, str] | None = None,
               validate_only: bool = False, name_rule: re.Pattern[str] = TOPIC_NAME) -> Topic:
        """name_rule: the names allowed (Kafka's by default; STORE_TOPIC_NAME for RocketMQ's)."""
        partitions = self.default_partitions if partitions is None or partitions == -1 else partitions
        configs = dict(configs or {})
        self.check_name(name, name_rule)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise TopicError(CoreError.INVALID_PARTITIONS,
                             f"a topic has 1..{MAX_PARTITIONS} partitions, not {partitions}")
        self.check_configs(configs)
        if self.default_max_message_bytes != int(TOPIC_CONFIGS["max.message.bytes"].default):
            configs.setdefault("max.message.bytes", str(self.default_max_message_bytes))
        with self._lock:
            if name in self._topics:
                raise TopicError(CoreError.TOPIC_EXISTS, f"topic {name!r} already exists")
            topic = Topic(name, partitions, uuid.uuid4(), configs)
            if validate_only:
                return topic
            self._file.entries[name] = {"topicId": str(topic.topic_id), "configs": configs}
            self._file.persist()
            self.store.topic_config_manager.update_topic_config(
                TopicConfig(name, partitions, partitions, PERM_READ_WRITE))
            self._topics[name] = topic
            self._by_id[topic.topic_id] = topic
        log.info("created topic %s with %d partition(s)", name, partitions)
        return topic

    def get_or_create(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        try:
            return self.create(name)
        except TopicError as exc:
            if exc.error is CoreError.TOPIC_EXISTS:
                return self._topics[name]
            raise

    def delete(self, name: str) -> None:
        with self._lock:
            topic = self._topics.pop(name, None)
            if topic is None:
                raise TopicError(CoreError.UNKNOWN_PARTITION, f"topic {name!r} does not exist")
            self._by_id.pop(topic.topic_id, None)
            self.store.topic_config_manager.delete_topic_config(name)
            self._file.entries.pop(name, None)
            self._file.persist()
            self.store.delete_topic(name)
        for listener in self.deletion_listeners:
            listener(name)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise TopicError(CoreError.UNKNOWN_PARTITION, f"topic {name!r} does not exist")
            if total <= topic.partitions:
                raise TopicError(CoreError.INVALID_PARTITIONS, f"topic {name!r} has {topic.partitions} partitions; "
                                                               f"it can only grow, not become {total}")
            if total > MAX_PARTITIONS:
                raise TopicError(CoreError.INVALID_PARTITIONS, f"a topic has at most {MAX_PARTITIONS} partitions")
            if validate_only:
                return
            self.store.topic_config_manager.update_topic_config(TopicConfig(name, total, total, PERM_READ_WRITE))
            topic.partitions = total

    def alter_configs(self, name: str, set_configs: dict[str, str], delete: list[str] = (),
                      replace: bool = False, validate_only: bool = False) -> None:
        """Set and delete (back to the default) topic configs; replace=True drops every other one (the legacy
        AlterConfigs API replaces the whole set)."""
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise TopicError(CoreError.UNKNOWN_PARTITION, f"topic {name!r} does not exist")
            self.check_configs(set_configs)
            for key in delete:
                if key not in TOPIC_CONFIGS:
                    raise TopicError(CoreError.INVALID_CONFIG, f"unknown topic config {key!r}")
            configs = {} if replace else dict(topic.configs)
            for key in delete:
                configs.pop(key, None)
            configs.update(set_configs)
            for key, definition in TOPIC_CONFIGS.items():
                if definition.fixed and configs.get(key, definition.default) != topic.config(key):
                    # The store keeps each record's timestamp, not its type: a change would rewrite history.
                    raise TopicError(CoreError.INVALID_CONFIG,
                                     f"{key} is set when a topic is created and cannot change on this broker "
                                     f"(topic {name!r} has {topic.config(key)})")
            if validate_only:
                return
            topic.configs = configs
            self._file.entries[name] = {"topicId": str(topic.topic_id), "configs": configs}
            self._file.persist()
