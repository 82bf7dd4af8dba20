"""asyncio clients against fastmq's embedded broker (in its own process) and against Apache Kafka (one KRaft
node from the test server kit), in one run: fastmq.kafka.aio vs aiokafka with the same code (only the import
differs), producing and consuming 100-byte records on one partition (acks=1, linger 10 ms, batch 256 KiB;
getmany of up to 10000). Each row also gives the client process's CPU time per record (all its threads:
fastmq's I/O thread counts, the broker does not). The create_batch/send_batch row runs BATCH_ROUNDS alternating
rounds of both clients and of a floor (the same records in pre-encoded requests written by no client,
benches/kafka_floor.py), with the broker's CPU a record: fastmq's batches and the floor's are whole 256 KiB requests
alike, so the floor's rate over aiokafka's is what the broker on this machine leaves the row. What bounds it (stop 36,
three runs, their medians): the two cores carry client and broker, so a rate is about 2 / (the client's CPU a record
+ the broker's). The floor's client spends 62-84 ns a record (the kernel's send), fastmq's 289-406 (some 70 of them
the caller's own loop calling append(), as for aiokafka), aiokafka's 593-1,098; Apache's broker 380-760 ns a record
of these requests, the embedded broker 270-830. The floor made x1.73-x3.20 aiokafka's rate on the embedded broker and
x2.99-x3.44 on Apache's; fastmq x0.91-x1.19 and x0.59-x0.98 of the floor.

The last row measures how long each client keeps the event loop from other tasks under the same load: a ticker task
sleeps 1 ms at a time and records how late each wake-up comes while the client produces STALL_COUNT records in chunks
of STALL_CHUNK awaited sends (yielding to the loop between chunks, as a service interleaving other work does), then
consumes them, in ROUNDS alternating rounds; it prints each client's worst and 99th-percentile stall a round, and
fastmq's worst over aiokafka's round by round.

Run: pytest benches/bench_aio.py --benchmark-only -s
     FASTMQ_BENCH_BROKERS=apache for one broker only (embedded, apache).
"""
from __future__ import annotations

import asyncio
import functools
import importlib
import os
import types
import uuid

import pytest

from benches.apache_broker import bench_cluster, drop_topic
from benches.kafka_floor import produce_floor
from benches.process_cpu import broker_cpu, broker_pid, warm_until_compiled
from benches.rounds import UNUSED_BENCHMARK, alternating, by_round, over_by_round, record_medians, run_ids, timed
from fastmq.broker import BrokerProcess
from tests.support.ticker import Ticker

PROTOCOL = "kafka"
VALUE = b"x" * 100
# Records per client: aiokafka gets fewer so the run stays short; rates and CPU are per record. Its batch API is
# fast enough for a million (200k took it 0.13-0.18 s, start-up included).
COUNTS = {"fastmq.kafka.aio": 1_000_000, "aiokafka": 200_000}
BATCH_COUNT = 1_000_000
PRODUCER = dict(linger_ms=10, max_batch_size=262144, acks=1)
BROKERS = os.environ.get("FASTMQ_BENCH_BROKERS", "embedded,apache").split(",")


@pytest.fixture(scope="module", params=BROKERS)
def broker(request, tmp_path_factory):
    """The embedded broker in its own process, or one Apache Kafka node; .name goes in the group (the
    brokers' figures are not comparable)."""
    if request.param == "embedded":
        embedded = BrokerProcess().start()
        try:
            yield types.SimpleNamespace(name="embedded broker", bootstrap_servers=embedded.bootstrap_servers,
                                        pid=embedded.process.pid)
        finally:
            embedded.close()
    else:
        with bench_cluster(tmp_path_factory.mktemp("apache-kafka")) as cluster:
            cluster.name, cluster.pid = "Apache Kafka", broker_pid(cluster)
            yield cluster


async def produce(module: str, servers: str, topic: str, count: int) -> None:
    AIOKafkaProducer = importlib.import_module(module).AIOKafkaProducer
    async with AIOKafkaProducer(bootstrap_servers=servers, **PRODUCER) as producer:
        send = producer.send
        for _ in range(count):
            await send(topic, VALUE, partition=0)
        await producer.flush()


async def consume(module: str, servers: str, topic: str, count: int) -> int:
    client = importlib.import_module(module)
    async with client.AIOKafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                                       enable_auto_commit=False) as consumer:
        consumer.assign([client.TopicPartition(topic, 0)])
        seen = 0
        while seen < count:
            for chunk in (await consumer.getmany(timeout_ms=5000, max_records=10000)).values():
                seen += len(chunk)
        return seen


def measured(bench, coroutine_function, *args):
    """One round of the coroutine on a fresh loop (the compare fixture records the process's CPU per record)."""
    bench.pedantic(lambda: asyncio.run(coroutine_function(*args)), rounds=1, iterations=1)


@pytest.fixture(scope="module", autouse=True)
def warm_broker(broker):
    """Both clients' produce (one record at a time and in batches) and consume paths through the broker, until a
    JVM broker's compilers are done with them (at most 8 rounds), as the producer and consumer benches warm theirs:
    the client measured first paid for a fresh JVM's compiling (Apache Kafka, create_batch/send_batch: fastmq's
    first run of 1M records waited 0.63 s of its 1.19 s for buffer memory, the broker behind; its second 0.41 s of
    0.76 s)."""
    def warm_round() -> None:
        for module in COUNTS:
            topic = f"bench-aio-warm-{uuid.uuid4().hex[:6]}"
            asyncio.run(produce(module, broker.bootstrap_servers, topic, 100_000))
            asyncio.run(produce_batches(module, broker.bootstrap_servers, topic, 300_000))
            asyncio.run(consume(module, broker.bootstrap_servers, topic, 400_000))

    warm_until_compiled(broker.pid, warm_round)


@pytest.mark.parametrize("module", list(COUNTS))
def test_produce_100_bytes(compare, broker, module):
    count = COUNTS[module]
    topic = f"bench-aio-produce-{module}-{uuid.uuid4().hex[:6]}"
    asyncio.run(produce(module, broker.bootstrap_servers, topic, 1))       # create the topic, warm up
    bench = compare(f"{broker.name}: asyncio produce 100 B, acks=1", module, items=count, nbytes=count * len(VALUE))
    measured(bench, produce, module, broker.bootstrap_servers, topic, count)


async def produce_batches(module: str, servers: str, topic: str, count: int) -> None:
    """aiokafka's batch API: create_batch(), append until it is full, send_batch() to partition 0, and wait for
    every batch's future at the end."""
    AIOKafkaProducer = importlib.import_module(module).AIOKafkaProducer
    async with AIOKafkaProducer(bootstrap_servers=servers, **PRODUCER) as producer:
        sent = []
        batch = producer.create_batch()
        left = count
        while left:
            if batch.append(key=None, value=VALUE, timestamp=None) is None:
                sent.append(await producer.send_batch(batch, topic, partition=0))
                batch = producer.create_batch()
            else:
                left -= 1
        sent.append(await producer.send_batch(batch, topic, partition=0))
        await asyncio.gather(*sent)


# The create_batch/send_batch row: BATCH_ROUNDS rounds of both clients and of the floor (benches/kafka_floor.py:
# the same records in requests of one batch of about 256 KiB, written by no client), in alternating order, each run
# into a topic deleted after it; each client's medians, with the broker's CPU a record. Both clients' batches are
# whole 256 KiB requests here, so the floor is the rate the broker gives the row on this machine.
FLOOR = "floor: no client"
BATCH_ROUNDS = 3


def run_batches(module: str, servers: str, topic: str) -> None:
    asyncio.run(produce_batches(module, servers, topic, BATCH_COUNT))


BATCH_CLIENTS = {**{module: functools.partial(run_batches, module) for module in COUNTS},
                 FLOOR: lambda servers, topic: produce_floor(servers, topic, VALUE, BATCH_COUNT, None)}
BATCH_RUNS = alternating(list(BATCH_CLIENTS), BATCH_ROUNDS)


@pytest.fixture(scope="module")
def batch_runs(broker) -> dict[str, list[dict[str, float]]]:
    """client -> the figures of each of its create_batch/send_batch runs against this broker."""
    return {}


@UNUSED_BENCHMARK
@pytest.mark.parametrize(("round_", "client"), BATCH_RUNS, ids=run_ids(BATCH_RUNS))
def test_produce_batches_100_bytes(benchmark, broker, batch_runs, round_, client):
    topic = f"bench-aio-batches-{client.split(':')[0]}-{uuid.uuid4().hex[:6]}"
    asyncio.run(produce("fastmq.kafka.aio", broker.bootstrap_servers, topic, 1))     # the topic, before the clock
    run: dict[str, float] = {}
    with broker_cpu(run, broker.pid, BATCH_COUNT):
        timed(run, BATCH_COUNT, BATCH_CLIENTS[client], broker.bootstrap_servers, topic)
    batch_runs.setdefault(client, []).append(run)
    print(f"\n{broker.name}: create_batch/send_batch, round {round_}, {client}: "
          f"{BATCH_COUNT / run['seconds'] / 1e6:.2f}M records/s, "
          + ", ".join(f"{key} {value}" for key, value in run.items() if key != "seconds"))
    drop_topic(broker, topic)


@UNUSED_BENCHMARK
def test_produce_batches_medians(benchmark, self_timed, broker, batch_runs):
    """The create_batch/send_batch row: each client's medians, fastmq's rate over aiokafka's and the floor's over
    aiokafka's round by round (what the broker leaves any client), and fastmq's over the floor's."""
    assert set(batch_runs) == set(BATCH_CLIENTS), "a client's create_batch/send_batch rounds were not measured"
    rates = record_medians(self_timed, f"{broker.name}: asyncio produce 100 B through create_batch/send_batch, acks=1",
                           batch_runs, lambda client: BATCH_COUNT, len(VALUE))
    for ours, theirs in (("fastmq.kafka.aio", "aiokafka"), (FLOOR, "aiokafka"), ("fastmq.kafka.aio", FLOOR)):
        print(f"\n{broker.name}: create_batch/send_batch, {ours} over {theirs} by round: "
              f"{over_by_round(rates[ours], rates[theirs])}")


@pytest.fixture(scope="module")
def loaded(broker):
    topic = f"bench-aio-consume-{uuid.uuid4().hex[:6]}"
    asyncio.run(produce("fastmq.kafka.aio", broker.bootstrap_servers, topic, max(COUNTS.values())))
    return topic


@pytest.mark.parametrize("module", list(COUNTS))
def test_consume_100_bytes(compare, broker, loaded, module):
    count = COUNTS[module]
    bench = compare(f"{broker.name}: asyncio consume 100 B, one partition, from the beginning", module, items=count,
                    nbytes=count * len(VALUE))
    measured(bench, consume, module, broker.bootstrap_servers, loaded, count)


# ---- the event loop under load -------------------------------------------------------------------------------

STALL_COUNT = 300_000
STALL_CHUNK = 100           # awaited sends between two yields to the loop
ROUNDS = 3                  # of every client, in alternating order (benches/rounds.py): one full collection of
                            # the garbage collector, whose timing no client controls, decides a single run


async def produce_ticking(module: str, servers: str, topic: str, count: int) -> list[float]:
    AIOKafkaProducer = importlib.import_module(module).AIOKafkaProducer
    async with AIOKafkaProducer(bootstrap_servers=servers, **PRODUCER) as producer:
        with Ticker() as ticker:
            send = producer.send
            for _ in range(count // STALL_CHUNK):
                for _ in range(STALL_CHUNK):
                    await send(topic, VALUE, partition=0)
                await asyncio.sleep(0)
            await producer.flush()
    return ticker.gaps


async def consume_ticking(module: str, servers: str, topic: str, count: int) -> list[float]:
    client = importlib.import_module(module)
    async with client.AIOKafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                                       enable_auto_commit=False) as consumer:
        consumer.assign([client.TopicPartition(topic, 0)])
        with Ticker() as ticker:
            seen = 0
            while seen < count:
                for chunk in (await consumer.getmany(timeout_ms=5000, max_records=STALL_CHUNK * 10)).values():
                    seen += len(chunk)
    return ticker.gaps


STALL_RUNS = alternating(list(COUNTS), ROUNDS)


@pytest.fixture(scope="module")
def stall_runs(broker) -> dict[str, list[dict[str, float]]]:
    """client -> each of its rounds' worst and 99th-percentile stall (seconds) by phase, against this broker."""
    return {}


@UNUSED_BENCHMARK
@pytest.mark.parametrize(("round_", "module"), STALL_RUNS, ids=run_ids(STALL_RUNS))
def test_event_loop_stalls(benchmark, broker, stall_runs, round_, module):
    topic = f"bench-aio-stalls-{module}-{uuid.uuid4().hex[:6]}"
    asyncio.run(produce(module, broker.bootstrap_servers, topic, 1))
    run = {}
    for phase, function in (("produce", produce_ticking), ("consume", consume_ticking)):
        gaps = sorted(asyncio.run(function(module, broker.bootstrap_servers, topic, STALL_COUNT)))
        run[f"{phase} worst"], run[f"{phase} p99"] = gaps[-1], gaps[int(len(gaps) * 0.99)]
    stall_runs.setdefault(module, []).append(run)
    print(f"\n{broker.name}: event-loop stalls, round {round_}, {module}: "
          + ", ".join(f"{key} {seconds * 1000:.1f} ms" for key, seconds in run.items()))


@UNUSED_BENCHMARK
def test_event_loop_stalls_by_round(benchmark, broker, stall_runs):
    """Each client's worst stall over its rounds, and fastmq's worst over aiokafka's round by round."""
    assert set(stall_runs) == set(COUNTS), "a client's stall rounds were not measured"
    for phase in ("produce", "consume"):
        worst = {module: [run[f"{phase} worst"] for run in runs] for module, runs in stall_runs.items()}
        ours, theirs = worst["fastmq.kafka.aio"], worst["aiokafka"]
        print(f"\n{broker.name}: event-loop stalls {phase}: worst fastmq.kafka.aio {max(ours) * 1000:.1f} ms, "
              f"aiokafka {max(theirs) * 1000:.1f} ms; fastmq.kafka.aio's over aiokafka's by round: "
              f"{by_round([mine / their for mine, their in zip(ours, theirs)])}")
