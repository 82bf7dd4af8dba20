"""The appender that test_crash.py kills with SIGKILL: two threads append with SYNC_FLUSH and print
"ack <thread> <seq>" for every acknowledged message. Not a test module; run as a script."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastmq.store import FlushDiskType, MessageStore, MessageStoreConfig  # noqa: E402

THREADS = 2


def roomy_disk(path: str) -> float:
    """The disk's fill level as these tests see it: however full the shared machine's disk is, writes go on."""
    return 0.10


def crash_config() -> MessageStoreConfig:
    return MessageStoreConfig(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=64 * 1024,
                              mapped_file_size_consume_queue=100 * 20, max_hash_slot_num=64, max_index_num=256,
                              flush_interval_consume_queue_ms=50, flush_consume_queue_thorough_interval_ms=100,
                              disk_usage=roomy_disk)


def payload(round_number: int, thread: int, seq: int) -> bytes:
    """A body that can be regenerated and checked byte by byte; sizes vary so records straddle pages."""
    size = (seq * 7919 + round_number * 104729 + thread * 31) % 1500 + 1
    head = b"%d:%d:%d:" % (round_number, thread, seq)
    return head + bytes((round_number * 31 + seq * 17 + i) % 251 for i in range(size))


def main() -> None:
    root, round_number = sys.argv[1], int(sys.argv[2])
    store = MessageStore(root, crash_config())
    out_lock = threading.Lock()

    def append(thread: int) -> None:
        seq = 0
        while True:
            result = store.put_message("T", thread, payload(round_number, thread, seq),
                                       keys=f"{round_number}-{thread}-{seq}")
            if not result.ok:
                raise SystemExit(f"put failed: {result.status}")
            with out_lock:
                sys.stdout.write(f"ack {thread} {seq}\n")
                sys.stdout.flush()
            seq += 1

    with out_lock:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
    threads = [threading.Thread(target=append, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
