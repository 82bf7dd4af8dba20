"""Streaming reads of format("fastmq"): restart from a checkpoint exactly, availableNow, admission control,
new partitions, records deleted under the query."""
from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from fastmq.kafka import Admin, Producer, TopicPartition
from tests.spark.conftest import new_topic, run_to_end


def produce(servers: str, topic: str, partition: int, start: int, stop: int) -> None:
    with Producer(servers) as producer:
        producer.send_many(topic, [f"{partition}-{i}".encode() for i in range(start, stop)],
                           partition=partition).get(30)


def written_rows(spark, path: str) -> Counter:
    if not os.path.isdir(path):
        return Counter()
    return Counter((r.partition, r.offset, bytes(r.value).decode()) for r in spark.read.parquet(path).collect())


def run_available_now(spark, servers: str, topic: str, checkpoint: str, **options: str) -> list[tuple[int, list]]:
    """One availableNow run of a query from `checkpoint`; returns [(batch id, [(partition, offset, value)])].

    The rows go to a parquet file sink beside the checkpoint (this run's are those it added), cut into the
    micro-batches by the query's progress reports. Not foreachBatch: its Python callback server select()s, which
    fails once this process holds 1024 descriptors."""
    path = checkpoint + "-rows"
    before = written_rows(spark, path)
    stream = (spark.readStream.format("fastmq").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for option, value in options.items():
        stream = stream.option(option, value)
    query = run_to_end(lambda: stream.load().select("partition", "offset", "value").writeStream.format("parquet")
                       .option("path", path).option("checkpointLocation", checkpoint)
                       .trigger(availableNow=True).start())
    rows = sorted((written_rows(spark, path) - before).elements())
    batches, start = [], 0
    for progress in query.recentProgress:
        if progress.numInputRows:
            batches.append((progress.batchId, rows[start:start + progress.numInputRows]))
            start += progress.numInputRows
    assert start == len(rows), f"{len(rows)} rows written, the progress reports count {start}"
    return batches


def test_restart_from_checkpoint_reads_every_record_once(spark, embedded_broker, tmp_path):
    servers = embedded_broker.bootstrap_servers
    topic = new_topic(servers, 2)
    produce(servers, topic, 0, 0, 70)
    produce(servers, topic, 1, 0, 30)
    checkpoint = str(tmp_path / "checkpoint")
    first = run_available_now(spark, servers, topic, checkpoint, maxOffsetsPerTrigger="40")
    assert all(len(rows) <= 40 for _, rows in first) and len(first) >= 3
    # More records, and a new partition, while the query is stopped.
    produce(servers, topic, 0, 70, 100)
    with Admin(servers) as admin:
        admin.create_partitions({topic: 3})
    produce(servers, topic, 2, 0, 25)
    second = run_available_now(spark, servers, topic, checkpoint, maxOffsetsPerTrigger="40")
    assert all(len(rows) <= 40 for _, rows in second)
    assert second[0][0] == first[-1][0] + 1                  # batch ids go on from the checkpoint
    read = [row for _, rows in first + second for row in rows]
    assert len(read) == len(set(read))                        # nothing twice
    expected = {(0, i, f"0-{i}") for i in range(100)} | {(1, i, f"1-{i}") for i in range(30)} | \
        {(2, i, f"2-{i}") for i in range(25)}
    assert set(read) == expected                              # nothing missed
    last = max(int(name.name) for name in (tmp_path / "checkpoint" / "offsets").iterdir() if name.name.isdigit())
    offsets = json.loads((tmp_path / "checkpoint" / "offsets" / str(last)).read_text().splitlines()[-1])
    assert offsets == {topic: {"0": 100, "1": 30, "2": 25}}  # Spark's Kafka source's shape


def test_records_deleted_under_the_query(spark, embedded_broker, tmp_path):
    servers = embedded_broker.bootstrap_servers
    topic = new_topic(servers, 1)
    produce(servers, topic, 0, 0, 20)
    checkpoint = str(tmp_path / "checkpoint")
    assert sum(len(rows) for _, rows in run_available_now(spark, servers, topic, checkpoint)) == 20
    produce(servers, topic, 0, 20, 60)
    with Admin(servers) as admin:
        admin.delete_records({TopicPartition(topic, 0): 45}, timeout=30)
    with pytest.raises(Exception, match=r"offsets \[20, 45\) were deleted"):
        run_available_now(spark, servers, topic, checkpoint)
    rows = [row for _, rows in run_available_now(spark, servers, topic, checkpoint, failOnDataLoss="false")
            for row in rows]
    assert sorted(offset for _, offset, _ in rows) == list(range(45, 60))
