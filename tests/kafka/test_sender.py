"""The sender: broker health (a broker that keeps failing is avoided by records without key or partition), and what
one turn of the I/O loop sends."""
from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from fastmq.kafka import Producer
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka._native.accumulator import RecordAccumulator
from tests.support.scripted_kafka import ScriptedCluster
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


# ---- what a Produce answer says of each batch -----------------------------------------------------------------

NOT_LEADER = kerrors.NotLeaderForPartitionError.errno


def produce_script(cluster: ScriptedCluster, answer: Callable[[int, int], int | None]) -> list[list[tuple[str, int]]]:
    """Answers Produce requests: answer(partition, attempt) is an error code for the partition, or None to leave
    it out of the response. Returns the (topic, partition)s of each request, as the broker decoded them."""
    carried: list[list[tuple[str, int]]] = []
    R = kp.ProduceResponse

    def produce(node_id: int, request: Any, version: int) -> Any:
        names = {topic_id: name for name, topic_id in cluster.topic_ids.items()}
        carried.append([(data.name or names[data.topic_id], p.index) for data in request.topic_data
                        for p in data.partition_data])
        attempt = len(carried)
        return R(responses=[R.TopicProduceResponse(name=data.name, topic_id=data.topic_id, partition_responses=[
            R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=100 * p.index + attempt)
            for p in reversed(data.partition_data) if (code := answer(p.index, attempt)) is not None])
            for data in request.topic_data])

    cluster.handlers[kp.ApiKey.PRODUCE] = produce
    return carried


@pytest.mark.parametrize("produce_version", [2, 8, 9, 13])
def test_an_answer_with_errors_and_partitions_left_out_completes_the_rest_and_retries_those(scripted_loop,
                                                                                          produce_version):
    cluster = ScriptedCluster(scripted_loop, node_ids=(1,), max_versions={kp.ApiKey.PRODUCE: produce_version})
    cluster.topics["t"] = [1, 1, 1]
    # Partition 0 is stored at once; 1 is refused (not the leader) and 2 left out of the first answer. The linger
    # (flush() ends it) puts the three in one first request: without it the sender may take two before the third is sent.
    carried = produce_script(cluster, lambda partition, attempt: (
        0 if partition == 0 or attempt > 1 else NOT_LEADER if partition == 1 else None))
    try:
        with Producer(cluster.bootstrap_servers, acks=1, enable_idempotence=False, retry_backoff_ms=10,
                      linger_ms=10000, request_timeout_ms=5000) as producer:
            futures = [producer.send("t", b"v", partition=p) for p in range(3)]
            producer.flush(WAIT)
            offsets = [future.get(0).offset for future in futures]
    finally:
        cluster.close()
    assert sorted(carried[0]) == [("t", 0), ("t", 1), ("t", 2)]
    assert sorted(tp for request in carried[1:] for tp in request) == [("t", 1), ("t", 2)]
    assert offsets[0] == 1 and 101 < offsets[1] <= 100 + len(carried) and 201 < offsets[2] <= 200 + len(carried)


def test_without_retries_a_refused_batch_fails_with_the_brokers_error_and_a_left_out_one_as_not_mentioned(
        scripted_loop):
    cluster = ScriptedCluster(scripted_loop, node_ids=(1,))
    cluster.topics["t"] = [1, 1, 1]
    produce_script(cluster, lambda partition, attempt: 0 if partition == 0 else NOT_LEADER if partition == 1 else None)
    try:
        with Producer(cluster.bootstrap_servers, acks=1, enable_idempotence=False, retries=0,
                      request_timeout_ms=5000) as producer:
            futures = [producer.send("t", b"v", partition=p) for p in range(3)]
            producer.flush(WAIT)
            assert futures[0].get(0).offset == 1
            with pytest.raises(kerrors.NotLeaderForPartitionError):
                futures[1].get(0)
            with pytest.raises(kerrors.KafkaConnectionError, match="did not mention"):
                futures[2].get(0)
    finally:
        cluster.close()
