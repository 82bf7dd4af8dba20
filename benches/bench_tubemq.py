"""fastmq's TubeMQ client against the Apache InLong TubeMQ Java client (tubemq-client 1.13.0,
tests/tubemq_java/TubeMQPeer.java), in one run and against the same master + broker: the embedded broker in its
own process (`fastmq broker --tubemq-master --tubemq-broker`, topics of 4 partitions).

Produce: MESSAGES x 100 B, asynchronous sends (the Java peer keeps 2000 in flight; fastmq sends them all and
waits for the last), after registration and one warm-up send. Consume: the same count from the first offset with a
pull consumer confirming each batch, timed from the first batch. Each side times itself (the JVM's start and the
registrations are not counted); the best of ROUNDS rounds is compared, with each client's CPU time per message
in that round (fastmq: this process's CPU time, its client threads only; Java: the JVM's, which it reports).

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


def fastmq_produce(master: str, topic: str) -> tuple[float, float]:
    """(seconds, CPU seconds)"""
    with Producer(master) as producer:
        producer.publish(topic)
        producer.send(Message(topic, BODY))
        started, cpu = time.perf_counter(), time.process_time()
        futures = [producer.send_async(Message(topic, BODY)) for _ in range(MESSAGES)]
        for future in futures:
            future.result(120)
        return time.perf_counter() - started, time.process_time() - cpu


def fastmq_consume(master: str, topic: str) -> tuple[float, float]:
    with PullConsumer(master, f"g-{uuid.uuid4().hex[:8]}", [topic], heartbeat_interval=0.5,
                      empty_backoff=0.02) as consumer:
        received, started, cpu = 0, None, 0.0
        deadline = time.monotonic() + 300
        while received < MESSAGES and time.monotonic() < deadline:
            result = consumer.get_message(timeout=30)
            if started is None:
                started, cpu = time.perf_counter(), time.process_time()
            received += len(result.messages)
            consumer.confirm(result)
        assert received >= MESSAGES, f"consumed {received} of {MESSAGES}"
        return time.perf_counter() - started, time.process_time() - cpu


def java_time(*args: str) -> tuple[float, float]:
    """(seconds, CPU seconds) the Java peer reports"""
    done = run_java_peer(*args, timeout=600)[-1].split()
    assert int(done[1]) >= MESSAGES, done
    return int(done[2]) / 1000, int(done[3]) / 1e6


def report(what: str, fastmq: tuple[float, float], java: tuple[float, float]) -> None:
    """Each side's best round (fastest), with that round's CPU time per message."""
    print(f"\nbench tubemq {what} {MESSAGES} x 100 B: fastmq {MESSAGES / fastmq[0]:,.0f} msg/s "
          f"({fastmq[1] / MESSAGES * 1e6:.1f} us CPU/msg), java {MESSAGES / java[0]:,.0f} msg/s "
          f"({java[1] / MESSAGES * 1e6:.1f} us CPU/msg), fastmq x{java[0] / fastmq[0]:.2f} "
          f"(CPU x{java[1] / fastmq[1]:.2f})")


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
        for impl, rounds in times.items():
            self_timed(f"tubemq {what} 100 B", impl, statistics.median(wall for wall, _cpu in rounds), items=MESSAGES,
                       nbytes=MESSAGES * len(BODY),
                       cpu_per_record_ns=statistics.median(cpu for _wall, cpu in rounds) / MESSAGES * 1e9)
