"""Dotted names as a user writes them (fastmq.kafka.compat.KafkaConsumer.poll) resolved to what they name."""
from __future__ import annotations

import importlib


def resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes (ImportError or
    AttributeError when there is no such thing)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            value = getattr(value, name)
        return value
    raise ModuleNotFoundError(dotted)
