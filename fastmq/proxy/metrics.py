"""Prometheus metrics of one proxy process, in the text exposition format (served at /metrics). Counters only
grow; each process serves its own (Prometheus sums over the processes it scrapes)."""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

Labels = tuple[tuple[str, str], ...]

HELP = {
    "fastmq_proxy_requests_total": "HTTP requests answered, by route and status",
    "fastmq_proxy_request_seconds_total": "time spent answering requests, by route",
    "fastmq_proxy_messages_produced_total": "messages the broker accepted, by topic",
    "fastmq_proxy_messages_delivered_total": "messages handed to consumers, by consumer",
    "fastmq_proxy_acks_total": "acks, by consumer and verdict (ok, expired, stale)",
    "fastmq_proxy_dead_letters_total": "messages moved to a dead-letter topic, by consumer",
    "fastmq_proxy_redis_round_trips_total": "round trips to Redis",
    "fastmq_proxy_broker_requests_total": "pull and offset requests to the broker",
}


class Metrics:
    def __init__(self) -> None:
        self.counters: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self.gauges: dict[str, Callable[[], float]] = {}

    def add(self, name: str, labels: Labels, amount: float = 1) -> None:
        """Add to a counter's series named by `labels`, ((label, value), ...): a tuple the caller builds (or keeps)
        itself, which costs a third of keyword arguments made into one per call. Kept in the caller's order; the
        same labels in another order are summed when read."""
        self.counters[name][labels] += amount

    def _series(self, name: str) -> dict[Labels, float]:
        """A counter's values by its labels in sorted order."""
        series: dict[Labels, float] = defaultdict(float)
        for labels, value in self.counters[name].items():
            series[tuple(sorted(labels))] += value
        return series

    def value(self, name: str, **labels: str) -> float:
        return self._series(name).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        lines = []
        names = sorted(set(self.counters) | set(self.gauges))
        for name in names:
            lines.append(f"# HELP {name} {HELP.get(name, name)}")
            lines.append(f"# TYPE {name} counter")
            if name in self.gauges:
                lines.append(f"{name} {self.gauges[name]():g}")
                continue
            for labels, value in sorted(self._series(name).items()):
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                lines.append(f"{name}{{{rendered}}} {value:g}" if rendered else f"{name} {value:g}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
