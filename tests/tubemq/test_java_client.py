"""The Apache InLong TubeMQ Java client (tubemq-client 1.13.0, tests/tubemq_java/TubeMQPeer.java) against the
embedded master + broker, beside fastmq's client: what one writes the other reads."""
from __future__ import annotations

from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.tubemq import run_java_peer
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
