"""max_open_mapped_files bounds the descriptors the broker's store holds, however many partitions it serves:
files beyond the bound are unmapped and mapped again when read, and every record still reads back."""
from __future__ import annotations

import os

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import Consumer, Producer
from fastmq.kafka.admin import Admin, NewTopic
from fastmq.kafka.structs import TopicPartition

PARTITIONS = 256
BOUND = 8


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_topic_of_many_partitions_holds_at_most_the_bound(tmp_path):
    before = open_descriptors()
    with EmbeddedBroker(tmp_path, max_open_mapped_files=BOUND) as broker:
        servers = broker.bootstrap_servers
        with Admin(bootstrap_servers=servers) as admin:
            admin.create_topics([NewTopic("wide", PARTITIONS, 1)])
        with Producer(bootstrap_servers=servers, linger_ms=0) as producer:
            for partition in range(PARTITIONS):
                producer.send("wide", b"%d" % partition, partition=partition)
            producer.flush()
        with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("wide", p) for p in range(PARTITIONS)])
            values: set[bytes] = set()
            for _ in range(100):
                for records in consumer.poll(0.2).items():
                    values.update(record.value for record in records[1])
                if len(values) == PARTITIONS:
                    break
            # The broker's listener, loop, store files and the clients' sockets: far fewer than a descriptor or
            # two per partition.
            held = open_descriptors() - before
        assert values == {b"%d" % p for p in range(PARTITIONS)}
        assert held < 2 * BOUND + 64, held
