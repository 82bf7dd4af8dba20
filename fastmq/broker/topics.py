"""Topics of the broker (seed 003, broker chapter 4.1): a topic is a store topic, a partition a store queue.

Every topic lives in the store's topics.json (RocketMQ's TopicConfig: read/write queue numbers = partitions,
perm read+write), so that every front end and RocketMQ's tools see it. What the store has no place for is kept
beside it in config/kafkaTopics.json (named when Kafka was the only front end; the name stays so that existing
data directories load): the topic id (a UUID, new for every creation, so that clients holding the id of a deleted
topic never read its successor) and the configs set at creation or altered since.

The core knows no protocol's rules: a topic name must suit the store, and each front end adds its protocol's
TopicRules (add_rules) when it starts: the names that protocol allows and the topic configs it knows. A name
must suit every protocol served (a topic is shared by all of them); a config is known if one protocol knows it.
A front end creating a topic of its own protocol's (RocketMQ's %RETRY%group, say) names the rules that apply
to it alone (create(..., only=STORE_RULES)): the other protocols never address such a topic by name.

Deleting a topic removes its ConsumeQueues (its messages stay in the CommitLog until the store's cleanup removes
their files, as RocketMQ does) and its committed offsets. Partitions can be added, never removed.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from fastmq.broker.errors import CoreError, TopicError
from fastmq.store import MessageStore, TopicConfig
from fastmq.store.config import JournaledConfigManager, _require_dict
from fastmq.store.store import MAX_TOPIC_BYTES, TOPIC_PATTERN

log = logging.getLogger(__name__)

MAX_PARTITIONS = 10000
PERM_READ_WRITE = 6


@dataclasses.dataclass(frozen=True)
class TopicConfigDef:
    """One topic config a protocol knows: its default and whether the broker acts on it."""

    default: str
    enforced: bool
    validate: Callable[[str], bool] = lambda value: True
    read_only: bool = False
    # Set when the topic is created, never changed: records keep what they were written with.
    fixed: bool = False


@dataclasses.dataclass(frozen=True)
class TopicRules:
    """What one protocol requires of topics, supplied by its front end: legal_name(name) and the rule in words
    (for the error), the topic configs it knows, and configs set on every topic created unless given (a
    broker-wide setting that differs from a config's default)."""

    protocol: str
    legal_name: Callable[[str], bool]
    name_rule: str
    configs: Mapping[str, TopicConfigDef] = dataclasses.field(default_factory=dict)
    creation_defaults: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _store_legal_name(name: str) -> bool:
    return bool(TOPIC_PATTERN.fullmatch(name)) and name not in (".", "..") and len(name.encode()) <= MAX_TOPIC_BYTES


STORE_RULES = TopicRules("store", _store_legal_name,
                         f"1..{MAX_TOPIC_BYTES} bytes of a-z A-Z 0-9 % | _ . - (not '.' or '..')")
"""What the store itself requires: the rules of a broker without front ends, and part of every other's."""


@dataclasses.dataclass
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID
    configs: dict[str, str] = dataclasses.field(default_factory=dict)   # set explicitly (not defaults)
    # The configs the served protocols know (the manager's, shared by every topic).
    known: Mapping[str, TopicConfigDef] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def config(self, name: str) -> str:
        """A config's value: set explicitly, else its default (KeyError for a config no protocol knows)."""
        return self.configs.get(name, self.known[name].default)


class TopicExtrasFile(JournaledConfigManager):
    """config/kafkaTopics.json: {"topics": {name: {"topicId": "...", "configs": {...}}}}, changes journaled."""

    file_name = "kafkaTopics.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.entries: dict[str, dict[str, Any]] = {}

    def table(self) -> dict[str, dict[str, Any]]:
        return self.entries

    def decode_entry(self, key: str, value: Any) -> dict[str, Any]:
        return _require_dict(value, key)

    def set_entry(self, name: str, entry: dict[str, Any] | None) -> None:
        """Set (None: remove) a topic's entry, durably."""
        self.apply_change(name, entry)
        self.record_change(name, entry)

    def encode(self) -> dict[str, Any]:
        return {"topics": self.entries}

    def decode(self, obj: Any) -> None:
        topics = _require_dict(_require_dict(obj, "kafkaTopics.json").get("topics", {}), "topics")
        self.entries = {name: _require_dict(entry, name) for name, entry in topics.items()}


class TopicManager:
    """The topics, by name and by id. Changes are persisted before they return (topic changes are rare)."""

    def __init__(self, store: MessageStore, default_partitions: int) -> None:
        self.store = store
        self.default_partitions = default_partitions
        self.rules: list[TopicRules] = [STORE_RULES]
        self.known_configs: dict[str, TopicConfigDef] = {}
        self._lock = threading.RLock()
        self._file = TopicExtrasFile(store.root / "config")
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
                          {str(k): str(v) for k, v in dict(entry.get("configs") or {}).items()}, self.known_configs)
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

    def add_rules(self, rules: TopicRules) -> None:
        """A front end's rules for topics (before it serves anything); a config another protocol already
        defines keeps that definition."""
        with self._lock:
            self.rules.append(rules)
            for key, definition in rules.configs.items():
                self.known_configs.setdefault(key, definition)

    def check_name(self, name: str, only: TopicRules | None = None) -> None:
        """The name suits every protocol served, or, given `only`, the store and those rules."""
        if not isinstance(name, str):
            raise TopicError(CoreError.INVALID_TOPIC_NAME, f"a topic name is a str, not {type(name).__name__}")
        for rules in self.rules if only is None else (STORE_RULES, only):
            if not rules.legal_name(name):
                raise TopicError(CoreError.INVALID_TOPIC_NAME,
                                 f"topic name {name!r} is not legal for {rules.protocol}: {rules.name_rule}")

    def check_configs(self, configs: dict[str, str]) -> None:
        for key, value in configs.items():
            definition = self.known_configs.get(key)
            if definition is None:
                raise TopicError(CoreError.INVALID_CONFIG, f"unknown topic config {key!r}")
            if value is None or not definition.validate(str(value)):
                raise TopicError(CoreError.INVALID_CONFIG, f"topic config {key}={value!r} is not supported here")
            if not definition.enforced:
                log.info("topic config %s=%s is stored and reported but not acted on", key, value)

    def create(self, name: str, partitions: int | None = None, configs: dict[str, str] | None = None,
               validate_only: bool = False, only: TopicRules | None = None) -> Topic:
        partitions = self.default_partitions if partitions is None or partitions == -1 else partitions
        configs = dict(configs or {})
        self.check_name(name, only)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise TopicError(CoreError.INVALID_PARTITIONS,
                             f"a topic has 1..{MAX_PARTITIONS} partitions, not {partitions}")
        self.check_configs(configs)
        for rules in self.rules:
            for key, value in rules.creation_defaults.items():
                configs.setdefault(key, value)
        with self._lock:
            if name in self._topics:
                raise TopicError(CoreError.TOPIC_EXISTS, f"topic {name!r} already exists")
            topic = Topic(name, partitions, uuid.uuid4(), configs, self.known_configs)
            if validate_only:
                return topic
            self._file.set_entry(name, {"topicId": str(topic.topic_id), "configs": configs})
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
            self._file.set_entry(name, None)
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

    def alter_configs(self, name: str, set_configs: dict[str, str], delete: Sequence[str] = (),
                      replace: bool = False, validate_only: bool = False) -> None:
        """Set and delete (back to the default) topic configs; replace=True drops every other one (the legacy
        AlterConfigs API replaces the whole set)."""
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise TopicError(CoreError.UNKNOWN_PARTITION, f"topic {name!r} does not exist")
            self.check_configs(set_configs)
            for key in delete:
                if key not in self.known_configs:
                    raise TopicError(CoreError.INVALID_CONFIG, f"unknown topic config {key!r}")
            configs = {} if replace else dict(topic.configs)
            for key in delete:
                configs.pop(key, None)
            configs.update(set_configs)
            for key, definition in self.known_configs.items():
                if definition.fixed and configs.get(key, definition.default) != topic.config(key):
                    # The store keeps each record's timestamp, not its type: a change would rewrite history.
                    raise TopicError(CoreError.INVALID_CONFIG,
                                     f"{key} is set when a topic is created and cannot change on this broker "
                                     f"(topic {name!r} has {topic.config(key)})")
            if validate_only:
                return
            topic.configs = configs
            self._file.set_entry(name, {"topicId": str(topic.topic_id), "configs": configs})
