"""Apache Kafka, three brokers: the idempotent producer while the leader of the partitions it writes is killed
(kill -9), brought back or lost for good. Replication factor 3, min.insync.replicas 2, acks=all: no acknowledged
record may be lost, none may come twice, each partition keeps the order of sending, and every send completes
(with one broker lost two replicas remain, so every send can succeed, and must). Also: transactions and a
consumer group under a kill, and, without a fault, leaders moved by elections (NOT_LEADER_OR_FOLLOWER and
FENCED_LEADER_EPOCH met and got over) and a consumer fetching from two leaders at once."""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict

import confluent_kafka
import pytest

from fastmq.kafka import Admin, Consumer
from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import NewTopic
from fastmq.kafka.client import KafkaClient
from fastmq.kafka.compat import KafkaAdminClient
from fastmq.kafka.coordinator import GROUP, TRANSACTION, coordinator_entries, find_coordinator_request
from fastmq.kafka.producer import Producer
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition

RECORDS = 200_000
PARTITIONS = 6
KEYS = 64
WAIT = 60.0


def create_replicated_topic(cluster, prefix: str, partitions: int = PARTITIONS) -> tuple[str, int]:
    """A new topic of replication factor 3 and min.insync.replicas 2; returns it with the node leading most
    of its partitions (the victim of a kill)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with Admin(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.wait_for_topics([topic], timeout=WAIT)
        leaders = [p.leader for p in admin.describe_topics([topic])[topic].partitions]
    return topic, max(set(leaders), key=leaders.count)


class Outage:
    """A node's outage within a `with` block: kill() is kill -9, restart_in_background() brings it back while the
    test goes on; leaving the block restarts it if it is still down and waits for it (the next test of the
    module finds three nodes)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.node_id: int | None = None
        self.restarting = threading.Thread(target=lambda: cluster.restart(self.node_id), name="restart-node")

    def kill(self, node_id: int) -> None:
        self.node_id = node_id
        self.cluster.node(node_id).kill()

    def restart_in_background(self) -> None:
        self.restarting.start()

    def restart(self) -> None:
        """Restart the node and wait until it answers."""
        self.restart_in_background()
        self.restarting.join(2 * WAIT)

    def __enter__(self) -> Outage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.node_id is not None and self.restarting.ident is None:
            self.restarting.start()
        if self.restarting.ident is not None:
            self.restarting.join(2 * WAIT)


def read_everything(servers: str, topic: str, expected: int) -> dict[int, list[int]]:
    """partition -> the record numbers in log order, read by librdkafka up to `expected` records."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": f"g-{topic}",
                                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                       "fetch.queue.backoff.ms": 0})
    logs: dict[int, list[int]] = defaultdict(list)
    try:
        reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read = idle = 0
        while read < expected and idle < 20:        # bounded: 20 empty seconds in a row end it
            messages = [m for m in reader.consume(10000, 1.0) if m.error() is None]
            idle = 0 if messages else idle + 1
            for message in messages:
                logs[message.partition()].append(int(message.value()))
            read += len(messages)
    finally:
        reader.close()
    return logs


@pytest.mark.slow
@pytest.mark.parametrize("comes_back", [True, False], ids=["restarted", "lost-for-good"])
def test_killing_the_leader_while_producing_loses_and_duplicates_nothing(apache_kafka_cluster, comes_back):
    cluster = apache_kafka_cluster
    topic, victim = create_replicated_topic(cluster, "faults")
    futures = []
    # Restarted while records keep coming, or (lost for good) only once the test is over, for the next test.
    with Outage(cluster) as outage, Producer(cluster.bootstrap_servers, acks="all", enable_idempotence=True,
                                             linger_ms=5, request_timeout_ms=5000,
                                             delivery_timeout_ms=120_000) as producer:
        for number in range(RECORDS):
            futures.append(producer.send(topic, b"%d" % number, key=b"key-%d" % (number % KEYS)))
            if number == RECORDS // 4:
                futures[RECORDS // 8].get(WAIT)         # the victim has been taking records
                outage.kill(victim)                     # the node leading most partitions
            elif number == RECORDS // 2:
                futures[-1].get(2 * WAIT)               # the others took over its partitions
                if comes_back:
                    outage.restart_in_background()
        producer.flush(3 * WAIT)
    assert all(future.is_done for future in futures), "a send never completed"
    failed = [future.exception for future in futures if future.exception is not None]
    assert not failed, f"{len(failed)} sends failed, the first: {failed[0]!r}"
    acknowledged = {number: future.get(0) for number, future in enumerate(futures)}

    logs = read_everything(cluster.bootstrap_servers, topic, RECORDS)
    seen = [number for log in logs.values() for number in log]
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} records written twice"
    lost = set(acknowledged) - set(seen)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    for partition, log in logs.items():
        assert log == sorted(log), f"partition {partition} is out of send order"
        # What each send was told is where its record is.
        where = [(acknowledged[number].partition, acknowledged[number].offset) for number in log]
        assert where == [(partition, offset) for offset in range(len(log))]


TRANSACTIONS = 90
PER_TRANSACTION = 300


class CommittedReader:
    """A read_committed fastmq consumer of every partition of a topic, reading on its own thread while the
    cluster is under faults: .seen lists (partition, record number) in the order read."""

    def __init__(self, servers: str, topic: str) -> None:
        self.consumer = Consumer(bootstrap_servers=servers, isolation_level="read_committed",
                                 auto_offset_reset="earliest", request_timeout_ms=5000)
        self.consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        self.seen: list[tuple[int, int]] = []
        self.producing = True
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._read, name="committed-reader")
        self.thread.start()

    def _read(self) -> None:
        try:
            # Bounded: after the producer is done, until the end of every partition, or 600 empty polls.
            idle = 0
            while idle < 600 and (self.producing or not self.consumer.at_end()):
                records = self.consumer.consume(5000, 0.1)
                idle = 0 if records or self.producing else idle + 1
                self.seen += [(r.partition, int(r.value)) for r in records]
        except BaseException as exc:
            self.failure = exc

    def finish(self) -> list[tuple[int, int]]:
        self.producing = False
        self.thread.join(3 * WAIT)
        self.consumer.close()
        assert not self.thread.is_alive(), "the read_committed consumer never reached the end of the topic"
        if self.failure is not None:
            raise self.failure
        return self.seen


@pytest.mark.slow
def test_transactions_under_a_leader_kill_show_committed_records_once_and_aborted_never(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    topic, _ = create_replicated_topic(cluster, "txn-faults")
    producer = Producer(cluster.bootstrap_servers, transactional_id=f"t-{topic}", enable_idempotence=True,
                        acks="all", linger_ms=5, request_timeout_ms=5000, delivery_timeout_ms=120_000)
    reader = CommittedReader(cluster.bootstrap_servers, topic)
    committed: list[int] = []
    aborted: list[int] = []
    with Outage(cluster) as outage:
        try:
            producer.init_transactions(WAIT)
            # The transaction coordinator dies too (as a leader, it has partitions of the topic: 6 over 3 nodes).
            victim = coordinator(cluster.bootstrap_servers, f"t-{topic}", TRANSACTION)
            for transaction in range(TRANSACTIONS):
                if transaction == TRANSACTIONS // 3:
                    outage.kill(victim)
                elif transaction == 2 * TRANSACTIONS // 3:
                    outage.restart_in_background()
                numbers = range(transaction * PER_TRANSACTION, (transaction + 1) * PER_TRANSACTION)
                producer.begin_transaction()
                for number in numbers:
                    producer.send(topic, b"%d" % number, key=b"key-%d" % (number % KEYS))
                if transaction % 3 == 2:
                    producer.abort_transaction(WAIT)
                    aborted += numbers
                else:
                    producer.commit_transaction(WAIT)
                    committed += numbers
        finally:
            producer.close(WAIT)
            seen = reader.finish()
    numbers = [number for _, number in seen]
    assert not set(numbers) & set(aborted), f"{len(set(numbers) & set(aborted))} aborted records were read"
    assert len(numbers) == len(set(numbers)), f"{len(numbers) - len(set(numbers))} records read twice"
    missing = set(committed) - set(numbers)
    assert not missing, f"{len(missing)} committed records never read, e.g. {sorted(missing)[:5]}"
    for partition in range(PARTITIONS):
        log = [number for p, number in seen if p == partition]
        assert log == sorted(log), f"partition {partition} is out of send order"


GROUP_RECORDS = 30_000
MEMBERS = 3
SESSION_TIMEOUT_MS = 10_000


class GroupJournal:
    """What the members of a group did, in one order: deliveries (partition, offset, record number) and the
    offsets whose commit the coordinator acknowledged."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple] = []

    def delivered(self, records: list) -> None:
        with self.lock:
            self.events += [("delivered", r.partition, r.offset, int(r.value)) for r in records]

    def committed(self, offsets: dict) -> None:
        with self.lock:
            self.events += [("committed", tp.partition, meta.offset) for tp, meta in offsets.items()]

    def numbers(self) -> set[int]:
        with self.lock:
            return {event[3] for event in self.events if event[0] == "delivered"}

    def unexplained_duplicates(self) -> list[tuple[int, int]]:
        """(partition, offset) delivered again although a commit beyond it had been acknowledged before."""
        delivered: set[tuple[int, int]] = set()
        committed: dict[int, int] = {}
        wrong = []
        for event in self.events:
            if event[0] == "committed":
                committed[event[1]] = max(committed.get(event[1], 0), event[2])
                continue
            where = (event[1], event[2])
            if where in delivered and event[2] < committed.get(event[1], 0):
                wrong.append(where)
            delivered.add(where)
        return wrong


class Member:
    """One member of the group on its own thread and client: consumes, commits what it consumed after each
    batch (a failed commit is retried with the next one), and notes every member id it had."""

    def __init__(self, servers: str, topic: str, group: str, journal: GroupJournal) -> None:
        self.consumer = Consumer(topic, bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                                 heartbeat_interval_ms=1000, request_timeout_ms=5000)
        self.journal = journal
        self.member_ids: set[str] = set()
        self.failed_commits = 0
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._consume, name="group-member")
        self.thread.start()

    def _consume(self) -> None:
        uncommitted: dict[TopicPartition, OffsetAndMetadata] = {}
        try:
            for _ in range(int(10 * WAIT / 0.1)):             # bounded: 10 WAITs of 0.1 s polls at the most
                if self.stop.is_set():
                    return
                records = self.consumer.consume(500, 0.1)
                self.journal.delivered(records)
                member_id = self.consumer.group_metadata().member_id
                if member_id:
                    self.member_ids.add(member_id)
                for record in records:
                    uncommitted[TopicPartition(record.topic, record.partition)] = OffsetAndMetadata(record.offset + 1)
                if uncommitted:
                    try:
                        self.consumer.commit(uncommitted)
                    except kerrors.KafkaError:
                        self.failed_commits += 1              # the coordinator is moving: the next batch retries
                    else:
                        self.journal.committed(uncommitted)
                        uncommitted = {}
        except BaseException as exc:
            self.failure = exc

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)
        self.consumer.close(autocommit=False)
        assert not self.thread.is_alive(), "a member's poll never returned"
        if self.failure is not None:
            raise self.failure


def coordinator(servers: str, key: str, key_type: int) -> int:
    """The node coordinating a group (GROUP) or a transactional id (TRANSACTION)."""
    with KafkaClient(bootstrap_servers=servers) as client:
        client.bootstrap(WAIT)
        entry = coordinator_entries(client.request(None, find_coordinator_request([key], key_type), WAIT), [key])[0]
    assert entry.error_code == 0, f"FindCoordinator for {key!r} answered error {entry.error_code}"
    return entry.node_id


def wait_until(condition, timeout: float, what: str) -> None:
    for _ in range(int(timeout / 0.1)):
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


@pytest.mark.slow
def test_a_group_keeps_consuming_while_its_coordinator_is_killed_and_restarted(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    topic, _ = create_replicated_topic(cluster, "group-faults")
    group = f"g-{topic}"
    journal = GroupJournal()
    members: list[Member] = []
    thirds = [range(part * GROUP_RECORDS // 3, (part + 1) * GROUP_RECORDS // 3) for part in range(3)]
    try:
        with Outage(cluster) as outage, Producer(cluster.bootstrap_servers, acks="all", enable_idempotence=True,
                                                 linger_ms=5) as producer:
            def produce(numbers: range) -> None:
                futures = [producer.send(topic, b"%d" % n, key=b"key-%d" % (n % KEYS)) for n in numbers]
                producer.flush(2 * WAIT)
                assert all(future.exception is None for future in futures), "a send failed"

            members = [Member(cluster.bootstrap_servers, topic, group, journal) for _ in range(MEMBERS)]
            produce(thirds[0])
            wait_until(lambda: set(thirds[0]) <= journal.numbers(), WAIT, "the first third consumed")
            outage.kill(coordinator(cluster.bootstrap_servers, group, GROUP))
            produce(thirds[1])
            wait_until(lambda: set(thirds[1]) <= journal.numbers(), WAIT, "consumed while the coordinator is away")
            outage.restart()
            produce(thirds[2])
        wait_until(lambda: set(range(GROUP_RECORDS)) <= journal.numbers(), 2 * WAIT, "every record consumed")
        # Settled: every partition has exactly one owner (the members keep polling meanwhile).
        wait_until(lambda: sorted(tp.partition for m in members for tp in m.consumer.assignment())
                   == list(range(PARTITIONS)), SESSION_TIMEOUT_MS / 1000, "each partition owned by one member")
    finally:
        for member in members:
            member.finish()
    # The coordinator's move cost no member its membership: the group settled within the session timeout.
    assert all(len(member.member_ids) == 1 for member in members), [m.member_ids for m in members]
    assert not journal.unexplained_duplicates(), "records delivered again after their commit was acknowledged"


def move_leader(servers: str, tp: TopicPartition, replicas: list[int]) -> int:
    """Make replicas[0] the leader of a partition without a fault: its replica list reordered, then a preferred
    election; returns the new leader epoch."""
    with Admin(servers) as admin, KafkaAdminClient(bootstrap_servers=servers) as compat:
        admin.alter_partition_reassignments({tp: replicas})
        wait_until(lambda: list(admin.describe_topics([tp.topic])[tp.topic].partitions[tp.partition].replicas)
                   == replicas, WAIT, f"{tp} reordered to {replicas}")
        compat.elect_leaders(0, {tp.topic: [tp.partition]})
        # One answer gives both (brokers apply the controller's changes one after the other: another broker's
        # answer may be older).
        seen: list[int] = []

        def moved() -> bool:
            partition = admin.describe_topics([tp.topic])[tp.topic].partitions[tp.partition]
            seen.append(partition.leader_epoch)
            return partition.leader == replicas[0]

        wait_until(moved, WAIT, f"{tp} led by broker {replicas[0]}")
        return seen[-1]


def test_a_moved_leader_answers_not_leader_and_fenced_leader_epoch_and_the_clients_go_on(apache_kafka_cluster,
                                                                                            caplog):
    """The leader of a partition moves from A to B and back to A (reordered replicas, preferred elections) while
    a producer and a (paused) consumer keep their metadata of A at the first leader epoch: the producer's next
    send goes to A, which answers NOT_LEADER_OR_FOLLOWER; the consumer's next fetch goes to A at an epoch two
    elections old, which answers FENCED_LEADER_EPOCH. Each refreshes its metadata and goes on."""
    servers = apache_kafka_cluster.bootstrap_servers
    topic, _ = create_replicated_topic(apache_kafka_cluster, "epochs", partitions=1)
    tp = TopicPartition(topic, 0)
    with Admin(servers) as admin:
        first = admin.describe_topics([topic])[topic].partitions[0]
    a, b = first.leader, next(r for r in first.replicas if r != first.leader)
    others = [r for r in first.replicas if r not in (a, b)]
    caplog.set_level(logging.DEBUG, logger="fastmq.kafka")
    # No periodic refresh within the test: only the brokers' errors can tell the clients that the leader moved.
    with Producer(servers, acks="all", enable_idempotence=True, metadata_max_age_ms=600_000,
                  request_timeout_ms=5000) as producer, \
            Consumer(bootstrap_servers=servers, auto_offset_reset="earliest", metadata_max_age_ms=600_000,
                     request_timeout_ms=5000) as consumer:
        consumer.assign([tp])
        producer.send(topic, b"0").get(WAIT)
        read: list[bytes] = []

        def read_up_to(count: int) -> bool:
            read.extend(record.value for record in consumer.consume(10, 0.2))
            return len(read) >= count

        wait_until(lambda: read_up_to(1), WAIT, "the first record read")
        consumer.pause(tp)
        old_epoch = consumer.client.cluster.leader_epoch_for(tp)
        assert producer.client.cluster.leader_for(tp) == consumer.client.cluster.leader_for(tp) == a

        move_leader(servers, tp, [b, a, *others])
        producer.send(topic, b"1").get(WAIT)                        # A: NOT_LEADER_OR_FOLLOWER, then B takes it
        assert producer.client.cluster.leader_for(tp) == b
        epoch = move_leader(servers, tp, [a, b, *others])
        producer.send(topic, b"2").get(WAIT)                        # B: NOT_LEADER_OR_FOLLOWER, then A takes it
        assert epoch >= old_epoch + 2

        consumer.resume(tp)                                         # its Fetch names A at the old epoch
        wait_until(lambda: read_up_to(3), WAIT, "the records written after the moves read")
        assert read == [b"0", b"1", b"2"]
        assert consumer.client.cluster.leader_epoch_for(tp) == epoch
    refused = [r.getMessage() for r in caplog.records if "NotLeaderForPartitionError" in r.getMessage()
               and r.name == "fastmq.kafka.sender"]
    assert len(refused) >= 2, "the producer's sends to the old leaders were not refused as NOT_LEADER_OR_FOLLOWER"
    assert any("FencedLeaderEpochError; refreshing metadata" in r.getMessage() for r in caplog.records
               if r.name == "fastmq.kafka.fetcher"), "the consumer's fetch at the old leader epoch was not fenced"


def test_a_consumer_fetches_from_every_leader_while_one_of_them_has_nothing_new(apache_kafka_cluster):
    """Partitions 0 and 1, led by two brokers, both empty, long-polled; then records come to partition 1 only:
    the fetch waiting on the empty partition 0 must not hold the whole fetch budget (a Fetch to the first node
    reserved all of fetch_max_bytes each time it came back empty, and the second node was never asked again: the
    group test's members stopped consuming partitions led by a node after another one in their assignment)."""
    servers = apache_kafka_cluster.bootstrap_servers
    topic = f"two-leaders-{uuid.uuid4().hex[:10]}"
    with Admin(servers) as admin:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [1], 1: [2]})])
        admin.wait_for_topics([topic], timeout=WAIT)
    with Producer(servers) as producer, \
            Consumer(bootstrap_servers=servers, auto_offset_reset="earliest", request_timeout_ms=5000) as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert consumer.consume(100, 2.0) == []             # a few rounds of empty long polls on both nodes
        for number in range(100):
            producer.send(topic, b"%d" % number, partition=1)
        producer.flush(WAIT)
        read: list[bytes] = []
        wait_until(lambda: read.extend(r.value for r in consumer.consume(100, 0.2)) or len(read) >= 100, 10.0,
                   "the records of the second leader read")
    assert sorted(int(value) for value in read) == list(range(100))
