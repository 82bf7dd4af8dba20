"""fastmq's Kafka protocol layer against a real broker (Tansu), over a plain blocking socket."""
from __future__ import annotations

import socket
import struct
import uuid

import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from tests.support.sockets import recv_exact
from tests.support.waiting import wait_for

IO_TIMEOUT_S = 10.0


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=IO_TIMEOUT_S)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body):
        self.correlation_id += 1
        self.sock.sendall(kp.encode_request(api_key, version, self.correlation_id, "fastmq-test", body))
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        frame = recv_exact(self.sock, size)
        assert kp.peek_correlation_id(frame) == self.correlation_id
        correlation_id, response = kp.decode_response(api_key, version, frame)
        assert correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def connection(kafka_broker):
    conn = Connection(kafka_broker.host, kafka_broker.port)
    yield conn
    conn.close()


def _api_versions(connection: Connection):
    return connection.call(kp.ApiKey.API_VERSIONS, 3, kp.ApiVersionsRequest(
        client_software_name="fastmq-tests", client_software_version="0.1.0"))


def test_api_versions_v3(connection):
    response = _api_versions(connection)
    assert response.error_code == 0
    advertised = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
    # Tansu 0.6.0 advertises at least these (shared/docs/protocols/kafka.md).
    assert advertised[kp.ApiKey.METADATA][1] >= 12
    assert advertised[kp.ApiKey.PRODUCE][1] >= 11
    assert advertised[kp.ApiKey.FETCH][1] >= 17
    chosen = kp.negotiate_versions(response)
    for api_key, version in chosen.items():
        cap = kp.CLIENT_MAX_VERSIONS.get(api_key, kp.SUPPORTED_VERSIONS[api_key][1])
        assert version == min(kp.SUPPORTED_VERSIONS[api_key][1], advertised[api_key][1], cap)
    assert kp.ApiKey.API_VERSIONS in chosen


def test_metadata_at_highest_common_version(connection, kafka_broker):
    versions = kp.negotiate_versions(_api_versions(connection))
    version = versions[kp.ApiKey.METADATA]
    topic = f"fastmq-protocol-{uuid.uuid4().hex[:8]}"
    request = kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(name=topic)],
                                 allow_auto_topic_creation=True)
    response = connection.call(kp.ApiKey.METADATA, version, request)
    assert [(b.host, b.port) for b in response.brokers] == [(kafka_broker.host, kafka_broker.port)]
    assert [t.name for t in response.topics] == [topic]
    # Auto-creation takes a moment to reach the broker's metadata (Apache Kafka: through its controller).
    def listed_topics() -> dict:
        all_topics = connection.call(kp.ApiKey.METADATA, version, kp.MetadataRequest(topics=None))
        listed = {t.name: t for t in all_topics.topics}
        return listed if topic in listed and listed[topic].partitions else {}

    listed = wait_for(listed_topics, message=f"{topic} in the metadata of every topic")
    assert listed[topic].error_code == 0
    assert len(listed[topic].partitions) >= 1
    assert all(p.leader_id == response.brokers[0].node_id for p in listed[topic].partitions)


def test_every_common_api_version_is_known(connection):
    """Every API Tansu advertises and fastmq implements has a codec at the negotiated version."""
    versions = kp.negotiate_versions(_api_versions(connection))
    assert len(versions) >= 25
    for api_key, version in versions.items():
        assert kp.body_codec(api_key, version, False) is not None
        assert kp.body_codec(api_key, version, True) is not None


def _record_batch(values: list[bytes]) -> bytes:
    # kafka-python's record builder: an independent source of RecordBatch bytes for the protocol test
    from kafka.record.memory_records import MemoryRecordsBuilder
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=None, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def _record_values(records) -> list[bytes]:
    from kafka.record.memory_records import MemoryRecords
    batches = MemoryRecords(bytes(records))
    values = []
    while batches.has_next():
        values.extend(record.value for record in batches.next_batch())
    return values


def test_produce_then_fetch_at_highest_common_versions(connection):
    versions = kp.negotiate_versions(_api_versions(connection))
    topic = f"fastmq-produce-{uuid.uuid4().hex[:8]}"
    created = connection.call(kp.ApiKey.CREATE_TOPICS, versions[kp.ApiKey.CREATE_TOPICS], kp.CreateTopicsRequest(
        topics=[kp.CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=2, replication_factor=1)],
        timeout_ms=5000))
    assert [(t.name, t.error_code) for t in created.topics] == [(topic, 0)]

    def known_with_leaders():       # a created topic reaches the broker's metadata a moment later
        metadata = connection.call(kp.ApiKey.METADATA, versions[kp.ApiKey.METADATA], kp.MetadataRequest(
            topics=[kp.MetadataRequest.MetadataRequestTopic(name=topic)]))
        (described,) = metadata.topics
        ready = not described.error_code and len(described.partitions) == 2
        return described if ready and all(p.leader_id >= 0 for p in described.partitions) else None

    topic_id = wait_for(known_with_leaders, message=f"{topic} with its leaders in the metadata").topic_id

    values = [b"first", "zweite \u00fc".encode(), b"x" * 1000]
    P = kp.ProduceRequest
    produce_version = versions[kp.ApiKey.PRODUCE]

    def produce():      # NOT_LEADER (nothing written) until the leader took the partition it is listed for
        produced = connection.call(kp.ApiKey.PRODUCE, produce_version, P(acks=-1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=topic, topic_id=topic_id, partition_data=[
                P.PartitionProduceData(index=1, records=_record_batch(values))])]))
        answer = produced.responses[0].partition_responses[0]
        return None if answer.error_code == kerrors.NotLeaderForPartitionError.errno else answer

    partition = wait_for(produce, interval=0.1, message="the leader taking the produce request")
    assert (partition.index, partition.error_code, partition.base_offset) == (1, 0, 0)

    F = kp.FetchRequest
    fetch_version = versions[kp.ApiKey.FETCH]
    fetched = connection.call(kp.ApiKey.FETCH, fetch_version, F(
        max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[F.FetchTopic(
            topic=topic, topic_id=topic_id, partitions=[F.FetchPartition(
                partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    assert fetched.error_code == 0
    data = fetched.responses[0].partitions[0]
    assert (data.partition_index, data.error_code) == (1, 0)
    assert data.high_watermark == len(values)
    assert isinstance(data.records, memoryview)
    assert _record_values(data.records) == values
