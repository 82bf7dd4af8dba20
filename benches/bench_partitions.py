"""The partition sweep: produce and consume 1M x 100 B spread over P partitions (record i to partition i % P),
P in {1, 64, 1024, 4096}, fastmq vs confluent-kafka in one run, against the embedded broker and against Apache
Kafka 4.1.1 (one KRaft node from the test server kit, started by the bench on 127.0.0.1, with index files sized
to its segments: benches/apache_broker.py); plus a producer over
1000 topics x 4 partitions; and the disk each broker takes for 500k records over 1024 partitions. acks=1, linger
10 ms, 256 KiB batches, 256 MiB of buffer memory for both clients.

Each client runs in a process of its own, so that its CPU per record (process time of all its threads: the
user thread, fastmq's I/O thread, librdkafka's threads) is measured apart from the broker's: the embedded broker
runs in the benchmark's process (its CPU time), Apache Kafka in its Java process (that process tree's CPU time).
The table prints msgs/s, cpu_per_record (the client's, ns), broker_cpu (ns per record) and broker_jit
(the part of broker_cpu that a JVM broker's compiler threads took); each producing client prints its peak
resident memory after the clock, fastmq's also its CPU a record by thread (the user thread's send, the I/O
thread's) and how much batch storage it touched.

What a broker pays once is kept off the clock, for every client alike: each broker is warmed up by both clients
before the first measurement (a fresh JVM compiles while it serves), and each new topic's partitions get their
first index entries before the client starts (see create_topics).

Run: pytest benches/bench_partitions.py --benchmark-only -s
     FASTMQ_BENCH_PARTITIONS=1,1024 FASTMQ_BENCH_RECORDS=200000 FASTMQ_BENCH_BROKERS=embedded to run a part of it;
     FASTMQ_BENCH_VALUE_BYTES=1024 for other values than 100 B (bench_produce_wire.py takes it too).
"""
from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from benches.apache_broker import bench_cluster
from benches.process_cpu import JIT_THREADS, threads_cpu_seconds, tree_cpu_seconds, warm_until_compiled
from benches.rounds import UNUSED_BENCHMARK
from fastmq.broker import EmbeddedBroker
from tests.support.kafka_wire import Wire
from tests.support.waiting import wait_for

PROTOCOL = "kafka"
RECORDS = int(os.environ.get("FASTMQ_BENCH_RECORDS", 1_000_000))
PARTITIONS = [int(p) for p in os.environ.get("FASTMQ_BENCH_PARTITIONS", "1,64,1024,4096").split(",")]
BROKERS = os.environ.get("FASTMQ_BENCH_BROKERS", "embedded,apache").split(",")
VALUE = b"x" * int(os.environ.get("FASTMQ_BENCH_VALUE_BYTES", 100))
MANY_TOPICS = 1000
BATCH = 262144
MEMORY = 256 << 20
WARM_UP = 300_000
# A JVM broker runs its per-request code (parsing, KafkaApis.handle, the response) once a request: 300k records
# in 256 KiB batches are ~130 requests, far below C2's compile thresholds (thousands of calls), so those paths
# stayed in profiling C1 code through the measured runs. Each warm-up round also sends WARM_REQUEST_RECORDS
# records from each client in batches of WARM_REQUEST_BATCH bytes: over ten thousand small requests.
WARM_REQUEST_RECORDS = 100_000
WARM_REQUEST_BATCH = 1024
INDEX_INTERVAL = 4097        # just over Apache Kafka's log.index.interval.bytes
CLIENT_TIMEOUT = 600.0
LOGS_TIMEOUT = 300.0          # a broker making thousands of partitions' logs on a loaded machine
DESCRIBE_LOG_DIRS = 35
# Above pytest's 300 s a test: making 1000 topics on Apache Kafka and then a slow client's run took longer on a
# loaded machine, and the test was cut off (confluent-kafka's "1000 topics" line went missing).
pytestmark = pytest.mark.timeout(3 * CLIENT_TIMEOUT)


# ---- what the client processes run -------------------------------------------------------------------------

def produce_fastmq(servers: str, targets: list[tuple[str, int]], count: int, ready, batch: int = BATCH,
                   linger_ms: int = 10) -> str:
    """Returns the shape of what went out (requests, batches, records per batch: over many partitions a
    batch holds what arrived between two requests, so per-batch costs are spread over fewer records), the CPU a
    record of the user thread (send) and of the others (the I/O thread), and the bytes of batch storage the
    producer ever touched (its arena: fresh memory, which the kernel zeroes at first touch, on the thread that
    writes it)."""
    from fastmq.kafka import Producer

    with Producer(servers, linger_ms=linger_ms, batch_size=batch, acks=1, enable_idempotence=False,
                  buffer_memory=MEMORY) as producer:
        topics = {topic for topic, _ in targets}
        producer.client.add_topics(topics)              # one metadata request for them all, not one a topic
        for topic in topics:
            producer.partitions_for(topic)              # metadata before the clock starts
        ready()
        threads_before = threads_cpu_ns()
        send, n = producer.send, len(targets)
        for i in range(count):
            topic, partition = targets[i % n]
            send(topic, VALUE, partition=partition)
        producer.flush(CLIENT_TIMEOUT)
        threads = threads_cpu_ns()
        sent = producer.metrics()["producer-metrics"]
        touched = producer._accumulator.arena.touched
    user = threading.get_native_id()
    spent = {tid: ns - threads_before.get(tid, 0) for tid, ns in threads.items()}
    others = sum(ns for tid, ns in spent.items() if tid != user)
    batches = sent["byte-total"] / sent["batch-size-avg"]
    return (f"   fastmq's requests over {len(targets)} partitions: {sent['request-total']:.0f} requests, "
            f"{batches:.0f} batches, {sent['record-send-total'] / batches:.1f} records a batch, "
            f"{batches / sent['request-total']:.1f} batches a request; CPU a record: user thread "
            f"{spent.get(user, 0) / count:.0f} ns, I/O thread {others / count:.0f} ns; arena {touched >> 20} MiB")


def threads_cpu_ns() -> dict[int, int]:
    """{native thread id: CPU ns so far} of this process's threads (schedstat: finer than the clock ticks)."""
    spent = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as stat:
                spent[int(task)] = int(stat.read().split()[0])
        except OSError:         # a thread that ended meanwhile
            continue
    return spent


def produce_confluent(servers: str, targets: list[tuple[str, int]], count: int, ready, batch: int = BATCH,
                      linger_ms: int = 10) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": servers, "linger.ms": linger_ms, "batch.size": batch,
                                         "acks": 1, "queue.buffering.max.kbytes": MEMORY >> 10})
    for topic in {topic for topic, _ in targets}:
        producer.list_topics(topic, timeout=30)
    ready()
    produce, poll, n = producer.produce, producer.poll, len(targets)
    for i in range(count):
        topic, partition = targets[i % n]
        while True:
            try:
                produce(topic, VALUE, partition=partition)
                break
            except BufferError:
                poll(0.001)
    assert producer.flush(CLIENT_TIMEOUT) == 0


def consume_fastmq(servers: str, targets: list[tuple[str, int]], count: int, ready) -> None:
    from fastmq.kafka import Consumer
    from fastmq.kafka.structs import TopicPartition

    with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest", max_poll_records=10000) as consumer:
        partitions = [TopicPartition(topic, partition) for topic, partition in targets]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ready()
        received, deadline = 0, time.monotonic() + CLIENT_TIMEOUT
        while received < count and time.monotonic() < deadline:
            for chunk in consumer.poll(1.0).values():
                received += len(chunk)
    assert received >= count, f"{received} of {count} records"


def consume_confluent(servers: str, targets: list[tuple[str, int]], count: int, ready) -> None:
    import confluent_kafka

    # fetch.queue.backoff.ms=0: else librdkafka idles between fetches once its queue is full (as in
    # bench_consumer.py).
    consumer = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": f"bench-{uuid.uuid4().hex}",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "fetch.queue.backoff.ms": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)
                     for topic, partition in targets])
    ready()
    received, deadline = 0, time.monotonic() + CLIENT_TIMEOUT
    while received < count and time.monotonic() < deadline:
        for message in consumer.consume(10000, 1.0):
            if message.error() is None:
                received += 1
    consumer.close()
    assert received >= count, f"{received} of {count} records"


CLIENTS = {("produce", "fastmq"): produce_fastmq, ("produce", "confluent-kafka"): produce_confluent,
           ("consume", "fastmq"): consume_fastmq, ("consume", "confluent-kafka"): consume_confluent,
           # warm_requests: many small requests
           ("small requests", "fastmq"): functools.partial(produce_fastmq, batch=WARM_REQUEST_BATCH, linger_ms=0),
           ("small requests", "confluent-kafka"): functools.partial(produce_confluent, batch=WARM_REQUEST_BATCH,
                                                                    linger_ms=0)}


def client_process(connection, work: str, client: str, servers: str, targets, count: int) -> None:
    """Sets up, says "ready", waits for "go", runs, answers (wall seconds, CPU seconds) or the error."""
    started = {}

    def ready() -> None:
        connection.send("ready")
        connection.recv()
        started["wall"], started["cpu"] = time.perf_counter(), time.process_time()

    try:
        shape = CLIENTS[work, client](servers, targets, count, ready)
        connection.send((time.perf_counter() - started["wall"], time.process_time() - started["cpu"]))
        if work == "produce":               # after the clock: not part of what is measured
            print(f"{shape or f'   {client}:'} peak RSS {peak_rss_mib():.0f} MiB", flush=True)
    except BaseException as error:        # the benchmark's process reports it
        connection.send(repr(error))


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM: a spawned client's own, from its start)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


class ClientRun:
    """One client in its own (spawned) process, set up and waiting for go()."""

    def __init__(self, work: str, client: str, servers: str, targets, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=client_process,
                                       args=(child, work, client, servers, targets, count), daemon=True)
        self.process.start()
        self.answer("ready")

    def answer(self, expected: str | None = None):
        if not self.connection.poll(CLIENT_TIMEOUT):
            raise TimeoutError("the client process did not answer")
        message = self.connection.recv()
        if isinstance(message, str) and message != expected:
            raise RuntimeError(f"client process failed: {message}")
        return message

    def go(self) -> tuple[float, float]:
        self.connection.send("go")
        result = self.answer()
        self.process.join(30)
        return result


# ---- the benchmarks ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    bootstrap_servers: str
    pid: int | None = None          # the broker's process when it is not the benchmark's own
    makes_logs_later: bool = False  # makes a new partition's log after CreateTopics (and answers DescribeLogDirs)
    data_dirs: tuple[Path, ...] = ()    # where it keeps its data

    def cpu_seconds(self) -> float:
        return time.process_time() if self.pid is None else tree_cpu_seconds(self.pid)

    def jit_seconds(self) -> float:
        """The CPU time of a JVM broker's compiler threads (part of cpu_seconds); 0 for the embedded broker."""
        return 0.0 if self.pid is None else threads_cpu_seconds(self.pid, JIT_THREADS)


@pytest.fixture(scope="module", params=BROKERS)
def broker(request, tmp_path_factory):
    """The broker under the clients: the embedded one, or one Apache Kafka node (segments of 16 MiB, as the
    kit's; a heap large enough for 4096 partitions)."""
    if request.param == "embedded":
        with EmbeddedBroker() as embedded:
            yield warmed_up(Target("embedded broker", embedded.bootstrap_servers, data_dirs=(embedded.data_dir,)))
    else:
        with bench_cluster(tmp_path_factory.mktemp("apache-kafka"), heap="1g") as cluster:
            node = cluster.nodes[0]
            yield warmed_up(Target("Apache Kafka 4.1.1", cluster.bootstrap_servers, node.process.pid, True,
                                   tuple(cluster.data_dirs(node))))


def warmed_up(broker: Target) -> Target:
    """Every client produces and consumes WARM_UP records before anything is measured, in rounds until a JVM
    broker's compilers are done with what the clients' requests run (warm_until_compiled): a fresh JVM compiles
    its produce and fetch paths while serving its first requests, and that cost would go to whichever client
    the sweep runs first. Per-thread CPU of Apache Kafka after one round: its C2 compiler took 250-530 ns a
    record in the first measured runs (fastmq's P=1 case, first in the sweep, was charged 690-770 ns of broker
    CPU a record, confluent-kafka's 540-630); 30-80 ns after four."""
    name = f"warm-up-{uuid.uuid4().hex[:6]}"
    create_topics(broker, [name], 1)

    def warm_round() -> None:
        for work in ("produce", "consume"):
            for client in ("fastmq", "confluent-kafka"):
                ClientRun(work, client, broker.bootstrap_servers, [(name, 0)], WARM_UP).go()
        warm_requests(broker.bootstrap_servers, name)

    warm_until_compiled(broker.pid, warm_round)
    return broker


def warm_requests(servers: str, topic: str) -> None:
    """WARM_REQUEST_RECORDS records from each client, in WARM_REQUEST_BATCH-byte batches with no linger: many
    small Produce requests, so that a JVM broker compiles its per-request code (see WARM_REQUEST_RECORDS)."""
    for client in ("fastmq", "confluent-kafka"):
        ClientRun("small requests", client, servers, [(topic, 0)], WARM_REQUEST_RECORDS).go()


def create_topics(broker: Target, names: list[str], partitions: int) -> None:
    """Creates the topics, waits until the broker has every partition's log, makes each partition's log ready
    before the clock starts, then deletes what that wrote (DeleteRecords), so that consumers read only the
    bench's records.

    A broker makes a new partition's log after it answers CreateTopics (Apache Kafka: 20 s for 4000 partitions,
    3 ms of its CPU each), and a record sent before that comes back NOT_LEADER. Sending at once, the 8000 warming
    records to 1000 new topics went out 305k times in 44 s (1.3 GB of retried requests the broker parsed and
    refused) while the logs were made; so the logs are awaited first, as the broker reports them
    (DescribeLogDirs). Apache Kafka also pays once per partition for its first index entries: the first write to
    a segment's memory-mapped offset and time index files is a page fault each, which reads around it (see
    benches/apache_broker.py). A topic's first minutes are not what the sweep compares, so each partition gets
    a record of more than log.index.interval.bytes (4 KiB) and then one more: the second append writes the
    first index entries."""
    from fastmq.kafka import Admin, Producer
    from fastmq.kafka.admin import NewTopic
    from fastmq.kafka.structs import TopicPartition

    servers = broker.bootstrap_servers
    with Admin(servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1) for name in names], timeout=120)
        if broker.makes_logs_later:
            wait_for(lambda: logs_made(servers, names, partitions) >= len(names) * partitions, LOGS_TIMEOUT, 0.5,
                     lambda: f"{logs_made(servers, names, partitions)} of {len(names) * partitions} logs made")
        with Producer(servers, acks=1, enable_idempotence=False, linger_ms=50, buffer_memory=256 << 20) as producer:
            producer.client.add_topics(set(names))     # one metadata request for them all, not one wait a topic
            for value in (b"w" * INDEX_INTERVAL, b""):
                for name in names:
                    for partition in range(partitions):
                        producer.send(name, value, partition=partition)
                producer.flush(CLIENT_TIMEOUT)
        admin.delete_records({TopicPartition(name, partition): -1 for name in names for partition in range(partitions)},
                             timeout=120)


def delete_topics(broker: Target, names: list[str]) -> None:
    """Deletes a produce case's topics once it is measured, so the broker holds only what the running case
    needs: kept, the whole sweep's ~25k partitions stayed alive on one node (Apache Kafka maps two index files
    per partition; vm.max_map_count is 65530 here), and in one full run the last case, confluent-kafka's 1000
    topics, failed while its topics were being made (its error was not kept; alone it ran)."""
    from fastmq.kafka import Admin

    with Admin(broker.bootstrap_servers) as admin:
        admin.delete_topics(names, timeout=120)


def logs_made(servers: str, names: list[str], partitions: int) -> int:
    """How many partitions of the topics have their log on the (one) broker, as it says (DescribeLogDirs)."""
    from fastmq.kafka import protocol as kp

    request = kp.DescribeLogDirsRequest(topics=[kp.DescribeLogDirsRequest.DescribableLogDirTopic(
        topic=name, partitions=list(range(partitions))) for name in names])
    wire = Wire(servers.split(",")[0], client_id="bench-logs-made")
    try:
        answer = wire.request(DESCRIBE_LOG_DIRS, 1, request)
    finally:
        wire.sock.close()
    return sum(len(topic.partitions) for result in answer.results for topic in result.topics)


def measure(compare, broker: Target, group: str, work: str, client: str, targets, count: int) -> None:
    bench = compare(group, client, items=count, nbytes=count * len(VALUE))
    run: dict[str, ClientRun] = {}
    servers = broker.bootstrap_servers

    def setup():
        run["client"] = ClientRun(work, client, servers, targets, count)
        return (), {}

    def timed() -> None:
        broker_cpu, broker_jit = broker.cpu_seconds(), broker.jit_seconds()
        wall, cpu = run["client"].go()
        broker_cpu, broker_jit = broker.cpu_seconds() - broker_cpu, broker.jit_seconds() - broker_jit
        bench.extra_info["client_wall_s"] = round(wall, 3)
        bench.extra_info["cpu_per_record_ns"] = round(cpu / count * 1e9)
        bench.extra_info["broker_cpu_ns"] = round(broker_cpu / count * 1e9)
        bench.extra_info["broker_jit_ns"] = round(broker_jit / count * 1e9)

    bench.pedantic(timed, setup=setup, rounds=1, iterations=1)
    del bench.extra_info["cpu_ns"]      # the benchmark process's: the broker's for the embedded one, else nothing


@pytest.fixture(scope="module")
def filled_topics(broker):
    """{P: topic holding RECORDS records spread over P partitions}, written by fastmq, made on first use, then
    read once untimed. The first reader after the fill pays for bringing the broker's files back into memory:
    on Apache Kafka at P=4096 on this shared machine, 2.4-4.9 us of broker CPU per record, mostly kernel time
    in its request threads (perf: page faults on its memory-mapped offset indexes, refaults of evicted pages with
    zero-filled read-around), against 0.4-0.9 us for the next reader, whichever client came first (confluent-kafka
    first: 2870 ns, then fastmq 490; fastmq first: 2360-4920, then confluent-kafka 900-1240). Unwarmed, that cost
    fell on the client the sweep runs first, fastmq."""
    topics: dict[int, str] = {}

    def filled(partitions: int) -> str:
        if partitions not in topics:
            name = f"sweep-filled-{partitions}-{uuid.uuid4().hex[:6]}"
            create_topics(broker, [name], partitions)
            ClientRun("produce", "fastmq", broker.bootstrap_servers,
                      [(name, p) for p in range(partitions)], RECORDS).go()
            ClientRun("consume", "fastmq", broker.bootstrap_servers,
                      [(name, p) for p in range(partitions)], RECORDS).go()
            topics[partitions] = name
        return topics[partitions]
    return filled


@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("client", ["fastmq", "confluent-kafka"])
def test_produce_partition_sweep(compare, broker, client, partitions):
    name = f"sweep-{client}-{partitions}-{uuid.uuid4().hex[:6]}"
    create_topics(broker, [name], partitions)
    measure(compare, broker, f"produce {len(VALUE)} B over {partitions} partitions, {broker.name}", "produce", client,
            [(name, p) for p in range(partitions)], RECORDS)
    delete_topics(broker, [name])


@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("client", ["fastmq", "confluent-kafka"])
def test_consume_partition_sweep(compare, broker, filled_topics, client, partitions):
    name = filled_topics(partitions)
    measure(compare, broker, f"consume {len(VALUE)} B over {partitions} partitions, {broker.name}", "consume", client,
            [(name, p) for p in range(partitions)], RECORDS)


@pytest.mark.parametrize("client", ["fastmq", "confluent-kafka"])
def test_produce_many_topics(compare, broker, client):
    names = [f"many-{client}-{i}-{uuid.uuid4().hex[:4]}" for i in range(MANY_TOPICS)]
    create_topics(broker, names, 4)
    measure(compare, broker, f"produce {len(VALUE)} B over {MANY_TOPICS} topics x 4 partitions, {broker.name}",
            "produce", client, many_topic_targets(names, 4), RECORDS)
    delete_topics(broker, names)


def many_topic_targets(names: list[str], partitions: int) -> list[tuple[str, int]]:
    """Record i goes to topic i % len(names) and, per round over the topics, to the next partition."""
    return [(names[i % len(names)], (i // len(names)) % partitions) for i in range(len(names) * partitions)]


# ---- disk use ------------------------------------------------------------------------------------------------

DISK_PARTITIONS = 1024
DISK_RECORDS = 500_000          # 100 B values: what the scale issue measured, 60 MB of records
DISK_USE: dict[str, int] = {}   # broker name -> bytes the records took


def allocated_bytes(directories: tuple[Path, ...]) -> int:
    """Disk blocks the files below the directories hold (not their apparent sizes: sparse files count what they
    hold)."""
    total = 0
    for directory in directories:
        for path in directory.rglob("*"):
            try:
                total += path.stat().st_blocks * 512 if path.is_file() else 0
            except FileNotFoundError:      # a file the broker removed meanwhile
                continue
    return total


def topic_disk_bytes(broker: Target, name: str) -> int:
    """The disk blocks a topic's own files hold: Apache Kafka's partition directories (segments, indexes,
    checkpoints), the embedded broker's ConsumeQueues (its CommitLog is shared by every topic: see below)."""
    if broker.pid is None:
        return allocated_bytes(tuple(directory / "consumequeue" / name for directory in broker.data_dirs))
    return allocated_bytes(tuple(path for directory in broker.data_dirs for path in directory.glob(f"{name}-*")))


def commit_log_bytes(broker: Target) -> int:
    """The embedded broker's CommitLog's disk blocks (0 for Apache Kafka, which has none)."""
    if broker.pid is not None:
        return 0
    return allocated_bytes(tuple(directory / "commitlog" for directory in broker.data_dirs))


@UNUSED_BENCHMARK
def test_disk_use_at_1024_partitions(benchmark, broker):
    """The disk a broker takes for DISK_RECORDS records over DISK_PARTITIONS partitions of a new topic: its files
    (all of Apache Kafka's for the topic, from its creation on; the embedded broker's ConsumeQueues and what its
    CommitLog grew by), and the embedded broker's over Apache Kafka's once both ran."""
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    name = f"disk-{uuid.uuid4().hex[:6]}"
    servers = broker.bootstrap_servers
    commit_log_before = commit_log_bytes(broker)
    with Admin(servers) as admin:
        admin.create_topics([NewTopic(name, DISK_PARTITIONS, 1)], timeout=120)
    if broker.makes_logs_later:
        wait_for(lambda: logs_made(servers, [name], DISK_PARTITIONS) >= DISK_PARTITIONS, LOGS_TIMEOUT, 0.5,
                 lambda: f"{logs_made(servers, [name], DISK_PARTITIONS)} of {DISK_PARTITIONS} logs made")
    ClientRun("produce", "fastmq", servers, [(name, p) for p in range(DISK_PARTITIONS)], DISK_RECORDS).go()
    DISK_USE[broker.name] = used = topic_disk_bytes(broker, name) + commit_log_bytes(broker) - commit_log_before
    print(f"\n{broker.name}: {DISK_RECORDS} records of {len(VALUE)} B over {DISK_PARTITIONS} partitions take "
          f"{used / 1e6:.1f} MB of disk")
    delete_topics(broker, [name])
    if len(DISK_USE) == 2:
        (apache,) = (used for name, used in DISK_USE.items() if name != "embedded broker")
        print(f"\ndisk use at {DISK_PARTITIONS} partitions: the embedded broker's is "
              f"x{DISK_USE['embedded broker'] / apache:.2f} of Apache Kafka's")
