"""The Apache InLong TubeMQ Java client (tubemq-client 1.13.0, tests/tubemq_java/TubeMQPeer.java) against the
embedded master + broker, beside fastmq's client: what one writes the other reads."""
from __future__ import annotations

from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.tubemq import JavaPeer, run_java_peer
from tests.support.waiting import wait_for
from tests.tubemq.test_client import FAST, drain


def test_java_producer_to_fastmq_consumer(tubemq):
    lines = run_java_peer("produce", tubemq.master, "java-out", "300", "20", "async")
    assert lines[-1].split()[:2] == ["DONE", "300"]
    with PullConsumer(tubemq.master, "g-java-out", ["java-out"], **FAST) as consumer:
        received = drain(consumer, 300)
    assert sorted(int(m.body.rstrip(b".")) for m in received) == list(range(300))
    assert all(len(m.body) == 20 for m in received)


def test_fastmq_producer_to_java_consumer(tubemq):
    with Producer(tubemq.master, heartbeat_interval=0.5) as producer:
        producer.publish("java-in")
        futures = [producer.send_async(Message("java-in", b"py-%d" % i, attributes={"k": "v"}, msg_type="t"))
                   for i in range(200)]
        assert all(future.result(10) for future in futures)
    lines = run_java_peer("consume", tubemq.master, "java-in", "g-java-in", "200", "0")
    assert lines[-1].split()[:2] == ["DONE", "200"]
    assert sorted(line[5:] for line in lines if line.startswith("BODY ")) == sorted(f"py-{i}" for i in range(200))


def test_java_and_fastmq_consumers_share_one_group(tubemq):
    """A Java pull consumer and a fastmq one in one group: the master balances the four partitions two and two,
    and every message is read once, by the holder of its partition."""
    topic, group = "java-mixed", "g-java-mixed"
    master, broker = tubemq.front_end("master"), tubemq.front_end("broker")
    with Producer(tubemq.master, heartbeat_interval=0.5) as producer, \
            PullConsumer(tubemq.master, group, [topic], **FAST) as ours, \
            JavaPeer("consume", tubemq.master, topic, group, "400", "0", "3000") as java:
        producer.publish(topic)

        def holders() -> dict[int, str]:
            """partition -> the consumer registered for it at the broker"""
            return {partition: held.client_id for (g, t, partition), held in list(broker.registrations.items())
                    if (g, t) == (group, topic)}

        def settled() -> bool:
            members = master.groups.get(group)
            held = holders()
            return members is not None and len(members.consumers) == 2 and len(held) == 4 \
                and sorted(p.partition_id for p in ours.partitions) == sorted(
                    p for p, client in held.items() if client == ours.client_id) \
                and len(ours.partitions) == 2
        wait_for(settled, timeout=40, message=lambda: f"two and two partitions: {holders()}; {master.stats()}; java:\n{java.output()}")
        java_partitions = {p for p, client in holders().items() if client != ours.client_id}
        sent = [future.result(10) for future in [producer.send_async(Message(topic, b"m-%d" % i))
                                                  for i in range(400)]]
        ours_expected = sum(result.partition.partition_id not in java_partitions for result in sent)
        received = drain(ours, ours_expected, timeout=30)
        lines = java.finish(timeout=60)
    java_bodies = [line[5:] for line in lines if line.startswith("BODY ")]
    ours_bodies = [m.body.decode() for m in received]
    assert len(java_bodies) == 400 - ours_expected and 0 < ours_expected < 400
    assert all(m.partition not in java_partitions for m in received)
    assert sorted(java_bodies + ours_bodies) == sorted(f"m-{i}" for i in range(400))


def test_java_bound_consumer_starts_at_the_offset_it_names(tubemq):
    """The Java client's bound consumption (completeSubscribe(sessionKey, 1, true, {partition: offset})) on the
    embedded master: it gets the partition it named, and reads from the offset given while the master says the
    session is not allocated yet."""
    topic = "java-bound"
    with Producer(tubemq.master, heartbeat_interval=0.5) as producer:
        producer.publish(topic)
        sent = [producer.send(Message(topic, b"jb-%d" % i), key=b"one") for i in range(6)]
    partition = sent[0].partition
    start = sent[2].append_offset
    lines = run_java_peer("bound", tubemq.master, topic, "g-java-bound", "4", "s-java", f"{partition.key}={start}")
    assert [line[5:] for line in lines if line.startswith("BODY ")] == [f"jb-{i}" for i in range(2, 6)]
