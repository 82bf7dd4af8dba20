"""`fastmq consume` and `fastmq bench consume` against a real broker (Tansu)."""
from __future__ import annotations

import uuid

import confluent_kafka

from fastmq.cli.consume import Formatter
from fastmq.kafka.structs import ConsumerRecord
from tests.support.cli import run_fastmq

WAIT = 20.0


def produce(servers: str, topic: str, count: int, partition: int = 0) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": servers})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, key=b"k%d" % i, partition=partition,
                         headers=[("h", b"%d" % i)], timestamp=1_700_000_000_000 + i)
    assert producer.flush(WAIT) == 0


def test_formatter_tokens_and_escapes():
    record = ConsumerRecord("t", 2, 0, 41, 1_700_000_000_000, 0, b"key", b"value", (("a", b"1"), ("b", None)),
                            None, 3, 5, 3)
    assert Formatter("%t/%p/%o %k=%s %S %K %T [%h] 100%%\\n").format(record) == \
        b"t/2/41 key=value 5 3 1700000000000 [a=1,b=] 100%\n"
    assert Formatter("%R%s").format(record) == b"\x00\x00\x00\x05value"
    null = record._replace(key=None, value=None, serialized_value_size=-1)
    assert Formatter("[%k][%s]").format(null) == b"[][]"


def test_consume_from_an_offset_with_a_count_and_a_format(kafka_broker):
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    produce(kafka_broker.bootstrap_servers, topic, 10)
    result = run_fastmq("consume", "-b", kafka_broker.bootstrap_servers, "-t", topic, "-p", "0", "-o", "3", "-c", "4",
                        "-f", "%o:%k:%s\\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines() == [f"{i}:k{i}:value-{i}" for i in range(3, 7)]


def test_consume_exits_at_the_end_of_every_partition(kafka_broker):
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    produce(kafka_broker.bootstrap_servers, topic, 3, partition=0)
    produce(kafka_broker.bootstrap_servers, topic, 2, partition=2)
    result = run_fastmq("consume", "-b", kafka_broker.bootstrap_servers, "-t", topic, "-e", "-f", "%p %s\\n")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.decode().splitlines()) == sorted(
        [f"0 value-{i}" for i in range(3)] + [f"2 value-{i}" for i in range(2)])


def test_consume_as_a_group_member_commits(kafka_broker):
    topic, group = f"cli-{uuid.uuid4().hex[:8]}", f"cli-group-{uuid.uuid4().hex[:8]}"
    produce(kafka_broker.bootstrap_servers, topic, 5)
    options = ["-b", kafka_broker.bootstrap_servers, "-t", topic, "-g", group, "-X", "session_timeout_ms=6000"]
    first = run_fastmq("consume", *options, "-c", "5")
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().splitlines() == [f"value-{i}" for i in range(5)]
    produce(kafka_broker.bootstrap_servers, topic, 1)
    second = run_fastmq("consume", *options, "-c", "1")
    assert second.stdout.decode().splitlines() == ["value-0"]           # only the new record


def test_bench_consume_prints_a_summary(kafka_broker):
    result = run_fastmq("bench", "consume", "-b", kafka_broker.bootstrap_servers, "--records", "20000", "-q",
                        "--latency-seconds", "1", "--latency-rate", "1000")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0].split()[:3] == ["stage", "msgs/s", "MB/s"]
    assert lines[2].startswith("consume") and lines[3].startswith("end-to-end")
