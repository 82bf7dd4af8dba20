"""PeriodicWork on a real I/O loop: repeated runs, a failing run logged without ending the work, stop()."""
from __future__ import annotations

import logging
import threading

import pytest

from fastmq.broker.periodic import PeriodicWork
from tests.support.loops import running_loop
from tests.support.waiting import WAIT, wait_for

INTERVAL = 0.005


@pytest.fixture
def loop():
    with running_loop("fastmq-periodic-test") as io_loop:
        yield io_loop


def test_work_runs_again_and_again_on_the_loop_thread(loop):
    periodic = PeriodicWork(loop)
    threads: list[int] = []
    periodic.every("count", INTERVAL, lambda: threads.append(threading.get_ident()))
    wait_for(lambda: len(threads) >= 3, message=lambda: f"{len(threads)} runs")
    loop.run_in_loop(periodic.stop, timeout=WAIT)
    assert set(threads) == {loop.run_in_loop(threading.get_ident, timeout=WAIT)}


def test_a_run_that_raises_is_logged_and_the_work_goes_on(loop, caplog):
    caplog.set_level(logging.ERROR, logger="fastmq.broker.periodic")
    periodic = PeriodicWork(loop)
    runs = []

    def fail_first() -> None:
        runs.append(None)
        if len(runs) == 1:
            raise RuntimeError("the first run breaks")

    periodic.every("flaky scan", INTERVAL, fail_first)
    wait_for(lambda: len(runs) >= 3, message=lambda: f"{len(runs)} runs")
    loop.run_in_loop(periodic.stop, timeout=WAIT)
    failures = [r for r in caplog.records if r.name == "fastmq.broker.periodic"]
    assert [r.getMessage() for r in failures] == ["periodic flaky scan failed"]
    assert failures[0].exc_info is not None and "the first run breaks" in str(failures[0].exc_info[1])


def test_nothing_runs_after_stop(loop):
    periodic = PeriodicWork(loop)
    runs = {"a": 0, "b": 0}
    periodic.every("a", INTERVAL, lambda: runs.__setitem__("a", runs["a"] + 1))
    periodic.every("b", INTERVAL, lambda: runs.__setitem__("b", runs["b"] + 1))
    wait_for(lambda: runs["a"] and runs["b"])
    loop.run_in_loop(periodic.stop, timeout=WAIT)
    after_stop = dict(runs)
    # Jobs scheduled after stop() are refused too; let the loop pass many intervals, then look again.
    periodic.every("late", INTERVAL, lambda: runs.__setitem__("late", 1))
    marker = threading.Event()
    loop.call_later(20 * INTERVAL, marker.set)
    assert marker.wait(WAIT)
    assert runs == after_stop
    periodic.stop()      # idempotent
