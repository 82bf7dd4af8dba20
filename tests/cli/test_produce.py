"""`fastmq produce` and `fastmq bench produce` against a real broker."""
from __future__ import annotations

import uuid

from kafka import KafkaConsumer, TopicPartition

from tests.support.cli import run_fastmq


def read_all(servers: str, topic: str, count: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=servers, consumer_timeout_ms=2000, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records = []
        for _ in range(20):
            for batch in consumer.poll(500).values():
                records += batch
            if len(records) >= count:
                break
        return records
    finally:
        consumer.close()


def test_produce_lines_with_keys_and_headers(kafka_broker, tmp_path):
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "lines.txt"
    source.write_bytes(b"k1:one\nk2:two\nno-key-here\n")
    result = run_fastmq("produce", "-b", kafka_broker.bootstrap_servers, "-t", topic, "-K", ":", "-H", "origin=cli",
                        "-z", "lz4", "-p", "0", str(source))
    assert result.returncode == 0, result.stderr
    records = read_all(kafka_broker.bootstrap_servers, topic, 3)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k1", b"one", [("origin", b"cli")]), (b"k2", b"two", [("origin", b"cli")]),
        (None, b"no-key-here", [("origin", b"cli")])]


def test_produce_from_stdin(kafka_broker):
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    result = run_fastmq("produce", "-b", kafka_broker.bootstrap_servers, "-t", topic, "-p", "1", stdin=b"a\nb\n")
    assert result.returncode == 0, result.stderr
    assert [r.value for r in read_all(kafka_broker.bootstrap_servers, topic, 2)] == [b"a", b"b"]


def test_produce_reports_failures(kafka_broker):
    result = run_fastmq("produce", "-b", kafka_broker.bootstrap_servers, "-t", "x", "-X", "not_an_option=1",
                        stdin=b"a\n")
    assert result.returncode != 0 and b"not_an_option" in result.stderr


def test_bench_produce_prints_a_summary(kafka_broker):
    result = run_fastmq("bench", "produce", "-b", kafka_broker.bootstrap_servers, "--records", "20000", "-q")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0].split() == ["stage", "msgs/s", "MB/s", "p50", "ms", "p99", "ms"]
    assert lines[3].startswith("produce (acknowledged)")
