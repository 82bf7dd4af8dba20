"""The embedded broker against Tansu, in one run and with the same client (fastmq's producer and consumer):
1M x 100 B records, one partition, acks=1, linger 10 ms, batches of 256 KiB; then the same records consumed from
the beginning; three rounds each (the consume after one warm-up round, which is slow on both brokers), medians
compared. Each broker runs in its own process (`fastmq broker` on a
temporary directory, Tansu with its memory storage), so that neither shares the client's interpreter. The table
at the end gives fastmq's ratio.

Run: pytest benches/bench_broker.py --benchmark-only -s
"""
from __future__ import annotations

import time
import uuid

import pytest

from fastmq.broker import BrokerProcess
from tests.support.tansu import start_tansu

PROTOCOL = "kafka"
RECORDS = 1_000_000
VALUE = b"x" * 100
PRODUCER = dict(linger_ms=10, batch_size=262144, acks=1, enable_idempotence=False, buffer_memory=256 << 20)


@pytest.fixture(scope="module")
def brokers():
    embedded = BrokerProcess().start()
    tansu = start_tansu()
    try:
        yield {"fastmq-broker": embedded.bootstrap_servers, "tansu": tansu.bootstrap_servers}
    finally:
        embedded.close()
        tansu.stop()


def produce(servers: str, topic: str, count: int) -> None:
    from fastmq.kafka import Producer

    with Producer(servers, **PRODUCER) as producer:
        send = producer.send
        for _ in range(count):
            send(topic, VALUE, partition=0)
        producer.flush(300)


def consume(servers: str, topic: str, count: int) -> None:
    from fastmq.kafka import Consumer, TopicPartition

    with Consumer(bootstrap_servers=servers, max_partition_fetch_bytes=4 << 20, fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        received = 0
        deadline = time.monotonic() + 300
        while received < count and time.monotonic() < deadline:
            received += len(consumer.consume(100_000, 1.0))
    assert received == count, f"consumed {received} of {count}"


@pytest.mark.parametrize("broker", ["fastmq-broker", "tansu"])
def test_produce(compare, brokers, broker):
    servers = brokers[broker]
    topic = f"bench-produce-{uuid.uuid4().hex[:6]}"
    produce(servers, topic, 1)                      # create the topic, connect, warm up
    bench = compare("broker: produce 1M x 100 B, acks=1 (fastmq producer)", broker, items=RECORDS,
                    nbytes=RECORDS * len(VALUE))
    bench.pedantic(produce, args=(servers, topic, RECORDS), rounds=3, iterations=1)


@pytest.mark.parametrize("broker", ["fastmq-broker", "tansu"])
def test_consume(compare, brokers, broker):
    servers = brokers[broker]
    topic = f"bench-consume-{uuid.uuid4().hex[:6]}"
    produce(servers, topic, RECORDS)
    bench = compare("broker: consume 1M x 100 B from the start (fastmq consumer)", broker, items=RECORDS,
                    nbytes=RECORDS * len(VALUE))
    bench.pedantic(consume, args=(servers, topic, RECORDS), rounds=3, iterations=1, warmup_rounds=1)
