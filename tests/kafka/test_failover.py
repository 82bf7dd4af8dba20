"""Metadata refresh when things fail (issue 21): a broker's failed connection makes every client refresh its
metadata, and producer, consumer and admin find a partition's leader at its new address at once, instead of
waiting out request timeouts or the periodic refresh (metadata_max_age_ms)."""
from __future__ import annotations

import socket
import uuid

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import Admin, Consumer, Producer
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient
from fastmq.kafka.structs import TopicPartition

# Far longer than any wait below: a client that waited for either would fail the test.
SLOW = {"request_timeout_ms": 120000, "metadata_max_age_ms": 600000}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def moving_broker(tmp_path):
    """An embedded broker that moves: .move() closes it and starts it again, same data and node id, on the
    second address of .bootstrap_servers (the first one then refuses connections)."""

    class Moving:
        def __init__(self) -> None:
            self.second_port = free_port()
            self.broker = EmbeddedBroker(tmp_path / "data").start()
            self.bootstrap_servers = f"{self.broker.bootstrap_servers},127.0.0.1:{self.second_port}"

        def move(self) -> None:
            self.broker.close()
            self.broker = EmbeddedBroker(tmp_path / "data", port=self.second_port).start()

    moving = Moving()
    yield moving
    moving.broker.close()


def test_producer_follows_the_leader_to_its_new_address(moving_broker):
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    with Producer(moving_broker.bootstrap_servers, delivery_timeout_ms=120000, **SLOW) as producer:
        assert producer.send(topic, b"before").get(30).offset == 0
        moving_broker.move()
        futures = [producer.send(topic, b"after %d" % i) for i in range(50)]
        assert [f.get(30).offset for f in futures] == list(range(1, 51))


def test_consumer_follows_the_leader_to_its_new_address(moving_broker):
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    with Producer(moving_broker.bootstrap_servers, **SLOW) as producer:
        producer.send(topic, b"before").get(30)
        with Consumer(bootstrap_servers=moving_broker.bootstrap_servers, auto_offset_reset="earliest",
                      **SLOW) as consumer:
            consumer.assign([tp])
            assert [r.value for r in _consume(consumer, 1)] == [b"before"]
            moving_broker.move()
            producer.send(topic, b"after").get(30)
            assert [r.value for r in _consume(consumer, 1)] == [b"after"]


def test_admin_follows_the_broker_to_its_new_address(moving_broker):
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    with Admin(moving_broker.bootstrap_servers, **SLOW) as admin:
        admin.create_topics({topic: {"num_partitions": 1}})
        moving_broker.move()
        assert topic in admin.describe_topics([topic], timeout=30)


def test_a_failed_connection_triggers_a_refresh(proxied_kafka):
    with KafkaClient(bootstrap_servers=proxied_kafka.bootstrap_servers, reconnect_backoff_ms=10, **SLOW) as client:
        client.bootstrap(30)
        node = next(iter(client.cluster.brokers))
        client.request(node, _metadata_request(), 30)       # the broker's connection is up
        version = client.cluster.version
        proxied_kafka.proxy.cut_after(1)
        with pytest.raises(kerrors.KafkaConnectionError):
            client.request(node, _metadata_request(), 30)
        assert client.wait_for_metadata(version, 30)


HELD_MS = 20_000


def test_metadata_does_not_wait_behind_a_request_the_broker_holds(apache_kafka):
    """A broker answers one request of a connection at a time: a metadata refresh queued behind a Fetch it
    holds for max_wait_ms (or a Produce held for acks=all) would come late; it has a connection of its own."""
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    with Producer(apache_kafka.bootstrap_servers) as producer:
        producer.send(topic, b"x", partition=0).get(30)     # the Fetch below waits for a second record
    with KafkaClient(bootstrap_servers=apache_kafka.bootstrap_servers, **SLOW) as client:
        info = client.topic_metadata(topic, 30)
        leader = info.partitions[0].leader
        client.request(leader, _metadata_request(), 30)          # the broker's connection is up
        fetch = kp.FetchRequest(
            max_wait_ms=HELD_MS, min_bytes=1 << 20, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[kp.FetchRequest.FetchTopic(
                topic=topic, topic_id=info.topic_id, partitions=[kp.FetchRequest.FetchPartition(
                    partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])])
        held = client.call(leader, fetch, 2 * HELD_MS / 1000)
        version = client.request_update()
        assert client.wait_for_metadata(version, HELD_MS / 4000)
        assert not held.done(), "the broker answered the Fetch before max_wait_ms: nothing was held"
        # Closing the client ends the held Fetch.


def _metadata_request():
    return kp.MetadataRequest(topics=[])


def _consume(consumer: Consumer, count: int, timeout: float = 30.0) -> list:
    records = []
    for _ in range(int(timeout / 0.5)):
        records += consumer.consume(count - len(records), 0.5)
        if len(records) >= count:
            break
    return records
