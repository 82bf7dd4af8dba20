"""Producer throughput against one broker, Tansu and then Apache Kafka (one KRaft node), in one run: fastmq (and
its kafka-python face) vs confluent-kafka vs aiokafka vs kafka-python (1 partition, acks=1, linger 10 ms, batch
256 KiB), 100-byte values without compression and with lz4, and 1 KiB values against the loopback TCP bandwidth
measured in the same run. Each row also gives the process's CPU time per record, and the broker's (broker_cpu:
the broker process tree's CPU time per record over the client's run).

Every client has the same buffer memory, 32 MiB (the Java client's and kafka-python's default; librdkafka's
queue.buffering.max.kbytes): with more, a producer that outruns the broker writes each byte of the excess into a
freshly faulted page (about 0.3 us per KiB), and a run of 500 MB is mostly that warm-up, not the steady state.

The 1 KiB row also runs a floor (produce_floor): the same requests pre-encoded on a blocking socket, a client of
almost no CPU; its rate over confluent-kafka's shows what the broker gives such a client. It is no bound: fastmq
went x1.03-x1.12 over it in one run.

The 1 KiB row runs every client ROUNDS_1_KIB times, in alternating order (fastmq first, then last, ...), and gives
each client's medians; each run's topic is deleted after it (the warm-up's after the warm-up), and the broker drops
a deleted topic's files at once (benches/apache_broker.py), so that every run writes into page cache the run before
it freed. Why, measured against Apache Kafka (500k records of 1 KiB a run, fastmq and confluent-kafka alternating,
two cores loaded by other sessions): the broker serves a connection's requests one at a time and its append copies
each 256 KiB request into the page cache. With every run's topic kept, each run wrote into pages not used before,
which this VM's host backs only when first touched: the request handlers took 1,560-2,980 ns of system time a
record and the append (localTime in its request log) 0.60-0.87 ms a request (medians), for both clients' requests
(six runs); with each topic deleted before the next run, 340-560 ns and 0.12-0.18 ms (30 runs), and the broker's
CPU a record (its compilers left out) fell from 3,040-4,820 to 1,380-2,840 ns. Which client met fresh pages, and
how many, followed the machine's history and decided the row by as much as the clients' difference (x1.03-x1.44
in four stops; here the old bench gave x2.21 once, fastmq's run reusing pages at 1,440 ns of broker CPU a record
and confluent-kafka's meeting fresh ones at 3,280, and x0.68 in the next, the other way round: 2,880 against 2,280).

What sets each client's rate, in the runs with deleted topics: both send one 256 KiB batch a request (1,977-1,990
requests for 500k records). The broker's own turn on a request (queued for a handler, append, queued for the
network thread, response sent) took 0.17-0.31 ms (medians), but one came only every 0.6-4.4 ms: the rest is the
network thread reading it and waiting, for a CPU (its run-queue wait was 0.2-4.7 us a record on this loaded
machine) or for the client. The broker's receive queue on the client's connection, sampled from /proc/net/tcp6
during the runs (~30 samples a second, eight runs each): fastmq's held requests in 62% of the samples (mostly
1.0-1.2 MiB: four whole requests, its five in flight less the one being served) and was empty in 38%;
confluent-kafka's was empty in 65% and came in bursts (2.5 MiB or more in 18%). Ten requests in flight instead of
five left fastmq's share of empty samples as it was (37%, four runs) and its rate within the noise (median 289k
against 267k records/s): when the queue ran dry the client was behind (a process short of CPU on the loaded
machine), not out of window. CPU a record: fastmq 810-1,000 ns, confluent-kafka 1,410-1,810; the broker's for
their requests (its compilers left out) 1,380-2,460 and 1,720-2,840 ns. Where fastmq's goes (perf -e cpu-clock
of the bench's process, 1,245 ns a record in that run): two thirds in its I/O thread, mostly the kernel's send over
loopback (~290 ns a record, ~110 of it copying into socket buffers), the batches' CRC-32C (~80), Python per request
(sender, connection; ~130) and context switches; a third in the caller's thread, the accumulator's append (its copy,
clock and record header) and the loop calling send(). The first Producer of a process also zeroes its arena's
fresh 2 MiB pages (11% of one run's samples, 0.4% of the next run's).

Run: pytest benches/bench_producer.py --benchmark-only -s  (-k apache: Apache Kafka only)
"""
from __future__ import annotations

import asyncio
import functools
import socket
import threading
import uuid

import pytest

from benches.apache_broker import drop_topic
from benches.bench_partitions import warm_requests
from benches.kafka_floor import produce_floor
from benches.process_cpu import broker_cpu, broker_pid, warm_until_compiled
from benches.rounds import UNUSED_BENCHMARK, alternating, over_by_round, record_medians, run_ids, timed

PROTOCOL = "kafka"
SMALL = b"x" * 100
LARGE = b"y" * 1024
MEMORY = 32 << 20           # buffer memory of every client (see the module docstring)
# Records per client: the slow clients get fewer so the run stays short; rates are per record.
FLOOR = "floor: no client"
COUNTS = {FLOOR: 1_000_000, "fastmq": 1_000_000, "fastmq.compat": 1_000_000, "confluent-kafka": 1_000_000,
          "aiokafka": 300_000, "kafka-python": 100_000}


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
            # The broker decompresses lz4 batches to validate them: that path compiles too (without it, fastmq's
            # lz4 run, the first, found the compilers at 530 ns of broker CPU a record and ran x1.09 of
            # confluent-kafka's rate where it had run x2.86).
            CLIENTS[client](kafka_broker.bootstrap_servers, topic, SMALL, 300_000, "lz4")
        warm_requests(kafka_broker.bootstrap_servers, topics["fastmq"])     # many small requests

    # Apache Kafka: until its compilers are done; Tansu (no JVM): one round
    warm_until_compiled(broker_pid(kafka_broker), warm_round, rounds=4)    # 1 GB a round
    for topic in topics.values():       # the first measured run writes into freed pages, as every later one
        drop_topic(kafka_broker, topic)


@pytest.mark.parametrize("codec", [None, "lz4"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_produce_100_bytes(compare, kafka_broker, client, codec):
    broker = kafka_broker
    count = COUNTS[client]
    topic = f"bench-{client}-{codec}-{uuid.uuid4().hex[:6]}"
    CLIENTS[client](broker.bootstrap_servers, topic, b"w", 1, codec)     # create the topic, warm up
    bench = compare(f"{broker.name}: produce 100 B, acks=1, {codec or 'no compression'}", client, items=count,
                    nbytes=count * len(SMALL))
    with broker_cpu(bench.extra_info, broker_pid(broker), count):
        bench.pedantic(CLIENTS[client], args=(broker.bootstrap_servers, topic, SMALL, count, codec), rounds=1,
                       iterations=1)


# The 1 KiB row: ROUNDS_1_KIB rounds of every client, in alternating order, each run into a topic that is then
# deleted (see drop_topic); the row gives each client's medians.
ROUNDS_1_KIB = 3
CLIENTS_1_KIB = {**CLIENTS, FLOOR: produce_floor}
RUNS_1_KIB = alternating(list(CLIENTS_1_KIB), ROUNDS_1_KIB)


@pytest.fixture(scope="module")
def large_runs(kafka_broker) -> dict[str, list[dict[str, float]]]:
    """client -> the figures of each of its 1 KiB runs against this broker (seconds, cpu_ns, broker_cpu_ns, ...)."""
    return {}


@UNUSED_BENCHMARK
@pytest.mark.parametrize(("round_", "client"), RUNS_1_KIB, ids=run_ids(RUNS_1_KIB))
def test_produce_1_kib(benchmark, kafka_broker, large_runs, round_, client):
    broker = kafka_broker
    count = COUNTS[client] // 2
    topic = f"bench-large-{client.split(':')[0]}-{uuid.uuid4().hex[:6]}"
    produce_fastmq(broker.bootstrap_servers, topic, b"w", 1, None)     # the topic, made before the clock starts
    run: dict[str, float] = {}
    with broker_cpu(run, broker_pid(broker), count):
        timed(run, count, CLIENTS_1_KIB[client], broker.bootstrap_servers, topic, LARGE, count, None)
    large_runs.setdefault(client, []).append(run)
    print(f"\n{broker.name}: produce 1 KiB, round {round_}, {client}: {count / run['seconds'] / 1e3:.1f}k records/s, "
          + ", ".join(f"{key} {value}" for key, value in run.items() if key != "seconds"))
    drop_topic(broker, topic)


@UNUSED_BENCHMARK
def test_produce_1_kib_medians(benchmark, self_timed, kafka_broker, large_runs):
    """The 1 KiB row: each client's median over its rounds (time, its CPU and the broker's a record)."""
    assert large_runs, "no 1 KiB run was measured"
    rates = record_medians(self_timed, f"{kafka_broker.name}: produce 1 KiB, acks=1 (vs loopback TCP)", large_runs,
                           lambda client: COUNTS[client] // 2, len(LARGE))
    # A round's runs follow each other within seconds, the rounds come a minute apart, and a shared machine's load
    # drifts in between: fastmq's speed over each peer's, round by round.
    for client, theirs in rates.items():
        if client != "fastmq":
            print(f"\n{kafka_broker.name}: produce 1 KiB, fastmq over {client} by round: "
                  f"{over_by_round(rates['fastmq'], theirs)}")
    if FLOOR in rates and "confluent-kafka" in rates:
        print(f"\n{kafka_broker.name}: produce 1 KiB, the floor over confluent-kafka by round: "
              f"{over_by_round(rates[FLOOR], rates['confluent-kafka'])}")


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
