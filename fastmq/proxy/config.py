"""The proxy's settings and its registry of producers and consumers (seed 001's MQCloud part).

A config file (TOML) holds the settings and registers producers and consumers:

    redis_url = "redis://127.0.0.1:6379/0"
    namespace = "fastmq:proxy"
    backend = "kafka"                     # or "rocketmq"
    bootstrap_servers = "127.0.0.1:9092"  # the Kafka backend's cluster
    namesrv_addr = "127.0.0.1:9876"       # the RocketMQ backend's namesrv(s)
    admin_token = "..."                   # the admin API and page need it (none: they are open)

    [producers.orders-writer]
    topic = "orders"
    token = "secret"                      # optional: requests must send `Authorization: Bearer secret`
    rate = 1000                           # optional: requests per second per proxy process

    [consumers.orders-reader]
    topic = "orders"
    mode = "cluster"                      # or "broadcast": progress per clientId
    lease_ms = 30000                      # how long a queue stays locked without an ack
    start = "earliest"                    # where a new consumer starts: earliest or latest
    max_attempts = 5                      # then the messages go to dead_letter_topic (default <name>.dlq)
    rate = 0                              # /message requests per second over all proxies (0: unlimited)
    backlog_alert = 10000                 # the page and /admin flag queues with more backlog

The admin API registers more at run time; those entries live in Redis (shared by every proxy) and each process
re-reads them at most once a second.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from fastmq.proxy.state import START_EARLIEST, START_LATEST, check_name

CLUSTER, BROADCAST = "cluster", "broadcast"
KAFKA, ROCKETMQ = "kafka", "rocketmq"


class ConfigError(ValueError):
    """A setting or registration that cannot be used (the admin API answers 400 with its text)."""


@dataclass(frozen=True)
class ProducerConfig:
    name: str
    topic: str
    token: str | None = None
    rate: float = 0

    def public(self) -> dict[str, Any]:
        return {"name": self.name, "topic": self.topic, "rate": self.rate, "token": self.token is not None}


@dataclass(frozen=True)
class ConsumerConfig:
    name: str
    topic: str
    mode: str = CLUSTER
    token: str | None = None
    lease_ms: int = 30000
    start: str = START_EARLIEST
    max_attempts: int = 16
    dead_letter_topic: str | None = None
    rate: float = 0
    burst: float = 0
    client_ttl_ms: int = 7 * 24 * 3600 * 1000
    backlog_alert: int = 10000

    @property
    def dead_letters(self) -> str:
        return self.dead_letter_topic or f"{self.name}.dlq"

    def public(self) -> dict[str, Any]:
        described = asdict(self)
        described["token"] = self.token is not None
        described["dead_letter_topic"] = self.dead_letters
        return described


@dataclass
class ProxyConfig:
    redis_url: str = "redis://127.0.0.1:6379/0"
    namespace: str = "fastmq:proxy"
    backend: str = KAFKA
    bootstrap_servers: str | None = None
    namesrv_addr: str | None = None
    admin_token: str | None = None
    max_body_bytes: int = 1 << 20
    max_messages_per_produce: int = 1000
    max_messages_per_pull: int = 100
    max_pull_bytes: int = 1 << 20
    max_wait_ms: int = 30000
    bounds_max_age_s: float = 1.0          # how old the queues' end offsets that /message starts from may be
    # The backend's producer: how long it waits to put concurrent requests' messages in one batch (a broker that
    # syncs each acks=all batch to disk answers many more messages per second in fewer, larger batches).
    producer_linger_ms: float = 2.0
    producers: dict[str, ProducerConfig] = field(default_factory=dict)
    consumers: dict[str, ConsumerConfig] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> ProxyConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read the config file {path}: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProxyConfig:
        data = dict(data)
        producers = data.pop("producers", {}) or {}
        consumers = data.pop("consumers", {}) or {}
        known = {f.name for f in fields(cls)} - {"producers", "consumers"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown settings {sorted(unknown)}; known: {sorted(known)}")
        config = cls(**data)
        if config.backend not in (KAFKA, ROCKETMQ):
            raise ConfigError(f"backend must be {KAFKA} or {ROCKETMQ}, not {config.backend!r}")
        for name, entry in producers.items():
            config.producers[name] = producer_from_dict(name, entry)
        for name, entry in consumers.items():
            config.consumers[name] = consumer_from_dict(name, entry)
        return config


_Config = TypeVar("_Config", ProducerConfig, ConsumerConfig)


def _build(kind: type[_Config], name: str, entry: Any) -> _Config:
    if not isinstance(entry, dict):
        raise ConfigError(f"{kind.__name__} {name!r} must be a table of settings, not {entry!r}")
    allowed = {f.name for f in fields(kind)} - {"name"}
    unknown = set(entry) - allowed
    if unknown:
        raise ConfigError(f"{name!r}: unknown settings {sorted(unknown)}; known: {sorted(allowed)}")
    try:
        check_name("name", name)
        check_name("topic", entry.get("topic"))
        built = kind(name=name, **entry)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name!r}: {exc}") from None
    for f in fields(kind):
        value = getattr(built, f.name)
        if f.type in ("int", "float") and (isinstance(value, bool) or not isinstance(value, (int, float))
                                           or value < 0):
            raise ConfigError(f"{name!r}: {f.name} must be a number >= 0, not {value!r}")
        if f.type == "str | None" and value is not None and not isinstance(value, str):
            raise ConfigError(f"{name!r}: {f.name} must be a string, not {value!r}")
    return built


def producer_from_dict(name: str, entry: Any) -> ProducerConfig:
    return _build(ProducerConfig, name, entry)


def consumer_from_dict(name: str, entry: Any) -> ConsumerConfig:
    consumer = _build(ConsumerConfig, name, entry)
    if consumer.mode not in (CLUSTER, BROADCAST):
        raise ConfigError(f"{name!r}: mode must be {CLUSTER} or {BROADCAST}, not {consumer.mode!r}")
    if consumer.start not in (START_EARLIEST, START_LATEST):
        raise ConfigError(f"{name!r}: start must be {START_EARLIEST} or {START_LATEST}, not {consumer.start!r}")
    if consumer.lease_ms < 1 or consumer.max_attempts < 1:
        raise ConfigError(f"{name!r}: lease_ms and max_attempts must be at least 1")
    if consumer.dead_letter_topic is not None:
        check_name("dead_letter_topic", consumer.dead_letter_topic)
    return consumer


def to_json(entry: ProducerConfig | ConsumerConfig) -> str:
    values = asdict(entry)
    values.pop("name")
    return json.dumps(values)
