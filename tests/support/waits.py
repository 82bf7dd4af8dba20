"""Waiting for a condition with a deadline, instead of a fixed sleep."""
from __future__ import annotations

import time
from typing import Callable


def wait_until(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.005) -> bool:
    """Poll condition() until it is true or `timeout` seconds passed; returns its last truth."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())
