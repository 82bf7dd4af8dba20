"""The sender's use of broker health: a broker that keeps failing is avoided by records without key or partition."""
from __future__ import annotations

from fastmq.kafka._native.accumulator import RecordAccumulator


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
