"""fastmq's TubeMQ client against Apache InLong TubeMQ 2.4.0 (master + broker from Maven Central, no ZooKeeper,
one pair per session: tests/tubemq/conftest.py): produce with attributes and consume everything back; a fastmq
consumer and the Java client's in one group, balanced by the real master; bound consumption from an append
offset."""
from __future__ import annotations

import contextlib

from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.tubemq import JavaPeer
from tests.support.waiting import wait_for
from tests.tubemq.test_client import FAST, drain


@contextlib.contextmanager
def publishing(real_tubemq, topic: str):
    """(a producer, the partition of the message b"probe" it sent) once the real broker takes messages of
    `topic`."""
    with Producer(real_tubemq.master_address, heartbeat_interval=0.5) as producer:
        probe = []

        def published() -> bool:
            try:
                producer.publish(topic, timeout=5)
                probe.append(producer.send(Message(topic, b"probe"), timeout=5).partition.partition_id)
                return True
            except Exception:
                return False
        wait_for(published, timeout=30, interval=0.5, message=f"the real broker takes messages of {topic}")
        yield producer, probe[0]


def test_produce_and_consume_on_a_real_tubemq(real_tubemq):
    with publishing(real_tubemq, "real_topic") as (producer, _):
        futures = [producer.send_async(Message("real_topic", b"r%d" % i, attributes={"k": "v"},
                                               msg_type="t1" if i % 2 else "t2")) for i in range(200)]
        for future in futures:
            future.result(30)                                    # raises what failed
    with PullConsumer(real_tubemq.master_address, "real_group", ["real_topic"], **FAST) as consumer:
        received = drain(consumer, 201, timeout=60)
    bodies = sorted(m.body for m in received)
    assert bodies == sorted([b"probe"] + [b"r%d" % i for i in range(200)])
    assert all(m.attributes == {"k": "v"} for m in received if m.body != b"probe")


def test_java_and_fastmq_consumers_share_a_group_on_the_real_master(real_tubemq):
    topic, group = "real_shared", "real_mixed"
    with publishing(real_tubemq, topic) as (producer, _probe_partition), \
            PullConsumer(real_tubemq.master_address, group, [topic], **FAST) as ours, \
            JavaPeer("consume", real_tubemq.master_address, topic, group, "400", "0", "3000") as java:
        wait_for(lambda: len(ours.partitions) == 2 and "SUBSCRIBED" in java.output(), timeout=40, interval=0.2,
                 message=lambda: f"the real master gave fastmq two of four partitions: {ours.partitions}")
        mine = {p.partition_id for p in ours.partitions}
        sent = [future.result(10) for future in [producer.send_async(Message(topic, b"m-%d" % i))
                                                  for i in range(400)]]
        ours_expected = sum(result.partition.partition_id in mine for result in sent)
        # The probe went out before either consumer joined: whichever first held its partition may have read it.
        received = drain(ours, ours_expected, timeout=30)
        missing = ours_expected - sum(m.body.startswith(b"m-") for m in received)
        if missing > 0:
            received += drain(ours, missing, timeout=30)
        lines = java.finish(timeout=60)
    java_bodies = [line[5:] for line in lines if line.startswith("BODY ")]
    ours_bodies = [m.body.decode() for m in received]
    assert 0 < ours_expected < 400 and all(m.partition in mine for m in received)
    assert sorted(java_bodies + ours_bodies) == sorted([f"m-{i}" for i in range(400)] + ["probe"])


def test_bound_consumption_on_the_real_master_starts_where_a_message_went(real_tubemq):
    """A bound consumer (one member, one partition named) starts at a message's append offset."""
    topic = "real_bound"
    with publishing(real_tubemq, topic) as (producer, _):
        sent = [producer.send(Message(topic, b"b%d" % i), key=b"one") for i in range(8)]
    partition = sent[0].partition
    with PullConsumer(real_tubemq.master_address, "real_bound_one", [topic],
                      offsets={partition.key: sent[3].append_offset},
                      session_key="real-session", **FAST) as bound:
        tail = drain(bound, 5, timeout=30)
        assert [p.partition_id for p in bound.partitions] == [partition.partition_id]
    assert [m.body for m in tail] == [b"b%d" % i for i in range(3, 8)]
