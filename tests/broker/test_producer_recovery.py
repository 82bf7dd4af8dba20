"""An idempotent producer whose state the broker dropped (it stayed idle past producer_id_expiration_ms): the
broker answers UNKNOWN_PRODUCER_ID, and the producer takes a new id and delivers everything, once and in order."""
from __future__ import annotations

import time

from fastmq.kafka import Consumer, Producer, TopicPartition
from tests.support.waiting import wait_for
from tests.broker.conftest import small_broker

WAIT = 30.0


def test_a_forgotten_producer_takes_a_new_id_and_loses_nothing(tmp_path):
    with small_broker(tmp_path / "data", producer_id_expiration_ms=200,
                      producer_state_snapshot_interval_ms=50) as broker:
        with Producer(broker.bootstrap_servers, linger_ms=5, max_in_flight_requests_per_connection=5) as producer:
            first = [producer.send("kept", b"a%d" % i, partition=0) for i in range(20)]
            assert [f.get(WAIT).offset for f in first] == list(range(20))
            identity = producer._accumulator.producer_identity
            # Idle past the expiration: the broker's next snapshot drops the producer's state.
            assert wait_for(lambda: not broker.broker.producers._partitions.get(("kept", 0)), WAIT)
            second = [producer.send("kept", b"b%d" % i, partition=0) for i in range(200)]
            assert [f.get(WAIT).offset for f in second] == list(range(20, 220))
            assert producer._accumulator.producer_identity != identity
            assert producer.metrics()["producer-metrics"]["record-retry-total"] >= 1
        with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("kept", 0)])
            got, deadline = [], time.monotonic() + WAIT
            while len(got) < 220 and time.monotonic() < deadline:
                got += [r.value for r in consumer.consume(500, 0.5)]
        assert got == [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(200)]
