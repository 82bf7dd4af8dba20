"""TubeMQ's consumption flow-control rules: the JSON a master hands consumers (defFlowControlInfo for every group,
groupFlowControlInfo for one), and what a consumer makes of them.

    [{"type": 0, "rule": [{"start": "08:00", "end": "17:59", "dltInM": 1024, "limitInM": 20, "freqInMs": 1000}]},
     {"type": 1, "rule": [{"zeroCnt": 3, "freqInMs": 300}, {"zeroCnt": 8, "freqInMs": 1000}]},
     {"type": 2, "rule": [{"start": "18:00", "end": "23:59", "dltStInM": 20480, "dltEdInM": 2048}]},
     {"type": 3, "rule": [{"normFreqInMs": 0, "filterFreqInMs": 100, "minDataFilterFreqInMs": 400}]}]

Type 0, data limit: from start to end (local time, inclusive), while a partition lags dltInM MB or more behind
(the broker's currDataDlt), the consumer reads at most limitInM MB a minute; past that, the partition rests
freqInMs. Type 1, empty pulls: after zeroCnt empty pulls of a partition in a row it rests freqInMs (the rule of
the largest zeroCnt reached). Type 2 (the broker's SSD tier) concerns no client. Type 3, pull frequency: at least
normFreqInMs between two pulls of a partition, filterFreqInMs for a consumer with message-type filters, and
minDataFilterFreqInMs after a filtered pull that found nothing. A group's rules of a type replace the default
rules of that type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastmq.errors import ProtocolError
from fastmq.json_document import json_array

MB = 1024 * 1024
MAX_RULES = 64            # of one type: bounds what a forged rule list makes a consumer keep


@dataclass(frozen=True)
class DataLimit:
    start: int            # minutes after midnight
    end: int
    lag_bytes: int
    bytes_per_minute: int
    rest: float           # seconds

    def applies(self, minute: int, lag_bytes: int) -> bool:
        return self.start <= minute <= self.end and lag_bytes >= self.lag_bytes


@dataclass(frozen=True)
class PullFrequency:
    normal: float = 0.0           # seconds between pulls of a partition
    filtered: float = 0.0
    filtered_empty: float = 0.0


@dataclass(frozen=True)
class FlowRules:
    data_limits: tuple[DataLimit, ...] = ()
    empty_rests: tuple[tuple[int, float], ...] = ()      # (empty pulls in a row, seconds), by count
    frequency: PullFrequency | None = None
    types: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def parse(cls, text: str | None) -> FlowRules:
        """The rules of a flow-control JSON string (empty or None: no rules); ProtocolError when malformed."""
        if not text or not text.strip():
            return cls()
        entries = json_array(text, "TubeMQ flow-control rules")
        data_limits, empty_rests, frequency, types = [], [], None, set()
        for entry in entries:
            kind, rules = _field(entry, "type", int), _field(entry, "rule", list)
            if kind not in (0, 1, 2, 3):
                raise ProtocolError(f"TubeMQ flow-control rule type {kind} is unknown")
            if len(rules) > MAX_RULES:
                raise ProtocolError(f"TubeMQ flow-control rule type {kind} has {len(rules)} rules")
            types.add(kind)
            for rule in rules:
                if kind == 0:
                    data_limits.append(DataLimit(
                        _minute(_field(rule, "start", str)), _minute(_field(rule, "end", str)),
                        _field(rule, "dltInM", int) * MB, _field(rule, "limitInM", int) * MB,
                        _field(rule, "freqInMs", int) / 1000))
                elif kind == 1:
                    empty_rests.append((_field(rule, "zeroCnt", int), _field(rule, "freqInMs", int) / 1000))
                elif kind == 3:
                    frequency = PullFrequency(_field(rule, "normFreqInMs", int) / 1000,
                                              _field(rule, "filterFreqInMs", int) / 1000,
                                              _field(rule, "minDataFilterFreqInMs", int) / 1000)
        return cls(tuple(data_limits), tuple(sorted(empty_rests)), frequency, frozenset(types))

    def over(self, default: FlowRules) -> FlowRules:
        """These (a group's) rules, with the default rules of the types they do not set."""
        return FlowRules(self.data_limits if 0 in self.types else default.data_limits,
                         self.empty_rests if 1 in self.types else default.empty_rests,
                         self.frequency if 3 in self.types else default.frequency,
                         self.types | default.types)

    def empty_rest(self, empty_in_a_row: int) -> float | None:
        """How long a partition rests after this many empty pulls in a row (None: no rule reached)."""
        rest = None
        for count, seconds in self.empty_rests:
            if empty_in_a_row >= count:
                rest = seconds
        return rest

    def pull_interval(self, filtered: bool, found_nothing: bool) -> float:
        if self.frequency is None:
            return 0.0
        if not filtered:
            return self.frequency.normal
        return self.frequency.filtered_empty if found_nothing else self.frequency.filtered

    def data_limit(self, minute: int, lag_bytes: int) -> DataLimit | None:
        return next((limit for limit in self.data_limits if limit.applies(minute, lag_bytes)), None)


def _field(rule: Any, name: str, kind: type) -> Any:
    value = rule.get(name) if isinstance(rule, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, int) and value < 0):
        raise ProtocolError(f"TubeMQ flow-control rule {rule!r}: {name} is not a {kind.__name__} >= 0")
    return value


def _minute(text: str) -> int:
    hours, sep, minutes = text.partition(":")
    if not (sep and hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
        raise ProtocolError(f"TubeMQ flow-control time {text!r} is not HH:MM")
    return int(hours) * 60 + int(minutes)
