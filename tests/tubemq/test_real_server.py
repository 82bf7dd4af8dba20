"""fastmq's TubeMQ client against Apache InLong TubeMQ 2.4.0 (master + broker from Maven Central, no ZooKeeper,
one pair per session: tests/tubemq/conftest.py): produce with attributes, consume everything back."""
from __future__ import annotations

from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.waiting import wait_for
from tests.tubemq.test_client import FAST, drain


def test_produce_and_consume_on_a_real_tubemq(real_tubemq):
    with Producer(real_tubemq.master_address, heartbeat_interval=0.5) as producer:
        def published() -> bool:
            try:
                producer.publish("real_topic", timeout=5)
                producer.send(Message("real_topic", b"probe"), timeout=5)
                return True
            except Exception:
                return False
        wait_for(published, timeout=30, interval=0.5, message="the real broker takes messages")
        futures = [producer.send_async(Message("real_topic", b"r%d" % i, attributes={"k": "v"},
                                               msg_type="t1" if i % 2 else "t2")) for i in range(200)]
        for future in futures:
            future.result(30)                                    # raises what failed
    with PullConsumer(real_tubemq.master_address, "real_group", ["real_topic"], **FAST) as consumer:
        received = drain(consumer, 201, timeout=60)
    bodies = sorted(m.body for m in received)
    assert bodies == sorted([b"probe"] + [b"r%d" % i for i in range(200)])
    assert all(m.attributes == {"k": "v"} for m in received if m.body != b"probe")
