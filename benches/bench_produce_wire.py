"""What each producer sends to Apache Kafka, and what those requests alone cost the broker.

Each client (fastmq, confluent-kafka; the partition sweep's settings: acks=1, linger 10 ms, 256 KiB batches, record
i to partition i % P) produces RECORDS x 100 B through a recording TCP proxy on 127.0.0.1 (a FaultProxy with a
tap), which Apache Kafka advertises as its address (a PROXIED listener): every connection of the client passes
through it. The bench prints, per client, the Produce requests seen: count, API version, acks, bytes, partitions and batches per
request, records per batch, requests in flight when each is sent, batch attributes, producer id and sequences.
Then it replays each captured stream of Produce requests, byte for byte, on one connection with at most WINDOW
unanswered (a client of no cost), alternating the clients for REPLAYS rounds, and prints the broker's CPU per
record for each stream (the Java process tree's CPU time over the records; each reply is checked for errors) and
the rate at which the broker took it: what one connection's requests can reach, whatever the client.

The replay separates what a stream of requests costs the broker from what the broker spends around a live run:
the partition sweep's broker column once charged the first client of a fresh JVM for its compiling, and the
client of a fresh topic for the first index entries of every partition (two major page faults a partition, about
2 ms of system CPU each on this machine); see bench_partitions.py.

Cases: P partitions of one topic (FASTMQ_BENCH_PARTITIONS), and the sweep's 1000 topics x 4 partitions.

Run: pytest benches/bench_produce_wire.py --benchmark-only -s  (-k many_topics: the 1000 topics alone)
     FASTMQ_BENCH_PARTITIONS=1,1024 FASTMQ_BENCH_RECORDS=500000 to choose the cases; FASTMQ_BENCH_VALUE_BYTES=1024
     for 1 KiB values (bench_partitions.py's VALUE). Measured at 1 KiB, one partition (300k records, loaded
     machine): both clients send the same 256 KiB one-batch requests, and replayed, the broker took 451k (fastmq's)
     and 406k (confluent-kafka's) records/s on one connection at 2.2-2.7 us of its CPU a record, where in
     bench_producer both live clients reached 455-461k/s: at 1 KiB any client is held to that ceiling.
"""
from __future__ import annotations

import collections
import os
import socket
import statistics
import struct
import time
from dataclasses import dataclass, field

import pytest

from benches.apache_broker import bench_cluster
from benches.bench_partitions import MANY_TOPICS, ClientRun, Target, create_topics, many_topic_targets, warmed_up
from fastmq.kafka.protocol.framing import decode_request, decode_response
from tests.support.faults import FaultProxy

PROTOCOL = "kafka"
RECORDS = int(os.environ.get("FASTMQ_BENCH_RECORDS", 500_000))
PARTITIONS = [int(p) for p in os.environ.get("FASTMQ_BENCH_PARTITIONS", "1,1024").split(",")]
CLIENTS = ("fastmq", "confluent-kafka")
WINDOW = 5              # requests in flight in a replay (the Java producer's default)
REPLAYS = 3
PRODUCE = 0
# RecordBatch v2 header: base offset, length, leader epoch, magic, CRC, attributes, last offset delta, first and
# max timestamp, producer id, producer epoch, base sequence, record count.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
FRAME_SIZE = struct.Struct(">i")
pytestmark = pytest.mark.timeout(1800)      # two clients' runs, at 1024 partitions, on a loaded machine


@dataclass
class Connection:
    """One client connection as the proxy saw it: the client's whole request frames, and when each came, how many
    responses had come back before it."""

    requests: list[bytes] = field(default_factory=list)
    answered_before: list[int] = field(default_factory=list)
    responses: int = 0
    pending: dict[bool, bytearray] = field(default_factory=lambda: {True: bytearray(), False: bytearray()})


class FrameLog:
    """The tap of a FaultProxy: cuts each connection's two byte streams into Kafka frames and keeps the requests.
    The proxy calls it before passing a chunk on, so a request is always noted before its response."""

    def __init__(self) -> None:
        self.connections: dict[int, Connection] = {}

    def __call__(self, number: int, to_server: bool, data: bytes) -> None:
        connection = self.connections.setdefault(number, Connection())
        pending = connection.pending[to_server]
        pending += data
        while len(pending) >= 4 and len(pending) >= 4 + FRAME_SIZE.unpack_from(pending)[0]:
            end = 4 + FRAME_SIZE.unpack_from(pending)[0]
            if to_server:
                connection.requests.append(bytes(pending[:end]))
                connection.answered_before.append(connection.responses)
            else:
                connection.responses += 1
            del pending[:end]

    def since(self, first: int) -> list[Connection]:
        """The connections opened after the proxy's `first` one."""
        return [connection for number, connection in sorted(self.connections.items()) if number > first]


def batches(records: bytes):
    """The header fields of each RecordBatch in a partition's record set."""
    offset = 0
    while offset < len(records):
        fields = BATCH_HEADER.unpack_from(records, offset)
        yield fields
        offset += 12 + fields[1]


def spread(values: list[int]) -> str:
    return (f"mean {statistics.mean(values):.1f} median {statistics.median(values)} min {min(values)} "
            f"max {max(values)}") if values else "-"


def describe(connections: list[Connection]) -> tuple[list[str], list[bytes], int]:
    """Lines describing the Produce requests of the connections, those requests in order, and their records."""
    frames: list[bytes] = []
    sizes, partitions, batch_counts, per_batch, in_flight = [], [], [], [], []
    versions, acks, attributes, producers, others = (collections.Counter() for _ in range(5))
    for connection in connections:
        for number, (frame, answered) in enumerate(zip(connection.requests, connection.answered_before)):
            api_key, version = struct.unpack_from(">hh", frame, 4)
            if api_key != PRODUCE:
                others[api_key] += 1
                continue
            _, request = decode_request(memoryview(frame)[4:])
            frames.append(frame)
            sizes.append(len(frame))
            versions[version] += 1
            acks[request.acks] += 1
            in_flight.append(number + 1 - answered)       # this one and those not answered yet
            count = 0
            for topic in request.topic_data:
                partitions.append(len(topic.partition_data))
                for partition in topic.partition_data:
                    for header in batches(bytes(partition.records)):
                        count += 1
                        per_batch.append(header[-1])
                        attributes[header[5]] += 1
                        producers[(header[9], header[10], header[11] >= 0)] += 1
            batch_counts.append(count)
    lines = [f"produce requests {len(frames)} (API versions {dict(versions)}, acks {dict(acks)}), other requests "
             f"by API key {dict(others)}",
             f"request bytes: {spread(sizes)}",
             f"partitions per topic in a request: {spread(partitions)}; batches per request: {spread(batch_counts)}",
             f"records per batch: {spread(per_batch)}",
             f"requests in flight when one is sent: {spread(in_flight)}",
             f"batch attributes {dict(attributes)}; (producer id, epoch, sequenced) {dict(producers)}"]
    return lines, frames, sum(per_batch)


def replay(address: tuple[str, int], frames: list[bytes]) -> collections.Counter:
    """Sends the frames on one connection, at most WINDOW unanswered; returns the partitions' error codes."""
    errors: collections.Counter = collections.Counter()
    waiting: collections.deque[int] = collections.deque()
    with socket.create_connection(address) as sock, sock.makefile("rb", buffering=1 << 20) as reader:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def receive() -> None:
            size = FRAME_SIZE.unpack(reader.read(4))[0]
            _, response = decode_response(PRODUCE, waiting.popleft(), reader.read(size))
            for topic in response.responses:
                errors.update(partition.error_code for partition in topic.partition_responses)

        for frame in frames:
            if len(waiting) == WINDOW:
                receive()
            sock.sendall(frame)
            waiting.append(struct.unpack_from(">h", frame, 6)[0])
        while waiting:
            receive()
    return errors


@pytest.fixture(scope="module")
def proxied_broker(tmp_path_factory):
    """One Apache Kafka node advertising a recording proxy's port (its PROXIED listener), warmed up by both
    clients; yields the broker, the proxy and the proxy's frame log."""
    frames = FrameLog()
    proxy = FaultProxy(upstream_port=0, tap=frames)
    try:
        with bench_cluster(tmp_path_factory.mktemp("apache-kafka"), heap="1g", proxy_port=proxy.port) as cluster:
            node = cluster.nodes[0]
            proxy.upstream_port = node.ports["PROXIED"]
            broker = Target("Apache Kafka 4.1.1", cluster.bootstrap_servers, node.process.pid, True)
            yield warmed_up(broker), proxy, frames
    finally:
        proxy.stop()


@pytest.mark.parametrize("partitions", PARTITIONS)
def test_what_produce_requests_cost_the_broker(benchmark, proxied_broker, partitions):
    def topic(client: str) -> list[tuple[str, int]]:
        name = f"wire-{client}-{partitions}-{time.monotonic_ns()}"
        create_topics(proxied_broker[0], [name], partitions)
        return [(name, p) for p in range(partitions)]

    capture_and_replay(benchmark, proxied_broker, f"{partitions} partitions", topic)


def test_what_many_topics_requests_cost_the_broker(benchmark, proxied_broker):
    def topics(client: str) -> list[tuple[str, int]]:
        names = [f"wire-{client}-{i}-{time.monotonic_ns()}" for i in range(MANY_TOPICS)]
        create_topics(proxied_broker[0], names, 4)
        return many_topic_targets(names, 4)

    capture_and_replay(benchmark, proxied_broker, f"{MANY_TOPICS} topics x 4 partitions", topics)


def capture_and_replay(benchmark, proxied_broker, case: str, make_targets) -> None:
    """Each client's run through the proxy (on the targets make_targets(client) made for it), what it sent, and
    the replays of both streams."""
    broker, proxy, log = proxied_broker
    streams: dict[str, tuple[list[bytes], int]] = {}
    for client in CLIENTS:
        targets = make_targets(client)
        first = proxy.connections
        cpu = broker.cpu_seconds()
        wall, client_cpu = ClientRun("produce", client, proxy.address, targets, RECORDS).go()
        cpu = broker.cpu_seconds() - cpu
        lines, frames, records = describe(log.since(first))
        assert records >= RECORDS, f"{client}: {records} records captured of {RECORDS}"
        streams[client] = frames, records
        print(f"\n-- {client}, {case}, through the proxy: {RECORDS / wall:,.0f} msgs/s, client "
              f"{client_cpu / RECORDS * 1e9:.0f} ns, broker {cpu / RECORDS * 1e9:.0f} ns per record")
        for line in lines:
            print("   " + line)
    host, port_text = broker.bootstrap_servers.rsplit(":", 1)
    costs: dict[str, list[float]] = collections.defaultdict(list)
    rates: dict[str, list[float]] = collections.defaultdict(list)

    def replays() -> None:
        for _ in range(REPLAYS):
            for client, (frames, records) in streams.items():
                cpu, started = broker.cpu_seconds(), time.perf_counter()
                errors = replay((host, int(port_text)), frames)
                rates[client].append(records / (time.perf_counter() - started))
                costs[client].append((broker.cpu_seconds() - cpu) / records * 1e9)
                assert set(errors) == {0}, f"{client}'s replayed requests failed: {dict(errors)}"

    benchmark.group = f"replayed produce requests, {case}, Apache Kafka 4.1.1"
    benchmark.pedantic(replays, rounds=1, iterations=1)
    for client, values in costs.items():
        print(f"   replay of {client}'s {len(streams[client][0])} requests, {case}, {WINDOW} in "
              f"flight: broker CPU per record median {statistics.median(values):.0f} ns "
              f"({', '.join(f'{v:.0f}' for v in values)}); the broker took {statistics.median(rates[client]):,.0f} "
              f"msgs/s of it (median)")
