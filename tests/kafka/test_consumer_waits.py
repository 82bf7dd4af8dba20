"""Consumer polls that have nothing to hand out sleep (issue 20): whatever the start offset, whether the
partition exists and whether any broker listens, poll() ends within its timeout, burns little CPU while it
waits, says why a partition cannot be fetched, and knows when it is at the end of a partition."""
from __future__ import annotations

import socket
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.kafka import Consumer, Producer
from fastmq.kafka.structs import TopicPartition
from tests.support.waiting import wait_for

POLL = 0.4
RECORDS = 3


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def three_records(embedded_broker):
    topic = f"waits-{uuid.uuid4().hex[:8]}"
    with Producer(embedded_broker.bootstrap_servers) as producer:
        for i in range(RECORDS):
            producer.send(topic, b"%d" % i, partition=0).get(30)
    return embedded_broker.bootstrap_servers, topic


@settings(max_examples=12)
@given(start=st.one_of(st.none(), st.integers(0, 10), st.integers(10**6, 10**12)),
       partition_exists=st.booleans(), reachable=st.booleans())
def test_poll_ends_in_time_and_sleeps_while_waiting(three_records, start, partition_exists, reachable):
    servers, topic = three_records
    tp = TopicPartition(topic, 0 if partition_exists else 7)
    consumer = Consumer(bootstrap_servers=servers if reachable else f"127.0.0.1:{closed_port()}",
                        auto_offset_reset="latest", fetch_max_wait_ms=100, reconnect_backoff_ms=10)
    try:
        consumer.assign([tp])
        if start is not None:
            consumer.seek(tp, start)
        wall, cpu = time.monotonic(), time.process_time()
        seen = []
        for _ in range(3):
            began = time.monotonic()
            seen += consumer.consume(100, POLL)
            assert time.monotonic() - began < POLL + 2.0          # generous: the machine is shared
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        assert cpu < 0.3 * wall, f"{cpu:.2f} s of CPU in {wall:.2f} s: a busy loop"
        if reachable and partition_exists:
            expected = max(0, RECORDS - start) if start is not None and start <= RECORDS else 0
            assert len(seen) == expected
            assert wait_for(lambda: consumer.poll(0.1) == {} and consumer.at_end(), 10)
            assert consumer.unavailable_partitions() == {}
        else:
            assert seen == [] and not consumer.at_end()
            assert wait_for(lambda: tp in consumer.unavailable_partitions(), 10)
    finally:
        consumer.close()


def test_unavailable_partitions_say_why(three_records, caplog):
    servers, topic = three_records
    missing = TopicPartition(topic, 7)
    with Consumer(bootstrap_servers=servers) as consumer:
        consumer.assign([missing, TopicPartition(topic, 0)])
        assert wait_for(lambda: consumer.poll(0.05) == {} and missing in consumer.unavailable_partitions(), 10)
        assert consumer.unavailable_partitions() == {missing: f"topic {topic!r} has 1 partitions"}
    assert f"{topic}-7 cannot be fetched" in caplog.text
    with Consumer(bootstrap_servers=f"127.0.0.1:{closed_port()}", reconnect_backoff_ms=10) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        assert wait_for(lambda: consumer.poll(0.05) == {} and tp in consumer.unavailable_partitions(), 10)
        assert "no broker answered yet" in consumer.unavailable_partitions()[tp]


def test_at_end_after_a_start_beyond_the_end(three_records):
    """kcat's -o 100 on a 3-record topic: the offset is reset to the end, and the end becomes known."""
    servers, topic = three_records
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=servers, auto_offset_reset="latest", fetch_max_wait_ms=100) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 100)
        assert wait_for(lambda: consumer.poll(0.1) == {} and consumer.at_end(), 10)
        assert consumer.position(tp) == RECORDS and consumer.highwater(tp) == RECORDS
        assert consumer.at_end(tp)
