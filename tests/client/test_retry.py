"""fastmq.client.retry: classification hook, backoff, attempts and deadlines."""
from __future__ import annotations

import pytest

from fastmq.client import RetryPolicy
from fastmq.errors import FastMQError
from fastmq.io import ReconnectBackoff


class Transient(FastMQError):
    retriable = True


def policy(**options) -> RetryPolicy:
    options.setdefault("backoff", ReconnectBackoff(100, 400, jitter=0.0))
    return RetryPolicy(lambda error: getattr(error, "retriable", False), backoff_ms=100, **options)


def test_retriable_errors_back_off_exponentially():
    retry = policy()
    assert [retry.next_delay(Transient(), n, 0.0) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.4, 0.4]


def test_the_hook_decides_what_is_retriable():
    assert policy().next_delay(FastMQError("fatal"), 1, 0.0) is None


def test_attempts_and_deadline_end_retries():
    retry = policy(max_attempts=3)
    assert retry.next_delay(Transient(), 2, 0.0) is not None
    assert retry.next_delay(Transient(), 3, 0.0) is None                 # out of attempts
    assert policy().next_delay(Transient(), 1, 10.0, deadline=10.05) is None   # the backoff ends too late


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        RetryPolicy(bool, backoff_ms=100, max_attempts=0)
