"""RocketMQ clients against one Apache RocketMQ namesrv + broker (tests/support/rocketmq.py), in one run: fastmq vs
Apache RocketMQ's Java client (benches/java/RocketMQBench.java, compiled by this bench against the broker's own
jars and kept running, so that its JVM start is not measured). Each produces COUNT 100-byte messages sync, async
(at most 10000 in flight for both), oneway and in batches of 100, and consumes COUNT messages from the first
offset (fastmq's PullConsumer, Java's DefaultLitePullConsumer). Each row gives the client's CPU time per message
(all its threads); the broker's is not counted.

Run: pytest benches/bench_rocketmq.py --benchmark-only -s    (FASTMQ_BENCH_ROCKETMQ_COUNT=N for fewer messages)
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fastmq.rocketmq import Message, Producer, PullConsumer
from tests.support.rocketmq import RocketMQCluster, unique
from tests.support.servers import APACHE_ROCKETMQ

BODY = b"x" * 100
COUNT = int(os.environ.get("FASTMQ_BENCH_ROCKETMQ_COUNT", 1_000_000))
ASYNC_IN_FLIGHT = 10_000
BATCH = 100
JAVA_SOURCE = Path(__file__).parent / "java" / "RocketMQBench.java"
# Sync sends of a full-size run take far longer than the suite's per-test limit.
pytestmark = pytest.mark.timeout(4 * 3600)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with RocketMQCluster(tmp_path_factory.mktemp("bench-rocketmq"), heap="1g") as running:
        yield running


class JavaClient:
    """The Java bench program, started once; run() sends one command and waits for its answer."""

    def __init__(self, namesrv: str, directory: Path) -> None:
        classpath = APACHE_ROCKETMQ.classpath()
        subprocess.run(["javac", "-d", str(directory), "-cp", classpath, str(JAVA_SOURCE)], check=True)
        self.process = subprocess.Popen(
            ["java", "-Xmx1g", "-cp", f"{directory}:{classpath}", "RocketMQBench", namesrv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, mode: str, topic: str, count: int, group: str = "-") -> int:
        self.process.stdin.write(f"{mode} {topic} {count} {group}\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the Java bench program ended during {mode}")
            if line.startswith("done "):
                return int(line.split()[1])
            if line.startswith("error "):
                raise RuntimeError(f"the Java client failed {mode}: {line[6:].strip()}")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


@pytest.fixture(scope="module")
def java(cluster, tmp_path_factory):
    client = JavaClient(cluster.namesrv_addr, tmp_path_factory.mktemp("java-bench"))
    for attempt in range(3):          # its first route lookups may time out on a busy machine
        try:
            client.run("sync", unique("warm-java"), 1000)
            break
        except RuntimeError:
            if attempt == 2:
                raise
    yield client
    client.close()


@pytest.fixture(scope="module")
def producer(cluster):
    with Producer("fastmq-bench-producer", cluster.namesrv_addr, send_timeout=30.0) as p:
        p.send(Message(unique("warm-fastmq"), BODY))
        yield p


def fastmq_produce(producer: Producer, mode: str, topic: str, count: int) -> None:
    if mode == "sync":
        for _ in range(count):
            producer.send(Message(topic, BODY))
    elif mode == "async":
        in_flight = threading.Semaphore(ASYNC_IN_FLIGHT)
        release = lambda _future: in_flight.release()  # noqa: E731 - one callback object for every send
        send = producer.send_async
        for _ in range(count):
            in_flight.acquire()
            send(Message(topic, BODY)).add_done_callback(release)
        for _ in range(ASYNC_IN_FLIGHT):
            in_flight.acquire()
    elif mode == "oneway":
        for _ in range(count):
            producer.send_oneway(Message(topic, BODY))
        producer.send(Message(topic, BODY))
    elif mode == "batch":
        for start in range(0, count, BATCH):
            producer.send_batch([Message(topic, BODY) for _ in range(min(BATCH, count - start))])


def fastmq_consume(namesrv: str, topic: str, count: int) -> None:
    with PullConsumer(unique("bench-fastmq"), namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                      auto_commit=False) as consumer:
        consumer.subscribe(topic)
        seen = 0
        while seen < count:
            seen += len(consumer.poll(1.0))


def measured(bench, count: int, work, cpu_of=None) -> None:
    """One round of work(); records CPU time per message (this process's, or what cpu_of() reports)."""
    cpu = {}

    def round_() -> None:
        started = time.process_time()
        reported = work()
        cpu["ns"] = reported if cpu_of else (time.process_time() - started) * 1e9

    bench.pedantic(round_, rounds=1, iterations=1)
    bench.extra_info["cpu_per_record_ns"] = round(cpu["ns"] / count)


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
@pytest.mark.parametrize("impl", ["fastmq", "java"])
def test_produce_100_bytes(compare, cluster, producer, java, impl, mode):
    topic = unique(f"bench-{mode}-{impl}")
    bench = compare(f"rocketmq produce 100 B, {mode}", impl, items=COUNT, nbytes=COUNT * len(BODY))
    if impl == "java":
        measured(bench, COUNT, lambda: java.run(mode, topic, COUNT), cpu_of=True)
    else:
        measured(bench, COUNT, lambda: fastmq_produce(producer, mode, topic, COUNT))


@pytest.fixture(scope="module")
def loaded(producer):
    topic = unique("bench-consume")
    fastmq_produce(producer, "batch", topic, COUNT)
    return topic


@pytest.mark.parametrize("impl", ["fastmq", "java"])
def test_consume_100_bytes(compare, cluster, java, loaded, impl):
    bench = compare("rocketmq consume 100 B", impl, items=COUNT, nbytes=COUNT * len(BODY))
    if impl == "java":
        measured(bench, COUNT, lambda: java.run("consume", loaded, COUNT, unique("bench-java")), cpu_of=True)
    else:
        measured(bench, COUNT, lambda: fastmq_consume(cluster.namesrv_addr, loaded, COUNT))
