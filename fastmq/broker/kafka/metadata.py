"""ApiVersions, Metadata (with topic auto-creation) and DescribeCluster.

One broker holds every partition: it is the leader, the only replica and the whole ISR, with leader epoch 0.
Metadata answers with the address of the listener the request came through (Kafka's per-listener advertised
addresses), so TLS and plaintext clients each get an address they can use.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from fastmq.broker.errors import TopicError
from fastmq.broker.kafka.errors import kafka_code
from fastmq.broker.kafka.front import Request, api_version_entries
from fastmq.broker.topics import Topic
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

ZERO_UUID = uuid.UUID(int=0)
NONE = 0
LEADER_EPOCH = 0


def resolve_topic(broker: Broker, name: str | None, topic_id: uuid.UUID | None) -> Topic | None:
    """The topic a request names, by id when it has one (newer versions), else by name."""
    if topic_id is not None and topic_id != ZERO_UUID:
        return broker.topics.by_id(topic_id)
    return broker.topics.get(name) if name else None


def handle_api_versions(request: Request, body: Any) -> None:
    info = request.session.info
    if request.version >= 3 and body.client_software_name:
        info.software = f"{body.client_software_name} {body.client_software_version}"
    request.respond(kp.ApiVersionsResponse(error_code=NONE, api_keys=api_version_entries(), throttle_time_ms=0))


def _partitions(broker: Broker, topic: Topic) -> list[Any]:
    node = broker.config.node_id
    partition = kp.MetadataResponse.MetadataResponsePartition
    return [partition(error_code=NONE, partition_index=i, leader_id=node, leader_epoch=LEADER_EPOCH,
                      replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
            for i in range(topic.partitions)]


def topic_metadata(broker: Broker, topic: Topic) -> Any:
    return kp.MetadataResponse.MetadataResponseTopic(error_code=NONE, name=topic.name, topic_id=topic.topic_id,
                                                     is_internal=False, partitions=_partitions(broker, topic))


def handle_metadata(request: Request, body: Any) -> None:
    broker = request.broker
    host, port = request.listener.advertised
    node = broker.config.node_id
    response_topic = kp.MetadataResponse.MetadataResponseTopic
    all_topics = body.topics is None or (request.version == 0 and not body.topics)
    topics = []
    if all_topics:
        topics = [topic_metadata(broker, topic) for topic in broker.topics.all()]
    else:
        allow_create = broker.config.auto_create_topics and (request.version < 4 or body.allow_auto_topic_creation)
        for wanted in body.topics:
            topic = resolve_topic(broker, wanted.name, wanted.topic_id)
            if topic is None and wanted.name and allow_create:
                try:
                    topic = broker.topics.get_or_create(wanted.name)
                except TopicError as exc:
                    topics.append(response_topic(error_code=kafka_code(exc.error), name=wanted.name, topic_id=ZERO_UUID,
                                                 partitions=[]))
                    continue
            if topic is None:
                by_id = wanted.topic_id is not None and wanted.topic_id != ZERO_UUID
                code = kerrors.UnknownTopicIdError.errno if by_id else kerrors.UnknownTopicOrPartitionError.errno
                topics.append(response_topic(error_code=code, name=wanted.name, topic_id=wanted.topic_id or ZERO_UUID,
                                             partitions=[]))
                continue
            topics.append(topic_metadata(broker, topic))
    request.respond(kp.MetadataResponse(
        throttle_time_ms=0,
        brokers=[kp.MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id, controller_id=node, topics=topics, error_code=NONE))


def handle_describe_cluster(request: Request, body: Any) -> None:
    broker = request.broker
    host, port = request.listener.advertised
    node = broker.config.node_id
    request.respond(kp.DescribeClusterResponse(
        throttle_time_ms=0, error_code=NONE, error_message=None, endpoint_type=1, cluster_id=broker.cluster_id,
        controller_id=node,
        brokers=[kp.DescribeClusterResponse.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=None)]))


HANDLERS = {
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.METADATA: handle_metadata,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
}
