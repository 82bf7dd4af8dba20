"""Benchmarks of fastmq.store, measured against the disk they run on.

- append: 48 MiB of 1 KiB messages into a fresh store, as put_messages batches of 100 (the broker's path) and as
  single put_message calls, with ASYNC_FLUSH and (batches only) SYNC_FLUSH; the reference is the raw sequential
  write bandwidth of the same disk in the same run: write() in 1 MiB chunks + fsync of the same total size in
  the same directory. Target: async appends at >= 50% of that bandwidth.
- ConsumeQueue scan: 300,000 units (one default-sized ConsumeQueue file) into QueueUnits arrays, unfiltered and
  with a tag filter; target >= 50M units/s.
- get-by-offset: decode one message at a random CommitLog offset (and the zero-copy view of its record).
Each append round writes into a new directory; the machine is shared, so rounds are few.
"""
from __future__ import annotations

import itertools
import os
import random
import shutil

import pytest

from fastmq.store import FlushDiskType, Message, MessageStore, MessageStoreConfig

BODY_SIZE = 1024
BATCH = 100
TOTAL_BYTES = 48 << 20
MESSAGES = TOTAL_BYTES // BODY_SIZE // BATCH * BATCH
RAW_CHUNK = 1 << 20
CQ_UNITS = 300_000
LOOKUPS = 20_000
ROUNDS = 3


def store_config(**overrides) -> MessageStoreConfig:
    return MessageStoreConfig(mapped_file_size_commit_log=256 << 20, max_hash_slot_num=50_000,
                              max_index_num=200_000, **overrides)


@pytest.fixture
def workdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench-store")
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Rounds:
    """A fresh directory per round; the previous round's files are removed first (not timed)."""

    def __init__(self, root) -> None:
        self.root = root
        self.counter = itertools.count()
        self.current = None

    def next_path(self):
        if self.current is not None:
            shutil.rmtree(self.current, ignore_errors=True)
        self.current = self.root / f"round-{next(self.counter)}"
        return self.current


def raw_write(path, total: int) -> None:
    chunk = os.urandom(RAW_CHUNK)
    path.mkdir()
    fd = os.open(path / "raw", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(total // RAW_CHUNK):
            os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)


def append_batches(store: MessageStore, count: int, body: bytes) -> None:
    batch = [body] * BATCH
    for i in range(count // BATCH):
        assert store.put_messages("BenchTopic", i % 4, batch).ok


def append_single(store: MessageStore, count: int, body: bytes) -> None:
    put = store.put_message
    for i in range(count):
        put("BenchTopic", i & 3, body)


def record_bytes(count: int) -> int:
    return count * (BODY_SIZE + 98)   # a 1 KiB body in a record with a 10-byte topic and no properties


@pytest.mark.parametrize("impl", ["raw write+fsync", "fastmq async put_messages x100", "fastmq async put_message",
                                  "fastmq sync put_messages x100"])
def test_append(compare, workdir, impl):
    rounds = Rounds(workdir)
    body = os.urandom(BODY_SIZE)
    count = MESSAGES
    bench = compare(f"store append {BODY_SIZE} B messages vs raw disk", impl, items=count,
                    nbytes=record_bytes(count))
    if impl.startswith("raw"):
        bench.pedantic(lambda path: raw_write(path, record_bytes(count)), setup=lambda: ((rounds.next_path(),), {}),
                       rounds=ROUNDS, iterations=1)
        return
    flush = FlushDiskType.SYNC_FLUSH if "sync" in impl.split() else FlushDiskType.ASYNC_FLUSH
    append = append_batches if "put_messages" in impl else append_single
    stores = []

    def setup():
        for store in stores:
            store.close()
        store = MessageStore(rounds.next_path(), store_config(flush_disk_type=flush))
        stores.append(store)
        return (store, count, body), {}

    try:
        bench.pedantic(append, setup=setup, rounds=ROUNDS, iterations=1)
    finally:
        for store in stores:
            store.close()


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench-store-read")
    store = MessageStore(path, store_config())
    messages = [Message(b"x" * 100, tags="TagA" if i % 4 == 0 else "TagB") for i in range(BATCH)]
    for _ in range(CQ_UNITS // BATCH):
        store.put_messages("ScanTopic", 0, messages)
    yield store
    store.close()
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("tags", [None, "TagA"])
def test_consume_queue_scan(compare, filled_store, tags):
    label = "all units" if tags is None else "tag filter (1 in 4 match)"
    bench = compare(f"ConsumeQueue scan {CQ_UNITS} units (target 50M units/s)", f"fastmq {label}",
                    items=CQ_UNITS)
    units = bench(filled_store.scan_queue, "ScanTopic", 0, 0, CQ_UNITS, tags)
    assert units.next_offset == CQ_UNITS


def test_get_by_offset(compare, filled_store):
    sample = filled_store.scan_queue("ScanTopic", 0, 0, CQ_UNITS)
    rng = random.Random(7)
    picks = [sample[rng.randrange(len(sample))][:2] for _ in range(LOOKUPS)]
    get = filled_store.get_message_by_offset

    def lookups():
        for offset, size in picks:
            get(offset, size)

    compare("get message by CommitLog offset", "fastmq decoded StoredMessage", items=LOOKUPS)(lookups)


def test_get_data_by_offset(compare, filled_store):
    sample = filled_store.scan_queue("ScanTopic", 0, 0, CQ_UNITS)
    rng = random.Random(7)
    picks = [sample[rng.randrange(len(sample))][:2] for _ in range(LOOKUPS)]
    get = filled_store.get_data

    def lookups():
        for offset, size in picks:
            get(offset, size).release()

    compare("get message by CommitLog offset", "fastmq zero-copy record view", items=LOOKUPS)(lookups)
