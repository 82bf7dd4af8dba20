"""fastmq.client.metadata: the refresh schedule (triggers, minimum interval, backoff) and version waiters."""
from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.client import MetadataRefresh, MetadataVersion
from fastmq.client.metadata import LEADER_WAIT
from fastmq.io import ReconnectBackoff


def schedule(**options) -> MetadataRefresh:
    options.setdefault("backoff", ReconnectBackoff(100, 1000, jitter=0.0))
    return MetadataRefresh(300.0, 0.1, 1.0, **options)


def test_first_refresh_at_once_then_after_max_age():
    refresh = schedule()
    assert refresh.delay(5.0) == 0.0
    assert refresh.started(5.0) == "first metadata"
    assert refresh.delay(5.0) is None                       # in flight
    refresh.succeeded(5.5)
    assert refresh.delay(6.0) == pytest.approx(299.5)


def test_requests_coalesce_within_the_minimum_interval():
    refresh = schedule()
    refresh.started(0.0)
    refresh.succeeded(0.01)
    assert refresh.request("NOT_LEADER_OR_FOLLOWER")
    assert not refresh.request("again")                     # already wanted: nobody needs waking
    assert refresh.delay(0.02) == pytest.approx(0.08)       # 0.1 s after the last one started
    assert refresh.delay(0.2) == 0.0
    assert refresh.started(0.2) == "NOT_LEADER_OR_FOLLOWER"


def test_new_topics_are_fetched_at_once_not_after_the_minimum_interval():
    refresh = schedule()
    refresh.started(0.0)
    refresh.succeeded(0.01)                                 # a bootstrap's answer, before any topic was tracked
    assert refresh.request("new topics ['t']", new_topics=True)
    assert refresh.delay(0.02) == 0.0
    assert refresh.started(0.02) == "new topics ['t']"
    assert refresh.request("new topics ['u']", new_topics=True)
    assert refresh.delay(0.03) is None                      # in flight: the next starts when it is answered
    refresh.succeeded(0.04)
    assert refresh.delay(0.04) == 0.0
    refresh.started(0.04)
    refresh.succeeded(0.05)
    assert refresh.request("NOT_LEADER_OR_FOLLOWER")        # staleness still waits for the interval
    assert refresh.delay(0.06) == pytest.approx(0.08)


def test_a_stale_request_made_urgent_by_new_topics_wakes_the_caller():
    refresh = schedule()
    refresh.started(0.0)
    refresh.succeeded(0.0)
    assert refresh.request("NOT_LEADER_OR_FOLLOWER")
    assert refresh.delay(0.01) == pytest.approx(0.09)
    assert refresh.request("new topics ['t']", new_topics=True)     # sooner now: the loop must look again
    assert not refresh.request("new topics ['u']", new_topics=True)
    assert refresh.delay(0.01) == 0.0


def test_new_topics_after_failures_wait_for_the_backoff():
    refresh = schedule()
    refresh.started(0.0)
    refresh.failed("refused")
    refresh.request("new topics ['t']", new_topics=True)
    assert refresh.delay(0.0) == pytest.approx(0.1)


def test_failures_back_off_exponentially_up_to_the_maximum():
    refresh = schedule()
    start = 0.0
    delays = []
    for _ in range(6):
        refresh.started(start)
        refresh.failed("no answer")
        delay = refresh.delay(start)
        delays.append(round(delay, 6))
        start += delay
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    refresh.started(start)
    refresh.succeeded(start)                                # resolved: back to the periodic schedule
    assert refresh.delay(start) == pytest.approx(300.0)


def test_an_unresolved_answer_is_refreshed_again_with_backoff():
    refresh = schedule()
    refresh.started(0.0)
    refresh.succeeded(0.0, "t-0 has no leader")
    assert refresh.delay(0.0) == pytest.approx(0.1)
    refresh.started(0.1)
    refresh.succeeded(0.1, "t-0 has no leader")
    assert refresh.delay(0.1) == pytest.approx(0.2)
    assert refresh.started(0.3) == "t-0 has no leader"


def test_a_missing_leader_is_asked_for_every_min_interval_for_a_while_then_with_backoff():
    refresh = schedule()
    now, delays = 0.0, []
    while now < LEADER_WAIT + 3.0:                          # bounded: the delays are at least 0.1 s
        refresh.started(now)
        refresh.succeeded(now, "t-0 is led by broker 2, which is unreachable", leader_missing=True)
        delay = refresh.delay(now)
        delays.append((now, round(delay, 6)))
        now += delay
    assert {delay for at, delay in delays if at < LEADER_WAIT} == {0.1}     # while the cluster elects one
    assert [delay for at, delay in delays if at >= LEADER_WAIT][:4] == [0.2, 0.4, 0.8, 1.0]
    refresh.started(now)
    refresh.succeeded(now, "topic 't' is not in the metadata")             # another problem: back off
    refresh.started(now)
    refresh.succeeded(now, "t-0 has no leader", leader_missing=True)      # a new outage: fast again
    assert refresh.delay(now) == pytest.approx(0.1)


def test_a_zero_interval_still_backs_off_after_failures():
    refresh = MetadataRefresh(300.0, 0.0, 0.0)
    refresh.started(0.0)
    refresh.failed("refused")
    assert refresh.delay(0.0) > 0


@given(st.lists(st.sampled_from(["request", "new", "fail", "unresolved", "leader", "ok", "tick"]), max_size=60),
       st.integers(0, 2**32))
def test_never_due_twice_within_the_minimum_interval(events, seed):
    """Whatever happens, refreshes start at least min_interval (less the jitter) apart, except one for topics
    asked for since the last one started (a bounded number): no busy loop."""
    refresh = MetadataRefresh(300.0, 0.1, 1.0, backoff=ReconnectBackoff(100, 1000, rng=random.Random(seed)))
    now = 0.0
    last_start = None
    new_topics_since = False
    for event in events:
        delay = refresh.delay(now)
        if delay == 0.0:
            assert last_start is None or new_topics_since or now - last_start >= 0.08 - 1e-9
            refresh.started(now)
            last_start = now
            new_topics_since = False
            if event == "fail":
                refresh.failed("x")
            else:
                refresh.succeeded(now, "y" if event in ("unresolved", "leader") else None,
                                  leader_missing=event == "leader")
        elif event == "request":
            refresh.request("z")
        elif event == "new":
            refresh.request("new topics", new_topics=True)
            new_topics_since = True
        now += 0.01 if delay is None else min(delay, 0.05)


def test_waiters_wake_on_a_new_version():
    version = MetadataVersion()
    seen = []
    waiter = threading.Thread(target=lambda: seen.append(version.wait_for_version(0, 10)))
    waiter.start()
    version.publish(1.0, lambda: seen.append("applied"))
    waiter.join(10)
    assert seen == ["applied", True] and version.version == 1 and version.updated_at == 1.0
    assert not version.wait_for_version(1, 0.01)
