"""The sender's broker health: a broker that keeps failing is avoided by records without key or partition."""
from __future__ import annotations

from fastmq.kafka._native.accumulator import RecordAccumulator
from fastmq.kafka.sender import NodeHealth


def test_node_health_penalty_and_recovery():
    health = NodeHealth(threshold=3, penalty=10.0)
    assert not health.failed(7, 0.0) and not health.failed(7, 0.1)
    assert health.failed(7, 0.2)                      # third failure in a row: avoided
    assert health.avoided(1.0) == {7}
    health.succeeded(8)
    assert health.avoided(10.3) == set()              # the penalty expired
    assert not health.failed(7, 11.0)                 # and the count started over


def test_success_resets_the_count():
    health = NodeHealth(threshold=2, penalty=5.0)
    health.failed(1, 0.0)
    health.succeeded(1)
    assert not health.failed(1, 0.1)


def test_avoided_brokers_get_no_keyless_records_but_keep_keyed_ones():
    acc = RecordAccumulator(batch_size=512)
    acc.update_topic("t", [1, 2, 1, 2], avoided_nodes={2})
    topic = acc.topic("t")
    keyless = {acc.send(topic, None, None, b"x" * 100, None, None).topic_partition.partition for _ in range(300)}
    assert keyless <= {0, 2}                            # only partitions led by broker 1
    keyed = {acc.send(topic, None, b"key-%d" % i, b"v", None, None).topic_partition.partition for i in range(200)}
    assert keyed == {0, 1, 2, 3}                        # keys still hash over every partition
    acc.update_topic("t", [1, 2, 1, 2], avoided_nodes={1, 2})
    everywhere = {acc.send(topic, None, None, b"x" * 100, None, None).topic_partition.partition for _ in range(300)}
    assert len(everywhere) > 2                          # all avoided: fall back to every partition
