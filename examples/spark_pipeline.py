"""A Spark Structured Streaming pipeline on fastmq, in one command:

    python examples/spark_pipeline.py          (needs: pip install -e ".[spark]", Java 17)

It starts fastmq's embedded Kafka broker, produces a stream of click/view/buy events (one every 100 ms of event
time, stamped with that time), and runs a streaming query on local[2] that reads them with format("fastmq"),
counts events per action in 10-second event-time windows with a 10-second watermark, and writes each closed
window's counts back to a topic with format("fastmq"). A consumer then prints the results.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import Admin, Consumer, Producer, TopicPartition
from fastmq.kafka.admin import NewTopic

EVENTS, RESULTS = "events", "window-counts"
START_MS = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
ACTIONS = ("click", "view", "buy")


def produce_events(servers: str, count: int = 600) -> None:
    """count events 100 ms apart in event time, then one event 30 s later that moves the watermark past them."""
    with Producer(servers, linger_ms=5) as producer:
        for i in range(count):
            event = {"user": f"u{i % 7}", "action": ACTIONS[i % 3]}
            producer.send(EVENTS, json.dumps(event).encode(), key=event["user"].encode(),
                          timestamp_ms=START_MS + i * 100)
        producer.send(EVENTS, b'{"user": "u0", "action": "end"}', timestamp_ms=START_MS + count * 100 + 30_000)
        producer.flush(30)


def create_topics(servers: str) -> None:
    with Admin(servers) as admin:
        admin.create_topics([NewTopic(EVENTS, 2, 1), NewTopic(RESULTS, 1, 1)])
        admin.wait_for_topics([EVENTS, RESULTS], timeout=30)


def start_query(spark, servers: str, checkpoint: str):
    """The streaming job: events -> windowed counts per action -> RESULTS, until the events there now are read."""
    from pyspark.sql.functions import window

    events = (spark.readStream.format("fastmq").option("kafka.bootstrap.servers", servers)
              .option("subscribe", EVENTS).option("startingOffsets", "earliest").load())
    counts = (events.selectExpr("timestamp", "get_json_object(CAST(value AS STRING), '$.action') AS action")
              .withWatermark("timestamp", "10 seconds")
              .groupBy(window("timestamp", "10 seconds"), "action")
              .count())
    results = counts.selectExpr(
        "CAST(date_format(window.start, 'HH:mm:ss') AS STRING) AS key",
        "to_json(named_struct('window', date_format(window.start, 'HH:mm:ss'), 'action', action, "
        "'count', count)) AS value")
    return (results.writeStream.format("fastmq").option("kafka.bootstrap.servers", servers)
            .option("topic", RESULTS).option("checkpointLocation", checkpoint).outputMode("append")
            .trigger(availableNow=True).start())


def read_results(servers: str) -> list[str]:
    """The results topic as lines 'window 00:00:00  buy=33 click=34 view=33', in window order."""
    windows: dict[str, dict[str, int]] = {}
    with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
        # Read up to the end offsets the query left, not until the topic is quiet for a while: a busy machine
        # can take longer than any such pause to hand over the first records.
        partitions = [TopicPartition(RESULTS, p) for p in sorted(consumer.partitions_for_topic(RESULTS) or ())]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the results topic was not read to its end offsets {ends} in 60 s")
            for records in consumer.poll(0.5).values():
                for record in records:
                    result = json.loads(record.value)
                    windows.setdefault(result["window"], {})[result["action"]] = result["count"]
    return [f"window {start}  " + " ".join(f"{a}={n}" for a, n in sorted(counts.items()))
            for start, counts in sorted(windows.items())]


def run(spark, servers: str, checkpoint: str) -> list[str]:
    create_topics(servers)
    produce_events(servers)
    start_query(spark, servers, checkpoint).awaitTermination()
    return read_results(servers)


def main() -> None:
    # Spark's Python workers must run this interpreter (it has fastmq and pyarrow), not python3 from PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import fastmq.spark

    with tempfile.TemporaryDirectory(prefix="fastmq-spark-") as work, EmbeddedBroker(os.path.join(work, "broker")) \
            as broker:
        spark = (SparkSession.builder.master("local[2]").appName("fastmq-pipeline")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            fastmq.spark.register(spark)
            print(f"broker on {broker.bootstrap_servers}; events -> Spark (10 s windows, 10 s watermark) -> "
                  f"{RESULTS}")
            for line in run(spark, broker.bootstrap_servers, os.path.join(work, "checkpoint")):
                print(line)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
