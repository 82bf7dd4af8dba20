"""An idempotent producer writing to a topic Apache Kafka is still creating (issue 21): Metadata lists the
leaders before they took their partitions, so the first batches meet NOT_LEADER_OR_FOLLOWER. A later batch of the
same partition that went out meanwhile and was written would start the broker's sequence state for the producer,
and the first batch's retry would be OUT_OF_ORDER_SEQUENCE for good. The producer sends a partition's first batch
alone until it is acknowledged, and retries in sequence order: every record is written once, in order."""
from __future__ import annotations

import time
import uuid

from fastmq.kafka import Admin, Consumer, Producer, TopicPartition
from fastmq.kafka.admin import NewTopic

PARTITIONS = 16
RECORDS = 40        # per partition: a batch holds 4, several in flight
WAIT = 60.0


def test_records_sent_while_the_topic_is_created_are_written_once_in_order(apache_kafka):
    servers = apache_kafka.bootstrap_servers
    topic = f"created-while-sending-{uuid.uuid4().hex[:8]}"
    with Admin(servers) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])       # no wait for the leaders
    with Producer(servers, batch_size=400, linger_ms=0, retry_backoff_ms=20,
                  max_in_flight_requests_per_connection=5) as producer:
        futures = [producer.send(topic, b"%d-%d" % (p, i), partition=p)
                   for i in range(RECORDS) for p in range(PARTITIONS)]
        offsets = [future.get(WAIT).offset for future in futures]
    by_partition: dict[int, list[int]] = {}
    for index, offset in enumerate(offsets):
        by_partition.setdefault(index % PARTITIONS, []).append(offset)
    assert all(found == list(range(RECORDS)) for found in by_partition.values()), by_partition
    with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + WAIT
        while sum(map(len, got.values())) < PARTITIONS * RECORDS and time.monotonic() < deadline:
            for record in consumer.consume(1000, 0.5):
                got.setdefault(record.partition, []).append(record.value)
    assert got == {p: [b"%d-%d" % (p, i) for i in range(RECORDS)] for p in range(PARTITIONS)}
