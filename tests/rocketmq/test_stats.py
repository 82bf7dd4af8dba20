"""A consumer's statistics (fastmq/rocketmq/stats.py) on a clock the test moves: the last minute's rates and
averages, and the last hour's failures, per topic."""
from __future__ import annotations

import pytest

from fastmq.rocketmq.stats import ConsumeStats


class Clock:
    now = 1000.0


def test_rates_and_averages_cover_the_last_minute():
    clock = Clock()
    stats = ConsumeStats(lambda: clock.now)
    for second in range(10):
        clock.now = 1000.0 + second
        stats.pulled("t", 32, rt_ms=4.0)
        stats.consumed("t", 30, ok=True, rt_ms=2.0)
        stats.consumed("t", 2, ok=False, rt_ms=6.0)
    clock.now = 1010.0
    status = stats.status_table()["t"]
    assert status == {"pullRT": pytest.approx(4.0), "pullTPS": pytest.approx(32.0), "consumeRT": pytest.approx(4.0),
                      "consumeOKTPS": pytest.approx(30.0), "consumeFailedTPS": pytest.approx(2.0),
                      "consumeFailedMsgs": 20}
    # two minutes later the rates have left the window, the hour's failures have not
    clock.now = 1130.0
    stats.pulled("t", 0, rt_ms=100.0)
    status = stats.status_table()["t"]
    assert status["consumeOKTPS"] == 0.0 and status["pullTPS"] == 0.0 and status["consumeFailedMsgs"] == 20
    assert status["pullRT"] == pytest.approx(100.0)
    # past the hour they have
    clock.now = 1000.0 + 3700.0
    stats.pulled("t", 0, rt_ms=1.0)
    clock.now += 2.0
    stats.pulled("t", 0, rt_ms=1.0)
    assert stats.status_table()["t"]["consumeFailedMsgs"] == 0


def test_topics_are_apart_and_nothing_recorded_is_an_empty_table():
    clock = Clock()
    stats = ConsumeStats(lambda: clock.now)
    assert stats.status_table() == {}
    stats.consumed("a", 1, ok=True, rt_ms=1.0)
    stats.consumed("b", 3, ok=False, rt_ms=1.0)
    clock.now += 1.0
    table = stats.status_table()
    assert sorted(table) == ["a", "b"]
    assert table["a"]["consumeFailedMsgs"] == 0 and table["b"]["consumeFailedMsgs"] == 3
