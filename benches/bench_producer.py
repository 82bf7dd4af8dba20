"""Producer throughput against one broker, Tansu and then Apache Kafka (one KRaft node), in one run: fastmq (and
its kafka-python face) vs confluent-kafka vs aiokafka vs kafka-python (1 partition, acks=1, linger 10 ms, batch
256 KiB), 100-byte values without compression and with lz4, and 1 KiB values against the loopback TCP bandwidth
measured in the same run. Each row also gives the process's CPU time per record, and the broker's (broker_cpu:
the broker process tree's CPU time per record over the client's run).

Every client has the same buffer memory, 32 MiB (the Java client's and kafka-python's default; librdkafka's
queue.buffering.max.kbytes): with more, a producer that outruns the broker writes each byte of the excess into a
freshly faulted page (about 0.3 us per KiB), and a run of 500 MB is mostly that warm-up, not the steady state.

Run: pytest benches/bench_producer.py --benchmark-only -s  (-k apache: Apache Kafka only)
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
import uuid

import pytest

from benches.bench_partitions import warm_requests
from benches.process_cpu import JIT_THREADS, threads_cpu_seconds, tree_cpu_seconds, warm_until_compiled

PROTOCOL = "kafka"
SMALL = b"x" * 100
LARGE = b"y" * 1024
MEMORY = 32 << 20           # buffer memory of every client (see the module docstring)
# Records per client: the slow clients get fewer so the run stays short; rates are per record.
COUNTS = {"fastmq": 1_000_000, "fastmq.compat": 1_000_000, "confluent-kafka": 1_000_000, "aiokafka": 300_000, "kafka-python": 100_000}


def produce_fastmq(servers, topic, value, count, codec, compat=False):
    """fastmq's Producer, or with compat its kafka-python face (KafkaProducer); both with 32 MiB of buffer memory."""
    from fastmq.kafka import Producer
    from fastmq.kafka.compat import KafkaProducer

    options = dict(bootstrap_servers=servers, linger_ms=10, batch_size=262144, acks=1, enable_idempotence=False,
                   compression_type=codec)
    with KafkaProducer(**options) if compat else Producer(buffer_memory=MEMORY, **options) as producer:
        send = producer.send
        for _ in range(count):
            send(topic, value, partition=0)
        producer.flush(300)


def produce_confluent(servers, topic, value, count, codec):
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": servers, "linger.ms": 10, "batch.size": 262144, "acks": 1,
        "compression.type": codec or "none", "queue.buffering.max.kbytes": MEMORY >> 10})
    produce, poll = producer.produce, producer.poll
    for _ in range(count):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                poll(0.001)
    assert producer.flush(300) == 0


def produce_aiokafka(servers, topic, value, count, codec):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=servers, linger_ms=10, max_batch_size=262144, acks=1,
                                    compression_type=codec)
        await producer.start()
        try:
            send = producer.send
            for _ in range(count):
                await send(topic, value, partition=0)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


def produce_kafka_python(servers, topic, value, count, codec):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=10, batch_size=262144, acks=1,
                             compression_type=codec)
    send = producer.send
    for _ in range(count):
        send(topic, value, partition=0)
    producer.flush(300)
    producer.close()


CLIENTS = {"fastmq": produce_fastmq, "fastmq.compat": functools.partial(produce_fastmq, compat=True),
           "confluent-kafka": produce_confluent, "aiokafka": produce_aiokafka,
           "kafka-python": produce_kafka_python}


def broker_pid(broker) -> int:
    return broker.server.pid if hasattr(broker, "server") else broker.nodes[0].process.pid     # Tansu, Apache


@contextlib.contextmanager
def broker_cpu(bench, broker, count: int):
    """Puts the broker process's CPU time per record over the block in the row (broker_cpu): when the broker
    bounds the rate, a client whose requests cost it less is the faster one (Apache Kafka, 1 KiB: 2.7-3.6 ns of
    its CPU a byte for fastmq's and confluent-kafka's requests alike), and the part of it that a JVM broker's
    compiler threads took (broker_jit), which belongs to no client."""
    pid = broker_pid(broker)
    started, jit = tree_cpu_seconds(pid), threads_cpu_seconds(pid, JIT_THREADS)
    yield
    bench.extra_info["broker_cpu_ns"] = round((tree_cpu_seconds(pid) - started) / count * 1e9)
    bench.extra_info["broker_jit_ns"] = round((threads_cpu_seconds(pid, JIT_THREADS) - jit) / count * 1e9)


@pytest.fixture(scope="module", autouse=True)
def warm_broker(kafka_broker):
    """500 MB through the broker from each of fastmq and confluent-kafka before the first measured client: a JVM
    broker compiles its produce path and grows its page cache on the first load, and without this the client
    that happens to run first pays for it (Apache Kafka with both of HotSpot's compilers, 1 KiB: after 100 MB
    from fastmq alone, or from each of the two, the first measured client's requests cost the broker 4,340-4,720
    ns a record against 2,720-2,880 for the clients after it, whichever client ran first; after 500 MB from each,
    3,160-3,300 against 2,940-3,780); and after 500 MB from each, its compilers still took 740-1,260 ns of CPU
    a record in the measured runs, so the rounds go on until they are done."""
    topics = {client: f"bench-warm-{uuid.uuid4().hex[:6]}" for client in ("fastmq", "confluent-kafka")}

    def warm_round() -> None:
        for client, topic in topics.items():
            CLIENTS[client](kafka_broker.bootstrap_servers, topic, LARGE, 500_000, None)
        warm_requests(kafka_broker.bootstrap_servers, topics["fastmq"])     # many small requests

    # Apache Kafka: until its compilers are done; Tansu (no JVM): one round
    warm_until_compiled(broker_pid(kafka_broker), warm_round, rounds=4)    # 1 GB a round


@pytest.mark.parametrize("codec", [None, "lz4"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_produce_100_bytes(compare, kafka_broker, client, codec):
    broker = kafka_broker
    count = COUNTS[client]
    topic = f"bench-{client}-{codec}-{uuid.uuid4().hex[:6]}"
    CLIENTS[client](broker.bootstrap_servers, topic, b"w", 1, codec)     # create the topic, warm up
    bench = compare(f"{broker.name}: produce 100 B, acks=1, {codec or 'no compression'}", client, items=count,
                    nbytes=count * len(SMALL))
    with broker_cpu(bench, broker, count):
        bench.pedantic(CLIENTS[client], args=(broker.bootstrap_servers, topic, SMALL, count, codec), rounds=1,
                       iterations=1)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_produce_1_kib(compare, kafka_broker, client):
    broker = kafka_broker
    count = COUNTS[client] // 2
    topic = f"bench-large-{client}-{uuid.uuid4().hex[:6]}"
    CLIENTS[client](broker.bootstrap_servers, topic, b"w", 1, None)
    bench = compare(f"{broker.name}: produce 1 KiB, acks=1 (vs loopback TCP)", client, items=count,
                    nbytes=count * len(LARGE))
    with broker_cpu(bench, broker, count):
        bench.pedantic(CLIENTS[client], args=(broker.bootstrap_servers, topic, LARGE, count, None), rounds=1,
                       iterations=1)


def test_loopback_tcp_bandwidth(compare, kafka_broker):
    """The ceiling for the 1 KiB case: one sender and one receiver thread over 127.0.0.1."""
    total = 2 << 30
    chunk = b"z" * (1 << 20)

    def pump():
        server = socket.create_server(("127.0.0.1", 0))
        received = [0]

        def receive():
            conn, _ = server.accept()
            buffer = bytearray(1 << 20)
            with conn:
                while received[0] < total:
                    n = conn.recv_into(buffer)
                    if not n:
                        break
                    received[0] += n

        reader = threading.Thread(target=receive)
        reader.start()
        with socket.create_connection(server.getsockname()) as sender:
            for _ in range(total // len(chunk)):
                sender.sendall(chunk)
        reader.join(60)
        server.close()
        assert received[0] == total

    bench = compare(f"{kafka_broker.name}: produce 1 KiB, acks=1 (vs loopback TCP)", "loopback TCP", nbytes=total)
    bench.pedantic(pump, rounds=1, iterations=1)
