"""The kill -9 loop: a child appends with SYNC_FLUSH and reports each acknowledged message; it is killed at
random moments, 50 times. After every crash the store is recovered and must hold every acknowledged message,
intact and in order, and nothing that was never written (a torn last record, garbage, duplicates)."""
from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastmq._native import store_codec
from fastmq.store import MessageStore

from .crash_child import THREADS, crash_config, payload

ROUNDS = 50
CHILD = Path(__file__).with_name("crash_child.py")
STARTUP_TIMEOUT = 30


def read_queue(store: MessageStore, queue_id: int) -> list:
    messages, offset = [], 0
    while True:
        result = store.get_messages("T", queue_id, offset, 512)
        if not result.messages:
            return messages
        messages += result.messages
        offset = result.next_begin_offset


def run_child(root: Path, round_number: int, rng: random.Random) -> dict[int, int]:
    """Start the appender, kill it at a random moment, return how many messages each thread had acknowledged."""
    child = subprocess.Popen([sys.executable, str(CHILD), str(root), str(round_number)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        with selectors.DefaultSelector() as selector:   # not select.select: it fails once descriptors pass 1023
            selector.register(child.stdout, selectors.EVENT_READ)
            ready = selector.select(STARTUP_TIMEOUT)
        assert ready and child.stdout.readline() == b"ready\n", child.stderr.read1()
        time.sleep(rng.uniform(0.0, 0.25))  # the crash strikes at a random point of the writing
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(STARTUP_TIMEOUT)
    acked = {thread: 0 for thread in range(THREADS)}
    for line in child.stdout.read().decode().splitlines():
        _ack, thread, seq = line.split()
        assert int(seq) == acked[int(thread)]            # each thread acknowledges in order
        acked[int(thread)] += 1
    child.stdout.close()
    child.stderr.close()
    return acked


def test_every_acknowledged_message_survives_kill_9(tmp_path):
    rng = random.Random(20240917)
    root = tmp_path / "store"
    known: dict[int, list[bytes]] = {thread: [] for thread in range(THREADS)}
    total_acked = 0
    for round_number in range(ROUNDS):
        acked = run_child(root, round_number, rng)
        total_acked += sum(acked.values())
        assert (root / "abort").exists()                 # the child never shut down cleanly
        with MessageStore(root, crash_config()) as store:
            stored_records = 0
            for thread in range(THREADS):
                messages = read_queue(store, thread)
                assert [m.queue_offset for m in messages] == list(range(len(messages)))
                bodies = [m.body for m in messages]
                previous = known[thread]
                assert bodies[:len(previous)] == previous
                new = bodies[len(previous):]
                # Exactly this round's messages, in order: all acknowledged ones, plus at most the one in flight.
                assert new == [payload(round_number, thread, seq) for seq in range(len(new))]
                assert acked[thread] <= len(new) <= acked[thread] + 1
                known[thread] = bodies
                stored_records += len(bodies)
                if acked[thread]:
                    key = f"{round_number}-{thread}-{acked[thread] - 1}"
                    assert [m.body for m in store.query_message("T", key)] == [new[acked[thread] - 1]]
            # No record in the CommitLog that no queue knows about.
            seen = []
            end = store.commit_log.scan(store.get_min_phy_offset(), True, seen.append)
            assert len(seen) == stored_records and end.offset == store.get_max_phy_offset()
            # The data ends cleanly: at unwritten bytes, or at a blank that closed the newest file.
            assert end.status in (store_codec.STATUS_INCOMPLETE, store_codec.STATUS_END, store_codec.STATUS_BLANK)
    assert total_acked > ROUNDS        # the child really got messages acknowledged
