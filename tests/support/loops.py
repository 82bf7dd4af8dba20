"""A started fastmq I/O loop for tests, closed (and checked to have stopped) when the test is done."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from fastmq.io import IOLoop
from tests.support.waiting import WAIT


@contextmanager
def running_loop(name: str) -> Iterator[IOLoop]:
    io_loop = IOLoop(name=name)
    io_loop.start()
    try:
        yield io_loop
    finally:
        assert io_loop.close(timeout=WAIT), "the I/O loop thread did not stop"
