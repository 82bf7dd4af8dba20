"""Disk use at thousands of partitions: the store's files take blocks as data arrives, so a 4096-partition topic
holding a little data takes a little disk (allocated blocks, not apparent sizes), and every record is readable
again after a restart."""
from __future__ import annotations

import os
from pathlib import Path

from fastmq.kafka import Producer
from fastmq.store.consumequeue import CQ_STORE_UNIT_SIZE
from fastmq.store.mapped_file import OS_PAGE_SIZE

from .conftest import Wire, fetch, records_of, small_broker

PARTITIONS = 4096
PER_PARTITION = 3
VALUE_SIZE = 100


def allocated_bytes(root: Path) -> int:
    return sum(os.stat(path).st_blocks * 512 for path in root.rglob("*") if path.is_file())


def test_4096_partitions_take_disk_in_proportion_to_their_data(tmp_path):
    broker = small_broker(tmp_path / "data").start()
    try:
        broker.broker.topics.create("wide", PARTITIONS)
        with Producer(broker.bootstrap_servers, linger_ms=20) as producer:
            for round_number in range(PER_PARTITION):
                for partition in range(PARTITIONS):
                    producer.send("wide", b"%d/%d/" % (partition, round_number) + b"v" * VALUE_SIZE,
                                  partition=partition)
            producer.flush(60)
        store = broker.broker.store
        commit_log_bytes = store.get_max_phy_offset()
        units_bytes = PARTITIONS * PER_PARTITION * CQ_STORE_UNIT_SIZE
        # What the data needs, plus one page per ConsumeQueue (a queue's first reservation), plus the CommitLog's
        # reservation ahead of its end and the broker's small files: before disk followed the data, each
        # ConsumeQueue took its whole 6 MB file (24 GB here).
        bound = 2 * (commit_log_bytes + units_bytes) + PARTITIONS * OS_PAGE_SIZE + (4 << 20)
        assert allocated_bytes(tmp_path / "data") <= bound

        broker.restart()
        assert allocated_bytes(tmp_path / "data") <= bound
        wire = Wire(broker.bootstrap_servers)
        try:
            for partition in range(PARTITIONS):
                values = [record.value for record in records_of(fetch(wire, "wide", partition, 0))]
                assert values == [b"%d/%d/" % (partition, r) + b"v" * VALUE_SIZE for r in range(PER_PARTITION)]
        finally:
            wire.close()
    finally:
        broker.close()
