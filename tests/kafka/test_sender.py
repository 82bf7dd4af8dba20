"""The sender: broker health (a broker that keeps failing is avoided by records without key or partition), and what
one turn of the I/O loop sends."""
from __future__ import annotations

import uuid

from fastmq.kafka._native.accumulator import RecordAccumulator
from tests.support.waiting import WAIT, wait_for


def test_avoided_brokers_get_no_keyless_records_but_keep_keyed_ones():
    acc = RecordAccumulator(batch_size=512)
    acc.update_topic("t", [1, 2, 1, 2], avoided_nodes={2})
    topic = "t"
    keyless = {acc.send(topic, None, None, b"x" * 100, None, None).topic_partition.partition for _ in range(300)}
    assert keyless <= {0, 2}                            # only partitions led by broker 1
    keyed = {acc.send(topic, None, b"key-%d" % i, b"v", None, None).topic_partition.partition for i in range(200)}
    assert keyed == {0, 1, 2, 3}                        # keys still hash over every partition
    acc.update_topic("t", [1, 2, 1, 2], avoided_nodes={1, 2})
    everywhere = {acc.send(topic, None, None, b"x" * 100, None, None).topic_partition.partition for _ in range(300)}
    assert len(everywhere) > 2                          # all avoided: fall back to every partition


def test_one_sender_turn_sends_every_full_batch_of_a_partition_up_to_max_in_flight(embedded_broker):
    """A partition with several full batches sends them all in one turn of the I/O loop (a request each, one write),
    up to max in-flight: the loop's next turn comes only after a system call, when a busy user thread lets the GIL
    go. The sender is driven by hand here (its poll hook removed) to count what one turn sends."""
    from fastmq.kafka import Admin, Producer
    from fastmq.kafka.admin import NewTopic

    topic = f"sender-rounds-{uuid.uuid4().hex[:8]}"
    with Admin(embedded_broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(embedded_broker.bootstrap_servers, batch_size=1000, linger_ms=60000, acks=1,
                  enable_idempotence=False, max_in_flight_requests_per_connection=3) as producer:
        loop, sender = producer.client.loop, producer._sender
        producer.partitions_for(topic)
        node = producer.client.cluster.topics[topic].leaders[0]
        assert wait_for(lambda: loop.run_in_loop(producer.client.ready, node, timeout=WAIT))
        loop.remove_poll_hook(sender.poll)
        try:
            loop.run_in_loop(lambda: None, timeout=WAIT)      # an iteration that began with the old hooks has ended
            futures = [producer.send(topic, b"%03d" % i + b"x" * 97, partition=0) for i in range(45)]
            assert sender.metrics.requests == 0
            loop.run_in_loop(sender.poll, timeout=WAIT)
            assert sender.metrics.requests == 3 and sender.metrics.batches == 3      # 5 full batches, 3 in flight
        finally:
            loop.add_poll_hook(sender.poll)
        producer.flush(WAIT)
        assert [f.get(0).offset for f in futures] == list(range(45))
