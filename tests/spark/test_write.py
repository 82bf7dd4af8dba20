"""Writes with format("fastmq"): batch and streaming writes read back exactly; a failed and retried task
duplicates at most its own records (at-least-once)."""
from __future__ import annotations

from collections import Counter

import pytest

from fastmq.kafka import Producer
from tests.spark.conftest import new_topic, reader, run_to_end


def read_values(spark, servers: str, topic: str) -> list:
    return [(r.partition, r.key, r.value, None if r.headers is None else [(h.key, h.value) for h in r.headers])
            for r in reader(spark, servers, topic, includeHeaders="true").collect()]


def test_batch_write_reads_back_exactly(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topic = new_topic(servers, 3)
    df = spark.range(0, 600, numPartitions=2).selectExpr(
        "IF(id % 5 = 0, NULL, CAST(id AS STRING)) AS key", "CAST(concat('v', id) AS BINARY) AS value", "id AS other")
    df.write.format("fastmq").option("kafka.bootstrap.servers", servers).option("topic", topic) \
        .mode("append").save()
    got = read_values(spark, servers, topic)
    assert sorted((v, k) for _, k, v, _ in got) == sorted(
        (f"v{i}".encode(), None if i % 5 == 0 else str(i).encode()) for i in range(600))


def test_batch_write_with_topic_partition_and_headers_columns(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topics = [new_topic(servers, 2), new_topic(servers, 2)]
    df = spark.range(0, 40, numPartitions=2).selectExpr(
        f"IF(id % 2 = 0, '{topics[0]}', '{topics[1]}') AS topic", "CAST(id % 2 AS INT) AS partition",
        "CAST(id AS STRING) AS value",
        "IF(id % 4 = 0, NULL, array(named_struct('key', 'n', 'value', CAST(CAST(id AS STRING) AS BINARY)))) AS headers")
    df.write.format("fastmq").option("kafka.bootstrap.servers", servers).mode("append").save()
    for index, topic in enumerate(topics):
        got = read_values(spark, servers, topic)
        assert sorted(got, key=lambda row: int(row[2])) == [
            (index, None, str(i).encode(), None if i % 4 == 0 else [("n", str(i).encode())])
            for i in range(index, 40, 2)]


def test_bad_write_columns_are_refused_at_analysis(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    with pytest.raises(Exception, match="needs a value column"):
        spark.range(3).selectExpr("CAST(id AS STRING) AS key").write.format("fastmq") \
            .option("kafka.bootstrap.servers", servers).option("topic", "x").mode("append").save()
    with pytest.raises(Exception, match="column 'partition' is bigint"):
        spark.range(3).selectExpr("CAST(id AS STRING) AS value", "id AS partition").write.format("fastmq") \
            .option("kafka.bootstrap.servers", servers).option("topic", "x").mode("append").save()
    with pytest.raises(Exception, match="no topic to write to"):
        spark.range(3).selectExpr("CAST(id AS STRING) AS value").write.format("fastmq") \
            .option("kafka.bootstrap.servers", servers).mode("append").save()


def test_failed_task_retried_duplicates_at_most_its_records(spark, embedded_broker):
    servers = embedded_broker.bootstrap_servers
    topic = new_topic(servers, 1)

    def fail_first_attempt(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        for index, batch in enumerate(batches):
            if index == 1 and context.partitionId() == 0 and context.attemptNumber() == 0:
                raise RuntimeError("the first attempt of task 0 fails after its first batch")
            yield batch

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        df = spark.range(0, 400, numPartitions=2).selectExpr("CAST(id AS STRING) AS value") \
            .mapInArrow(fail_first_attempt, "value string")
        df.write.format("fastmq").option("kafka.bootstrap.servers", servers).option("topic", topic) \
            .mode("append").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    counts = Counter(int(v) for _, _, v, _ in read_values(spark, servers, topic))
    assert set(counts) == set(range(400))                  # nothing lost
    twice = {v for v, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2 and twice <= set(range(200))   # only task 0's records, at most once more


def test_streaming_write_reads_back_exactly(spark, embedded_broker, tmp_path):
    servers = embedded_broker.bootstrap_servers
    source, sink = new_topic(servers, 2), new_topic(servers, 2)
    with Producer(servers) as producer:
        for p in range(2):
            producer.send_many(source, [f"{p}:{i}".encode() for i in range(150)], partition=p).get(30)
    run_to_end(lambda: spark.readStream.format("fastmq").option("kafka.bootstrap.servers", servers)
             .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100")
             .load().selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("fastmq").option("kafka.bootstrap.servers", servers).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    got = sorted(v.decode() for _, _, v, _ in read_values(spark, servers, sink))
    assert got == sorted(f"{p}:{i}".upper() for p in range(2) for i in range(150))
