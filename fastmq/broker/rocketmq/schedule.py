"""Delayed messages (seed 003, broker chapter 4.4; RocketMQ's ScheduleMessageService): the 18 delay levels.

A message sent with the DELAY property (a level, 1..18), and every message a consumer sends back for a later
retry, is stored first in SCHEDULE_TOPIC_XXXX, queue level - 1, with its destination in REAL_TOPIC / REAL_QID.
One timer per level walks that queue in order: a message whose store time plus the level's delay has passed is
written again to its destination (without DELAY, so that consumers see it as new) and the level's offset moves
on; the first message not yet due sets the timer. The levels' offsets are persisted in config/delayOffset.json
(written off the I/O thread), so that a restart neither loses nor repeats more than the last unwritten moves.

The levels come from RocketMQ's messageDelayLevel setting, "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m
30m 1h 2h" by default; units ms, s, m, h, d.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Callable

from fastmq.broker.rocketmq.system_topics import SCHEDULE_TOPIC
from fastmq.io import IOLoop, TimerHandle
from fastmq.store import MessageStore, StoredMessage
from fastmq.store.config import ConfigManager, _require_dict

log = logging.getLogger(__name__)

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"(\d+)(ms|s|m|h|d)")
BATCH = 32        # messages one timer run moves at most before yielding the loop


def parse_delay_levels(text: str) -> list[int]:
    """The delays in ms of "1s 5s ..." (level 1 first)."""
    delays = []
    for word in text.split():
        match = _LEVEL.fullmatch(word)
        if match is None:
            raise ValueError(f"a delay level is a number and a unit (ms, s, m, h, d), not {word!r}")
        delays.append(int(match.group(1)) * _UNITS_MS[match.group(2)])
    if not delays:
        raise ValueError("at least one delay level is needed")
    return delays


class DelayOffsetFile(ConfigManager):
    """config/delayOffset.json: {"offsetTable": {level: next offset}} (RocketMQ's delayOffset.json)."""

    file_name = "delayOffset.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.offsets: dict[int, int] = {}

    def encode(self) -> dict[Any, Any]:
        return {"offsetTable": {str(level): offset for level, offset in sorted(self.offsets.items())}}

    def decode(self, obj: Any) -> None:
        table = _require_dict(_require_dict(obj, self.file_name).get("offsetTable", {}), "offsetTable")
        self.offsets = {int(level): int(offset) for level, offset in table.items()}


class ScheduleService:
    """Runs on the I/O loop. deliver(message, topic, queue_id) writes a due message to its destination."""

    def __init__(self, loop: IOLoop, store: MessageStore, delays_ms: list[int], persist: Callable[[Any], None],
                 deliver: Callable[[StoredMessage, str, int], None], clock: Callable[[], float]) -> None:
        self.loop = loop
        self.store = store
        self.delays_ms = delays_ms
        self._persist = persist
        self._deliver = deliver
        self._clock = clock
        self._file = DelayOffsetFile(store.root / "config")
        self._file.load()
        self._timers: dict[int, TimerHandle] = {}
        self._closed = False

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def start(self) -> None:
        """Loop thread: pick up what was scheduled before a restart."""
        for level in range(1, self.max_level + 1):
            self._run(level)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store's arrival listener: a message was scheduled (any thread)."""
        if topic == SCHEDULE_TOPIC and not self._closed:
            self.loop.call_soon_threadsafe(self._kick, queue_id + 1)

    def _kick(self, level: int) -> None:
        if level not in self._timers:
            self._run(level)

    def _run(self, level: int) -> None:
        self._timers.pop(level, None)
        if self._closed or not 1 <= level <= self.max_level:
            return
        queue_id = level - 1
        offset = max(self._file.offsets.get(level, 0), self.store.get_min_offset(SCHEDULE_TOPIC, queue_id))
        delay_ms = self.delays_ms[level - 1]
        result = self.store.get_messages(SCHEDULE_TOPIC, queue_id, offset, BATCH)
        now_ms = int(self._clock() * 1000)
        moved = False
        for message in result.messages:
            due = message.store_timestamp + delay_ms
            if due > now_ms:
                self._timers[level] = self.loop.call_later((due - now_ms) / 1000.0, lambda: self._run(level))
                break
            topic = message.properties.get(PROPERTY_REAL_TOPIC)
            queue = message.properties.get(PROPERTY_REAL_QUEUE_ID, "")
            if topic is None or not queue.isdigit():
                log.error("scheduled message at %s/%d offset %d names no destination; dropped", SCHEDULE_TOPIC,
                          queue_id, message.queue_offset)
            else:
                try:
                    self._deliver(message, topic, int(queue))
                except Exception:
                    # Retry the same message later rather than lose it.
                    log.exception("delivering a scheduled message to %s/%s failed; retrying in 1 s", topic, queue)
                    self._timers[level] = self.loop.call_later(1.0, lambda: self._run(level))
                    break
            offset = message.queue_offset + 1
            moved = True
        else:
            if result.messages and len(result.messages) == BATCH:
                self._timers[level] = self.loop.call_later(0, lambda: self._run(level))
            elif result.next_begin_offset > offset and not result.messages:
                offset = result.next_begin_offset
                moved = True
        if moved:
            self._file.offsets[level] = offset
            self._persist(self._file)

    def close(self) -> None:
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._file.persist()
