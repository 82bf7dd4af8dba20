"""Running one test against both Kafka brokers of the suite: Tansu, where the test states a Tansu bug (an
expected failure, strict, naming the bug), and fastmq's embedded broker, where it must pass (unless the
embedded broker lacks the feature too: `embedded_gap`)."""
from __future__ import annotations

import pytest


def on_both_brokers(reason: str, raises: type[BaseException] | None = None, embedded_gap: str | None = None):
    """Parametrize the `kafka_broker` fixture (tests/kafka/conftest.py) with both brokers."""
    tansu = pytest.mark.xfail(strict=True, reason=reason, raises=raises)
    embedded = [pytest.mark.xfail(strict=True, reason=embedded_gap)] if embedded_gap else []
    return pytest.mark.parametrize("kafka_broker", [pytest.param("tansu", marks=tansu),
                                                    pytest.param("embedded", marks=embedded)], indirect=True)
