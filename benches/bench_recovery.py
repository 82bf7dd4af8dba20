"""Recovery time of the producers on a three-node Apache Kafka cluster, fastmq vs confluent-kafka in one run.

Each client writes 200k keyed records (6 partitions, replication factor 3, min.insync.replicas 2, acks=all,
idempotent) at a fixed rate to a topic of its own; at 30% of its records the leader of partition 0 is killed
with kill -9, at 60% it is restarted. Measured: the longest wait for an outcome (the time from send() to the
delivery report) of the records of the partitions the killed node led; every send must succeed. The rate is
fixed so that the kill and the restart fall in the middle of the writing, for both clients alike. Printed beside it:
when a live broker first named the new leaders (the cluster's part: the dead broker's session timeout, a
controller election when it was the active controller) and when each of those partitions first answered the
client after the kill (the client finding the new leader: fastmq asks for metadata every retry_backoff_ms while
a leader is missing), so that the time a client spends draining its backlog after that shows apart.

Run: pytest benches/bench_recovery.py --benchmark-only -s
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from fastmq.kafka import protocol as kp
from tests.support.apache_kafka import KafkaCluster
from tests.support.kafka_wire import Wire

PROTOCOL = "kafka"
RECORDS = 200_000
RATE = 10_000                       # records per second: 20 s of writing
PARTITIONS = 6
KEYS = 64
WAIT = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("recovery-cluster"), 3) as started:
        warm_up(started)
        yield started


def warm_up(cluster) -> None:
    """Replicated writes before the first measured client: the brokers' JIT and the idempotence machinery are
    warm for both clients alike (the first client met a cold cluster before)."""
    from fastmq.kafka import Producer

    topic, _, _ = topic_and_victim(cluster)
    with Producer(cluster.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=5) as producer:
        for number in range(RECORDS // 4):
            producer.send(topic, b"%d" % number, key=b"key-%d" % (number % KEYS))
        producer.flush(3 * WAIT)


def topic_and_victim(cluster) -> tuple[str, int, set[int]]:
    """A fresh topic; the leader of its partition 0 and every partition that node leads."""
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    topic = f"recovery-{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.wait_for_topics([topic], timeout=WAIT)
        leaders = {p.partition: p.leader for p in admin.describe_topics([topic])[topic].partitions}
    return topic, leaders[0], {p for p, leader in leaders.items() if leader == leaders[0]}


class Outcomes:
    """When each record was sent and when its delivery report came (any thread), and when the victim was killed
    and restarted."""

    def __init__(self) -> None:
        self.sent = [0.0] * RECORDS
        self.killed = self.restarted = 0.0
        self.elected = float("nan")         # when a live broker's metadata first named new leaders for them all
        self.done: dict[int, tuple[float, int, bool]] = {}      # number -> (when, partition, succeeded)

    def report(self, number: int, partition: int, succeeded: bool) -> None:
        self.done[number] = (time.monotonic(), partition, succeeded)

    def longest_wait(self, partitions: set[int]) -> tuple[float, int]:
        """The longest wait on these partitions, and the record that waited it."""
        return max((when - self.sent[n], n) for n, (when, partition, _) in self.done.items() if partition in partitions)

    def first_outcomes_after(self, start: float, partitions: set[int]) -> str:
        """When the first outcome on each of these partitions came after `start`, in seconds after it (its new
        leader answered: where the election and the client's finding it end)."""
        firsts = {partition: float("inf") for partition in partitions}
        for when, partition, _ in self.done.values():
            if partition in firsts and start < when < firsts[partition]:
                firsts[partition] = when
        return ", ".join(f"{partition}: {when - start:+.2f} s" for partition, when in sorted(firsts.items()))

    def failures(self) -> int:
        return sum(1 for _, _, succeeded in self.done.values() if not succeeded) + RECORDS - len(self.done)


def watch_election(cluster, topic: str, victim: int, outcomes: Outcomes) -> None:
    """From the kill on, ask a live broker over a connection of its own every 50 ms until its metadata names
    leaders other than the victim for every partition of the topic: outcomes.elected (bounded by WAIT)."""
    live = next(node for node in cluster.nodes if node.node_id != victim)
    wire = Wire(live.bootstrap_servers, client_id="election-watch")
    try:
        wire.sock.settimeout(5.0)
        request = kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(name=topic)],
                                     allow_auto_topic_creation=False)
        for _ in range(int(WAIT / 0.05)):
            answer = wire.request(3, 1, request)
            leaders = [p.leader_id for t in answer.topics for p in t.partitions]
            if leaders and all(leader not in (victim, -1) for leader in leaders):
                outcomes.elected = time.monotonic()
                return
            time.sleep(0.05)
    finally:
        wire.close()


def write_paced(cluster, topic: str, victim: int, send, outcomes: Outcomes, poll=lambda: None) -> None:
    """send(number) at RATE records/s; kill -9 of the victim at 30%, restart (on its own thread, as a
    restarted node takes seconds to answer) at 60%."""
    def restart() -> None:
        cluster.restart(victim)
        outcomes.restarted = time.monotonic()

    restarting = threading.Thread(target=restart, name="restart-victim")
    watching = threading.Thread(target=watch_election, args=(cluster, topic, victim, outcomes), name="election")
    start = time.monotonic()
    try:
        for number in range(RECORDS):
            if number == RECORDS * 3 // 10:
                cluster.node(victim).kill()
                outcomes.killed = time.monotonic()
                watching.start()
            elif number == RECORDS * 6 // 10:
                restarting.start()
            ahead = start + number / RATE - time.monotonic()
            if number % 100 == 0 and ahead > 0:
                time.sleep(ahead)
            outcomes.sent[number] = time.monotonic()
            send(number)
            poll()
    finally:
        if restarting.ident is None:
            restarting.start()
        restarting.join(2 * WAIT)
        if watching.ident is not None:
            watching.join(2 * WAIT)


def run_fastmq(cluster, topic: str, victim: int, outcomes: Outcomes) -> None:
    from fastmq.kafka import Producer

    with Producer(cluster.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=5,
                  delivery_timeout_ms=120_000) as producer:
        def send(number: int) -> None:
            future = producer.send(topic, b"%d" % number, key=b"key-%d" % (number % KEYS))
            future.add_callback(lambda metadata: outcomes.report(number, metadata.partition, True))
            future.add_errback(lambda error: outcomes.report(number, future.topic_partition.partition, False))

        write_paced(cluster, topic, victim, send, outcomes)
        producer.flush(3 * WAIT)


def run_confluent(cluster, topic: str, victim: int, outcomes: Outcomes) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5,
                                         "delivery.timeout.ms": 120_000, "queue.buffering.max.messages": RECORDS})

    def send(number: int) -> None:
        producer.produce(topic, b"%d" % number, key=b"key-%d" % (number % KEYS),
                         on_delivery=lambda error, message: outcomes.report(number, message.partition(),
                                                                            error is None))

    write_paced(cluster, topic, victim, send, outcomes, lambda: producer.poll(0))
    assert producer.flush(3 * WAIT) == 0


CLIENTS = {"fastmq": run_fastmq, "confluent-kafka": run_confluent}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_recovery_after_a_leader_kill(compare, cluster, client):
    topic, victim, led = topic_and_victim(cluster)
    outcomes = Outcomes()
    bench = compare("leader kill -9 at 30%, restart at 60% (time: the whole run)", client, items=RECORDS)
    bench.pedantic(CLIENTS[client], args=(cluster, topic, victim, outcomes), rounds=1, iterations=1)
    longest, number = outcomes.longest_wait(led)
    bench.extra_info["longest_wait_ms"] = round(longest * 1000)
    sent = outcomes.sent[number] - outcomes.killed
    print(f"\n{client}: longest wait for an outcome on partitions {sorted(led)} of the killed node {victim}: "
          f"{longest:.2f} s (sent {sent:+.2f} s after the kill, answered {sent + longest:+.2f} s; new leaders elected "
          f"{outcomes.elected - outcomes.killed:+.2f} s, their first answers to the client "
          f"{outcomes.first_outcomes_after(outcomes.killed + 0.5, led)}; the node answered again "
          f"{outcomes.restarted - outcomes.killed:+.2f} s); failed sends: {outcomes.failures()}")
    assert outcomes.failures() == 0
