"""IOLoop: hand-over from threads, timers, poll hooks, run_in_loop, shutdown."""
from __future__ import annotations

import threading
import time

import pytest

from fastmq.io import IOLoop, LoopClosedError
from fastmq.io import loop as loop_module
from tests.support.waiting import WAIT, wait_for


def test_call_soon_threadsafe_from_many_threads_runs_everything_in_order_per_thread(loop):
    threads_count, calls_per_thread = 8, 500
    seen: list[tuple[int, int]] = []
    loop_threads: set[int] = set()

    def record(thread_index: int, call_index: int) -> None:
        loop_threads.add(threading.get_ident())
        seen.append((thread_index, call_index))

    def producer(thread_index: int) -> None:
        for call_index in range(calls_per_thread):
            loop.call_soon_threadsafe(record, thread_index, call_index)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert wait_for(lambda: len(seen) == threads_count * calls_per_thread)
    assert loop_threads == {loop._thread_id}
    for thread_index in range(threads_count):
        assert [c for t, c in seen if t == thread_index] == list(range(calls_per_thread))


def test_run_in_loop_returns_the_result_and_raises_the_exception(loop):
    assert loop.run_in_loop(lambda a, b: a + b, 2, 3, timeout=WAIT) == 5
    assert loop.run_in_loop(loop.in_loop_thread, timeout=WAIT) is True
    assert not loop.in_loop_thread()

    def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        loop.run_in_loop(fail, timeout=WAIT)


def test_timers_fire_in_time_order_and_cancelled_ones_never_fire(loop):
    fired: list[str] = []
    done = threading.Event()
    loop.call_later(0.06, fired.append, "third")
    loop.call_later(0.02, fired.append, "first")
    cancelled = loop.call_later(0.03, fired.append, "cancelled")
    loop.call_later(0.04, fired.append, "second")
    loop.call_later(0.1, done.set)
    cancelled.cancel()
    cancelled.cancel()  # idempotent
    assert cancelled.cancelled
    assert done.wait(WAIT)
    assert fired == ["first", "second", "third"]


def test_timer_cancelled_from_the_loop_thread_and_a_timer_in_the_past(loop):
    fired: list[str] = []
    done = threading.Event()

    def schedule() -> None:
        handle = loop.call_later(0.01, fired.append, "never")
        loop.call_at(loop.time() - 5, fired.append, "past")
        handle.cancel()
        loop.call_later(0.05, done.set)

    loop.run_in_loop(schedule, timeout=WAIT)
    assert done.wait(WAIT)
    assert fired == ["past"]


def test_many_cancelled_timers_are_compacted_away(loop):
    def schedule() -> int:
        handles = [loop.call_later(60 + i, lambda: None) for i in range(500)]
        for handle in handles[:450]:
            handle.cancel()
        return len(loop._timers)

    assert loop.run_in_loop(schedule, timeout=WAIT) == 500
    done = threading.Event()
    loop.call_later(0.0, done.set)  # one pass through the timer phase compacts the heap
    assert done.wait(WAIT)
    assert wait_for(lambda: len(loop._timers) <= 51)


def test_exceptions_in_callbacks_timers_and_hooks_do_not_stop_the_loop(loop, caplog):
    def fail() -> None:
        raise RuntimeError("callback bug")

    calls = []

    def failing_hook():
        calls.append(1)
        raise RuntimeError("hook bug")

    loop.call_soon_threadsafe(fail)
    loop.call_later(0.0, fail)
    loop.add_poll_hook(failing_hook)
    assert wait_for(lambda: len(calls) >= 1)
    loop.remove_poll_hook(failing_hook)
    assert loop.run_in_loop(lambda: "alive", timeout=WAIT) == "alive"
    assert "callback bug" in caplog.text and "hook bug" in caplog.text


def test_poll_hook_runs_every_iteration_and_its_timeout_bounds_the_sleep(loop):
    calls: list[float] = []

    def hook() -> float:
        calls.append(time.monotonic())
        return 0.01

    loop.add_poll_hook(hook)
    # With nothing else to do, only the hook's 10 ms bound wakes the loop.
    assert wait_for(lambda: len(calls) >= 10)
    loop.remove_poll_hook(hook)


def test_an_idle_loop_sleeps_instead_of_spinning(loop):
    calls: list[int] = []
    loop.add_poll_hook(lambda: calls.append(1))
    wait_for(lambda: len(calls) >= 1)
    time.sleep(0.3)
    # A spinning loop would call the hook many thousand times in 0.3 s; a sleeping one a handful.
    assert len(calls) < 50


def test_stop_runs_work_handed_over_before_it_and_refuses_work_after(loop):
    ran = []
    gate = threading.Event()
    loop.call_soon_threadsafe(gate.wait, WAIT)  # keep the loop busy while work piles up
    for i in range(100):
        loop.call_soon_threadsafe(ran.append, i)
    loop.stop()
    gate.set()
    assert loop.join(WAIT)
    assert ran == list(range(100))
    assert loop.closed
    with pytest.raises(LoopClosedError):
        loop.call_soon_threadsafe(ran.append, -1)
    with pytest.raises(LoopClosedError):
        loop.run_in_loop(lambda: None)


def test_stop_from_the_loop_thread_and_stop_of_a_loop_never_started():
    loop = IOLoop()
    loop.start()
    loop.call_soon_threadsafe(loop.stop)
    assert loop.join(WAIT)
    with pytest.raises(RuntimeError):
        loop.start()

    never_started = IOLoop()
    ran = []
    never_started.call_soon_threadsafe(ran.append, 1)
    never_started.stop()
    assert never_started.closed and ran == [1]


def test_threadsafe_handover_never_loses_a_wakeup(loop):
    # Each round hands one callback to a loop that is (almost always) asleep in epoll; a lost wakeup
    # would leave the event unset until the 10 s bound.
    for _ in range(300):
        event = threading.Event()
        loop.call_soon_threadsafe(event.set)
        assert event.wait(WAIT)


def test_getaddrinfo_resolves_names_off_the_loop_thread(loop):
    result = {}
    done = threading.Event()

    def resolved(infos, error):
        result["infos"], result["error"], result["thread"] = infos, error, threading.get_ident()
        done.set()

    loop.run_in_loop(loop.getaddrinfo, "localhost", 80, resolved, timeout=WAIT)
    assert done.wait(WAIT)
    assert result["error"] is None and result["infos"]
    assert result["thread"] == loop._thread_id

    done.clear()
    loop.run_in_loop(loop.getaddrinfo, "no-such-host.invalid", 80, resolved, timeout=WAIT)
    assert done.wait(WAIT)
    assert result["infos"] is None and result["error"] is not None


def test_wakeup_makes_a_sleeping_loop_run_its_hooks(loop):
    # The hook has no timeout of its own, so only wakeup() brings it back; a lost wakeup would leave a
    # round waiting for the 10 s bound.
    handed_over: list[int] = []
    seen: list[int] = []
    progressed = threading.Condition()

    def hook() -> None:
        if len(seen) < len(handed_over):
            seen.extend(handed_over[len(seen):])
            with progressed:
                progressed.notify_all()
        return None

    loop.add_poll_hook(hook)
    for round_index in range(300):
        handed_over.append(round_index)
        loop.wakeup()
        loop.wakeup()  # a second call while one is pending is nearly free
        with progressed:
            assert progressed.wait_for(lambda: len(seen) > round_index, WAIT)
    assert seen == list(range(300))
    loop.remove_poll_hook(hook)


def test_call_or_hand_over_runs_on_the_loop_thread_and_reports_a_closed_loop():
    ran_on: list[int] = []
    loop = IOLoop(name="hand-over")
    loop.start()
    try:
        assert loop.call_or_hand_over(lambda: ran_on.append(threading.get_ident()))
        wait_for(lambda: ran_on)
        # From the loop thread itself it runs before returning, not an iteration later.
        inline = loop.run_in_loop(lambda: (loop.call_or_hand_over(ran_on.append, -1), list(ran_on))[1])
        assert inline[-1] == -1
    finally:
        loop.close(timeout=WAIT)
    assert ran_on[0] == loop._thread_id != threading.get_ident()
    assert loop.call_or_hand_over(ran_on.append, -2) is False
    assert -2 not in ran_on


def test_give_turn_returns_once_the_loop_has_run_its_hooks(loop, monkeypatch):
    # The hook asks for no timeout, so the loop sleeps until something wakes it: each give_turn() must wake it
    # and wait for its hooks (TURN_WAIT is raised so that a slow machine cannot make a lost turn look like one).
    monkeypatch.setattr(loop_module, "TURN_WAIT", WAIT)
    monkeypatch.setattr(loop_module, "TURN_INTERVAL", 0.0)
    turns: list[int] = []
    loop.add_poll_hook(lambda: turns.append(threading.get_ident()))
    assert wait_for(lambda: turns)
    for _ in range(200):
        before = len(turns)
        loop.give_turn()
        assert len(turns) > before
    assert set(turns) == {loop._thread_id}


def test_give_turn_only_wakes_soon_after_a_turn_on_the_loop_thread_or_on_a_closed_loop(loop, monkeypatch):
    monkeypatch.setattr(loop_module, "TURN_WAIT", 3 * WAIT)
    monkeypatch.setattr(loop_module, "TURN_INTERVAL", 0.0)
    turns: list[int] = []
    loop.add_poll_hook(lambda: turns.append(1))
    loop.give_turn()
    monkeypatch.setattr(loop_module, "TURN_INTERVAL", 3600.0)
    for _ in range(3):
        # The loop had its turn a moment ago: no wait, but it is woken all the same (the hook asks for no
        # timeout, so a sleeping loop would never send the batch the caller just filled).
        before = len(turns)
        loop.give_turn()
        assert wait_for(lambda: len(turns) > before, message="the loop ran its hooks after give_turn()")
    monkeypatch.setattr(loop_module, "TURN_INTERVAL", 0.0)
    loop.run_in_loop(loop.give_turn, timeout=WAIT)     # waiting for itself would outlast the timeout
    unstarted = IOLoop(name="never-started")
    unstarted.give_turn()
    unstarted.close()
    unstarted.give_turn()


def test_a_poll_hook_added_as_a_bound_method_is_removed_by_the_same_method(loop):
    # Owners add and remove `self.method`: two different bound method objects, equal but not identical.
    class Owner:
        calls = 0

        def hook(self) -> None:
            self.calls += 1

    owner = Owner()
    loop.add_poll_hook(owner.hook)
    assert wait_for(lambda: owner.calls)
    loop.remove_poll_hook(owner.hook)
    loop.run_in_loop(lambda: None, timeout=WAIT)     # an iteration that began with the old hooks has ended
    calls = owner.calls
    for _ in range(3):
        loop.wakeup()
        loop.run_in_loop(lambda: None, timeout=WAIT)
    assert owner.calls == calls
