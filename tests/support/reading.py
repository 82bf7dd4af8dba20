"""Reading back what a test produced to a Kafka topic, with fastmq's Consumer (bounded in time)."""
from __future__ import annotations

import time

from fastmq.kafka import Consumer, ConsumerRecord, TopicPartition


def read_partitions(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 30.0
                    ) -> list[ConsumerRecord]:
    """The first `count` records of the topic's partitions 0..partitions-1 (fewer when time runs out: the
    caller's assertion on the count says so), each partition's in offset order."""
    got: list[ConsumerRecord] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(0.2, max_records=1000).values():
                got += records
    return got
