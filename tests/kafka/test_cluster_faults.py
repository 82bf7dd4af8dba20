"""Apache Kafka, three brokers: the idempotent producer while the leader of the partitions it writes is killed
(kill -9) and brought back. Replication factor 3, min.insync.replicas 2, acks=all: no acknowledged record may
be lost, none may come twice, each partition keeps the order of sending, and every send completes."""
from __future__ import annotations

import threading
import uuid
from collections import defaultdict

import confluent_kafka
import pytest

from fastmq.kafka import Admin
from fastmq.kafka.admin import NewTopic
from fastmq.kafka.producer import Producer

RECORDS = 200_000
PARTITIONS = 6
KEYS = 64
WAIT = 60.0


def read_everything(servers: str, topic: str, expected: int) -> dict[int, list[int]]:
    """partition -> the record numbers in log order, read by librdkafka up to `expected` records."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": f"g-{topic}",
                                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                       "fetch.queue.backoff.ms": 0})
    logs: dict[int, list[int]] = defaultdict(list)
    try:
        reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read = idle = 0
        while read < expected and idle < 20:        # bounded: 20 empty seconds in a row end it
            messages = [m for m in reader.consume(10000, 1.0) if m.error() is None]
            idle = 0 if messages else idle + 1
            for message in messages:
                logs[message.partition()].append(int(message.value()))
            read += len(messages)
    finally:
        reader.close()
    return logs


@pytest.mark.slow
def test_killing_the_leader_while_producing_loses_and_duplicates_nothing(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    topic = f"faults-{uuid.uuid4().hex[:10]}"
    with Admin(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.wait_for_topics([topic], timeout=WAIT)
        leaders = {p.partition: p.leader for p in admin.describe_topics([topic])[topic].partitions}
    victim = max(set(leaders.values()), key=lambda node: list(leaders.values()).count(node))
    producer = Producer(cluster.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=5,
                        request_timeout_ms=5000, delivery_timeout_ms=120_000)
    restart = threading.Thread(target=cluster.restart, args=(victim,), name="restart-victim")
    futures = []
    try:
        for number in range(RECORDS):
            futures.append(producer.send(topic, b"%d" % number, key=b"key-%d" % (number % KEYS)))
            if number == RECORDS // 4:
                futures[RECORDS // 8].get(WAIT)         # the victim has been taking records
                cluster.node(victim).kill()             # kill -9 of the node leading most partitions
            elif number == RECORDS // 2:
                futures[-1].get(2 * WAIT)               # the others took over its partitions
                restart.start()                         # it comes back while records keep coming
        producer.flush(3 * WAIT)
    finally:
        producer.close(WAIT)
        if restart.is_alive() or restart.ident is not None:
            restart.join(2 * WAIT)
    assert all(future.is_done for future in futures), "a send never completed"
    failed = [future.exception for future in futures if future.exception is not None]
    assert not failed, f"{len(failed)} sends failed, the first: {failed[0]!r}"
    acknowledged = {number: future.get(0) for number, future in enumerate(futures)}

    logs = read_everything(cluster.bootstrap_servers, topic, RECORDS)
    seen = [number for log in logs.values() for number in log]
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} records written twice"
    lost = set(acknowledged) - set(seen)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    for partition, log in logs.items():
        assert log == sorted(log), f"partition {partition} is out of send order"
        # What each send was told is where its record is.
        where = [(acknowledged[number].partition, acknowledged[number].offset) for number in log]
        assert where == [(partition, offset) for offset in range(len(log))]
