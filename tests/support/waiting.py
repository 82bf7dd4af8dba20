"""Waiting for a condition with a deadline: the one way tests wait for something to happen (never a fixed sleep
where the condition itself can be watched)."""
from __future__ import annotations

import time
from typing import Callable, TypeVar, Union

T = TypeVar("T")

WAIT = 10.0
"""The longest a test waits for one event unless it says otherwise."""

Message = Union[str, Callable[[], str]]


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline (an AssertionError: the test fails, naming what it waited
    for)."""


def _timeout(message: Message, timeout: float) -> WaitTimeout:
    text = message() if callable(message) else message
    return WaitTimeout(f"not true within {timeout:g} s: {text or 'the condition'}")


def wait_for(condition: Callable[[], T], timeout: float = WAIT, interval: float = 0.005,
             message: Message = "") -> T:
    """Call condition() every interval seconds until it returns something true, and return that. Raise
    WaitTimeout (with message, or what message() returns at that moment) when timeout seconds pass first; the
    condition is asked one last time at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timeout(message, timeout)
        time.sleep(min(interval, remaining))

