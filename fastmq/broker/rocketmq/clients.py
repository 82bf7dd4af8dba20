"""The clients a RocketMQ broker knows from their heartbeats (seed 003, broker chapter 4.9: connection
management; RocketMQ's ProducerManager and ConsumerManager).

A client sends HEART_BEAT (34) every 30 s on each broker connection with its client id and the producer and
consumer groups it runs, each consumer group with its consume type, message model, where a new group starts and
its subscriptions. The broker keeps, per consumer group, the channels (connections) of its members and the union
of their subscriptions; GET_CONSUMER_LIST_BY_GROUP (38) answers with the members' client ids, from which clients
rebalance. A channel leaves its groups when it unregisters (35), when its connection closes, or after
CHANNEL_EXPIRED_S without a heartbeat. Every change of a group's members is announced to the listeners (the
front end tells the remaining members: NOTIFY_CONSUMER_IDS_CHANGED).

The C++ client sends enum numbers where Java sends names (consumeType, messageModel, consumeFromWhere): both are
accepted and kept as names; it also quotes subVersion.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

CHANNEL_EXPIRED_S = 120.0
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM = {0: "CONSUME_FROM_LAST_OFFSET", 1: "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                2: "CONSUME_FROM_MIN_OFFSET", 3: "CONSUME_FROM_MAX_OFFSET", 4: "CONSUME_FROM_FIRST_OFFSET",
                5: "CONSUME_FROM_TIMESTAMP"}


class HeartbeatError(ValueError):
    """A heartbeat body that is not HeartbeatData."""


def _enum_name(value: Any, names: tuple[str, ...] | dict[int, str], what: str) -> str:
    if isinstance(value, bool):
        raise HeartbeatError(f"{what} is a name or a number, not {value!r}")
    if isinstance(value, int):
        table = names if isinstance(names, dict) else dict(enumerate(names))
        if value not in table:
            raise HeartbeatError(f"{what} {value} is not one of {sorted(table)}")
        return table[value]
    if isinstance(value, str) and value in (names.values() if isinstance(names, dict) else names):
        return value
    raise HeartbeatError(f"{what} {value!r} is not one of {list(names.values() if isinstance(names, dict) else names)}")


def _text(obj: dict[Any, Any], key: str, what: str, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise HeartbeatError(f"{what}.{key} must be a string, not {value!r}")
    return value


def _list(obj: dict[Any, Any], key: str, what: str) -> list[Any]:
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise HeartbeatError(f"{what}.{key} must be a list, not {type(value).__name__}")
    return value


@dataclasses.dataclass(frozen=True)
class Subscription:
    topic: str
    sub_string: str             # "*" or "TagA || TagB"
    expression_type: str = "TAG"
    sub_version: int = 0

    @property
    def tags(self) -> str | None:
        """The tag filter for the store: None for every message."""
        return None if self.sub_string.strip() in ("", "*") else self.sub_string


@dataclasses.dataclass
class ConsumerData:
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: dict[str, Subscription]


@dataclasses.dataclass
class HeartbeatData:
    client_id: str
    producer_groups: list[str]
    consumers: list[ConsumerData]


def parse_heartbeat(obj: Any) -> HeartbeatData:
    """HeartbeatData from its decoded JSON; HeartbeatError names what is wrong."""
    if not isinstance(obj, dict):
        raise HeartbeatError(f"a heartbeat is a JSON object, not {type(obj).__name__}")
    client_id = _text(obj, "clientID", "heartbeat")
    producers = []
    for entry in _list(obj, "producerDataSet", "heartbeat"):
        if not isinstance(entry, dict):
            raise HeartbeatError("producerDataSet holds objects")
        producers.append(_text(entry, "groupName", "producerData"))
    consumers = []
    for entry in _list(obj, "consumerDataSet", "heartbeat"):
        if not isinstance(entry, dict):
            raise HeartbeatError("consumerDataSet holds objects")
        subscriptions = {}
        for sub in _list(entry, "subscriptionDataSet", "consumerData"):
            if not isinstance(sub, dict):
                raise HeartbeatError("subscriptionDataSet holds objects")
            version = sub.get("subVersion", 0)
            if isinstance(version, str) and version.lstrip("-").isdigit():
                version = int(version)         # the C++ client quotes it
            if not isinstance(version, int) or isinstance(version, bool):
                raise HeartbeatError(f"subscriptionData.subVersion must be a number, not {version!r}")
            topic = _text(sub, "topic", "subscriptionData")
            subscriptions[topic] = Subscription(topic, _text(sub, "subString", "subscriptionData", "*"),
                                                str(sub.get("expressionType") or "TAG"), version)
        consumers.append(ConsumerData(
            _text(entry, "groupName", "consumerData"),
            _enum_name(entry.get("consumeType", "CONSUME_PASSIVELY"), CONSUME_TYPES, "consumeType"),
            _enum_name(entry.get("messageModel", "CLUSTERING"), MESSAGE_MODELS, "messageModel"),
            _enum_name(entry.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"), CONSUME_FROM, "consumeFromWhere"),
            subscriptions))
    return HeartbeatData(client_id, producers, consumers)


@dataclasses.dataclass
class Channel:
    """One client connection that sent heartbeats."""

    connection: Any
    client_id: str
    language: str
    version: int
    last_update: float


@dataclasses.dataclass
class ConsumerGroup:
    data: ConsumerData
    channels: dict[int, Channel] = dataclasses.field(default_factory=dict)    # id(connection) -> channel


class ClientTable:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.producer_groups: dict[str, dict[int, Channel]] = {}
        # listener(group, consumer ids now): a consumer group's members changed.
        self.change_listeners: list[Callable[[str, list[str]], None]] = []

    def heartbeat(self, connection: Any, language: str, version: int, data: HeartbeatData) -> None:
        now = self._clock()
        key = id(connection)
        for group in data.producer_groups:
            self.producer_groups.setdefault(group, {})[key] = Channel(connection, data.client_id, language,
                                                                      version, now)
        for consumer in data.consumers:
            entry = self.consumer_groups.get(consumer.group)
            if entry is None:
                entry = self.consumer_groups[consumer.group] = ConsumerGroup(consumer)
            else:
                entry.data = consumer
            channel = entry.channels.get(key)
            entry.channels[key] = Channel(connection, data.client_id, language, version, now)
            if channel is None or channel.client_id != data.client_id:
                self._changed(consumer.group)

    def unregister(self, connection: Any, producer_group: str | None, consumer_group: str | None) -> None:
        key = id(connection)
        if producer_group:
            self._drop_producer(producer_group, key)
        if consumer_group:
            self._drop_consumer(consumer_group, key)

    def connection_closed(self, connection: Any) -> None:
        key = id(connection)
        for group in list(self.producer_groups):
            self._drop_producer(group, key)
        for group in list(self.consumer_groups):
            self._drop_consumer(group, key)

    def scan_expired(self) -> list[Any]:
        """Forget channels silent for CHANNEL_EXPIRED_S; returns their connections (to be closed)."""
        deadline = self._clock() - CHANNEL_EXPIRED_S
        expired = {}
        for channels in self.producer_groups.values():
            expired.update({key: c.connection for key, c in channels.items() if c.last_update < deadline})
        for group in self.consumer_groups.values():
            expired.update({key: c.connection for key, c in group.channels.items() if c.last_update < deadline})
        for connection in expired.values():
            self.connection_closed(connection)
        return list(expired.values())

    def _drop_producer(self, group: str, key: int) -> None:
        channels = self.producer_groups.get(group)
        if channels is not None and channels.pop(key, None) is not None and not channels:
            del self.producer_groups[group]

    def _drop_consumer(self, group: str, key: int) -> None:
        entry = self.consumer_groups.get(group)
        if entry is None or entry.channels.pop(key, None) is None:
            return
        if not entry.channels:
            del self.consumer_groups[group]
        self._changed(group)

    def _changed(self, group: str) -> None:
        ids = self.consumer_ids(group)
        for listener in self.change_listeners:
            listener(group, ids)

    # -- queries ----------------------------------------------------------------------------------------------

    def consumer_ids(self, group: str) -> list[str]:
        entry = self.consumer_groups.get(group)
        return sorted({channel.client_id for channel in entry.channels.values()}) if entry else []

    def channels(self, group: str) -> list[Channel]:
        entry = self.consumer_groups.get(group)
        return list(entry.channels.values()) if entry else []

    def subscription(self, group: str, topic: str) -> Subscription | None:
        entry = self.consumer_groups.get(group)
        return entry.data.subscriptions.get(topic) if entry else None

    def snapshot(self) -> dict[str, Any]:
        return {
            "consumer_groups": {group: {"consume_type": entry.data.consume_type,
                                        "message_model": entry.data.message_model,
                                        "topics": sorted(entry.data.subscriptions),
                                        "clients": self.consumer_ids(group)}
                                for group, entry in sorted(self.consumer_groups.items())},
            "producer_groups": {group: sorted({c.client_id for c in channels.values()})
                                for group, channels in sorted(self.producer_groups.items())},
        }
