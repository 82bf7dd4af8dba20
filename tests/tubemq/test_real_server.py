"""fastmq's TubeMQ client against Apache InLong TubeMQ 2.4.0 (master + broker from Maven Central, no ZooKeeper):
produce with attributes, consume everything back with a filter-free pull consumer.

The real master holds a new broker back for about 35 s before it takes messages, which alone is more than this
package's test-time budget: the test runs when FASTMQ_TUBEMQ_SERVER=1 (fetch first with
`python -m tests.support.servers fetch tubemq-server`)."""
from __future__ import annotations

import os

import pytest

from fastmq.tubemq import Message, Producer, PullConsumer
from tests.support.tubemq import RealTubeMQ
from tests.support.waiting import wait_for
from tests.tubemq.test_client import FAST, drain

pytestmark = pytest.mark.skipif(os.environ.get("FASTMQ_TUBEMQ_SERVER") != "1",
                                reason="the real TubeMQ server needs ~60 s: set FASTMQ_TUBEMQ_SERVER=1 to run it")


@pytest.fixture(scope="module")
def server():
    real = RealTubeMQ(("real_topic",)).start()
    yield real
    real.stop()


def test_produce_and_consume_on_a_real_tubemq(server):
    with Producer(server.master_address, heartbeat_interval=2) as producer:
        def published() -> bool:
            try:
                producer.publish("real_topic", timeout=5)
                producer.send(Message("real_topic", b"probe"))
                return True
            except Exception:
                return False
        wait_for(published, timeout=120, interval=1, message="the real broker takes messages (about 35 s)")
        futures = [producer.send_async(Message("real_topic", b"r%d" % i, attributes={"k": "v"},
                                               msg_type="t1" if i % 2 else "t2")) for i in range(200)]
        for future in futures:
            future.result(30)                                    # raises what failed
    with PullConsumer(server.master_address, "real_group", ["real_topic"], **FAST) as consumer:
        received = drain(consumer, 201, timeout=90)
    bodies = sorted(m.body for m in received)
    assert bodies == sorted([b"probe"] + [b"r%d" % i for i in range(200)])
    assert all(m.attributes == {"k": "v"} for m in received if m.body != b"probe")
