"""Who may produce and consume: the config file's producers and consumers, plus those registered through the
admin API, which live in Redis (two hashes, name -> JSON settings) so that every proxy process sees them. A
process re-reads the hashes at most once per REFRESH_S; the config file's entries win over Redis' ones."""
from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastmq.proxy.config import (ConfigError, ConsumerConfig, ProducerConfig, ProxyConfig, consumer_from_dict,
                                 producer_from_dict, to_json)

REFRESH_S = 1.0

_log = logging.getLogger(__name__)


class Registry:
    def __init__(self, config: ProxyConfig, redis: Any) -> None:
        self.config = config
        self.redis = redis
        self._producers_key = f"{config.namespace}:registry:producers"
        self._consumers_key = f"{config.namespace}:registry:consumers"
        self._producers: dict[str, ProducerConfig] = {}
        self._consumers: dict[str, ConsumerConfig] = {}
        self._read_at = float("-inf")
        self.round_trips = 0

    async def _refresh(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._read_at < REFRESH_S:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            producers, consumers = await pipe.hgetall(self._producers_key).hgetall(self._consumers_key).execute()
        self.round_trips += 1
        self._producers = _entries(producers, producer_from_dict)
        self._consumers = _entries(consumers, consumer_from_dict)
        self._read_at = time.monotonic()

    async def producer(self, name: str) -> ProducerConfig | None:
        if name in self.config.producers:
            return self.config.producers[name]
        await self._refresh()
        return self._producers.get(name)

    async def consumer(self, name: str) -> ConsumerConfig | None:
        if name in self.config.consumers:
            return self.config.consumers[name]
        await self._refresh()
        return self._consumers.get(name)

    async def producers(self) -> dict[str, ProducerConfig]:
        await self._refresh()
        return {**self._producers, **self.config.producers}

    async def consumers(self) -> dict[str, ConsumerConfig]:
        await self._refresh()
        return {**self._consumers, **self.config.consumers}

    async def register(self, entry: ProducerConfig | ConsumerConfig) -> None:
        fixed = self.config.producers if isinstance(entry, ProducerConfig) else self.config.consumers
        if entry.name in fixed:
            raise ConfigError(f"{entry.name!r} is registered by the config file; change it there")
        key = self._producers_key if isinstance(entry, ProducerConfig) else self._consumers_key
        await self.redis.hset(key, entry.name, to_json(entry))
        await self._refresh(force=True)

    async def unregister(self, kind: str, name: str) -> bool:
        key = self._producers_key if kind == "producer" else self._consumers_key
        removed = await self.redis.hdel(key, name)
        await self._refresh(force=True)
        return bool(removed)


def _entries(raw: dict[Any, Any], build: Any) -> dict[str, Any]:
    entries = {}
    for name, value in raw.items():
        name = name.decode() if isinstance(name, bytes) else name
        try:
            entries[name] = build(name, json.loads(value))
        except (ConfigError, ValueError) as exc:
            # Written by another version: it is left out until the admin API registers it again.
            _log.warning("registry entry %r in Redis is not usable: %s", name, exc)
    return entries
