"""fastmq/kafka/cluster.py: what a Metadata response changes in the client's picture of the cluster."""
from __future__ import annotations

import uuid

from fastmq.kafka import protocol as kp
from fastmq.kafka.cluster import ClusterMetadata
from fastmq.kafka.structs import TopicPartition

M = kp.MetadataResponse
TOPIC_ID = uuid.uuid4()


def response(leaders: dict[int, tuple[int, int]], topic_id: uuid.UUID = TOPIC_ID) -> M:
    """A response naming partition -> (leader, leader epoch) of topic "t"."""
    return M(brokers=[M.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9000 + n) for n in (1, 2, 3)],
             cluster_id="c", controller_id=1, topics=[M.MetadataResponseTopic(
                 error_code=0, name="t", topic_id=topic_id, is_internal=False, partitions=[
                     M.MetadataResponsePartition(error_code=0, partition_index=p, leader_id=leader,
                                                 leader_epoch=epoch, replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3])
                     for p, (leader, epoch) in leaders.items()])])


def leaders(cluster: ClusterMetadata) -> dict[int, tuple[int, int]]:
    return {p: (cluster.leader_for(TopicPartition("t", p)), cluster.leader_epoch_for(TopicPartition("t", p)))
            for p in sorted(cluster.partitions_for("t") or ())}


def test_a_lagging_broker_does_not_bring_an_older_leader_back():
    cluster = ClusterMetadata()
    cluster.update(response({0: (1, 5), 1: (2, 3)}), 0.0, all_topics=False)
    # partition 0's leader moved (epoch 6); a broker that has not heard of it answers next with epoch 5
    cluster.update(response({0: (3, 6), 1: (2, 3)}), 1.0, all_topics=False)
    cluster.update(response({0: (1, 5), 1: (1, 4)}), 2.0, all_topics=True)
    assert leaders(cluster) == {0: (3, 6), 1: (1, 4)}


def test_unknown_epochs_and_a_topic_made_again_are_taken_as_they_come():
    cluster = ClusterMetadata()
    cluster.update(response({0: (1, 9)}), 0.0, all_topics=False)
    cluster.update(response({0: (2, -1)}), 1.0, all_topics=False)     # a broker too old to know epochs
    assert leaders(cluster) == {0: (2, -1)}
    cluster.update(response({0: (1, 9)}), 2.0, all_topics=False)
    cluster.update(response({0: (3, 0)}, topic_id=uuid.uuid4()), 3.0, all_topics=False)  # deleted, made again
    assert leaders(cluster) == {0: (3, 0)}
    cluster.update(response({0: (1, 4)}), 4.0, all_topics=False)
    # a response without topic ids (Metadata before v10) is of the topic known: its older epoch stays out
    cluster.update(response({0: (3, 3), 1: (2, 0)}, topic_id=uuid.UUID(int=0)), 5.0, all_topics=False)
    assert leaders(cluster) == {0: (1, 4), 1: (2, 0)}
