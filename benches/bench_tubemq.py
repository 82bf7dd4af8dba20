"""fastmq's TubeMQ client against the Apache InLong TubeMQ Java client (tubemq-client 1.13.0,
tests/tubemq_java/TubeMQPeer.java), in one run and against the same master + broker: the embedded broker in its
own process (`fastmq broker --tubemq-master --tubemq-broker`, topics of 4 partitions).

Produce: MESSAGES x 100 B, asynchronous sends (the Java peer keeps 2000 in flight; fastmq sends them all and
waits for the last), after registration and one warm-up send. Consume: the same count from the first offset with a
pull consumer confirming each batch, timed from the first batch. Each side times itself (the JVM's start and the
registrations are not counted); the best of ROUNDS rounds is printed, and the median of them goes to the
side-by-side tables (benches/conftest.py's self_timed).

Run: pytest benches/bench_tubemq.py -s  (BENCH_TUBEMQ_MESSAGES=20000 for a short run)
"""
from __future__ import annotations

import os
import statistics
import time
import uuid

import pytest

from fastmq.broker import BrokerProcess
from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.servers import free_port
from tests.support.tubemq import run_java_peer

MESSAGES = int(os.environ.get("BENCH_TUBEMQ_MESSAGES", "50000"))
ROUNDS = int(os.environ.get("BENCH_TUBEMQ_ROUNDS", "3"))
BODY = b"x" * 100


@pytest.fixture(scope="module")
def master():
    master_port, broker_port = free_port(), free_port()
    process = BrokerProcess(args=["--tubemq-master", f"127.0.0.1:{master_port}", "--tubemq-broker",
                                  f"127.0.0.1:{broker_port}", "--partitions", "4"]).start()
    try:
        yield f"127.0.0.1:{master_port}"
    finally:
        process.close()


def fastmq_produce(master: str, topic: str) -> float:
    with Producer(master) as producer:
        producer.publish(topic)
        producer.send(Message(topic, BODY))
        started = time.perf_counter()
        futures = [producer.send_async(Message(topic, BODY)) for _ in range(MESSAGES)]
        for future in futures:
            future.result(120)
        return time.perf_counter() - started


def fastmq_consume(master: str, topic: str) -> float:
    with PullConsumer(master, f"g-{uuid.uuid4().hex[:8]}", [topic], heartbeat_interval=0.5,
                      empty_backoff=0.02) as consumer:
        received, started = 0, None
        deadline = time.monotonic() + 300
        while received < MESSAGES and time.monotonic() < deadline:
            result = consumer.get_message(timeout=30)
            started = started or time.perf_counter()
            received += len(result.messages)
            consumer.confirm(result)
        assert received >= MESSAGES, f"consumed {received} of {MESSAGES}"
        return time.perf_counter() - started


def java_time(*args: str) -> float:
    done = run_java_peer(*args, timeout=600)[-1].split()
    assert int(done[1]) >= MESSAGES, done
    return int(done[2]) / 1000


def report(what: str, fastmq_s: float, java_s: float) -> None:
    print(f"\nbench tubemq {what} {MESSAGES} x 100 B: fastmq {MESSAGES / fastmq_s:,.0f} msg/s, "
          f"java {MESSAGES / java_s:,.0f} msg/s, fastmq x{java_s / fastmq_s:.2f}")


def test_produce_and_consume(master, self_timed):
    produced, consumed = {"fastmq": [], "java": []}, {"fastmq": [], "java": []}
    for _ in range(ROUNDS):
        ours, theirs = f"b-py-{uuid.uuid4().hex[:6]}", f"b-java-{uuid.uuid4().hex[:6]}"
        produced["fastmq"].append(fastmq_produce(master, ours))
        produced["java"].append(java_time("produce", master, theirs, str(MESSAGES), "100", "async"))
        consumed["fastmq"].append(fastmq_consume(master, theirs))
        consumed["java"].append(java_time("consume", master, ours, f"g-{uuid.uuid4().hex[:8]}", str(MESSAGES), "1"))
    report("produce", min(produced["fastmq"]), min(produced["java"]))
    report("consume", min(consumed["fastmq"]), min(consumed["java"]))
    for what, times in (("produce, async", produced), ("consume", consumed)):
        for impl, seconds in times.items():
            self_timed(f"tubemq {what} 100 B", impl, statistics.median(seconds), items=MESSAGES,
                       nbytes=MESSAGES * len(BODY))
