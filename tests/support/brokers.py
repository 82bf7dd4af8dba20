"""Running one test against both Kafka brokers of the suite: Tansu, where the test states a Tansu bug (an
expected failure, strict, naming the bug), and fastmq's embedded broker, where it must pass."""
from __future__ import annotations

import pytest


def on_both_brokers(reason: str, raises: type[BaseException] | None = None, fixture: str = "kafka_broker"):
    """Parametrize a fixture taking the broker's name ("tansu" or "embedded"; by default `kafka_broker` of
    tests/kafka/conftest.py) with both brokers."""
    tansu = pytest.mark.xfail(strict=True, reason=reason, raises=raises)
    return pytest.mark.parametrize(fixture, [pytest.param("tansu", marks=tansu), pytest.param("embedded")],
                                   indirect=True)
