"""Bad input against the Kafka front end: garbage frames, forged lengths, unknown APIs and versions, and valid
requests with random or mutated fields. The broker answers or closes that one connection, never fails a handler
(a handler exception would be logged by the server and fail these tests) and keeps serving everyone else."""
from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker.kafka.front import BROKER_VERSIONS
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

from .conftest import Wire, record_batch, small_broker

pytestmark = pytest.mark.usefixtures("no_handler_failures")
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    with small_broker(tmp_path_factory.mktemp("fuzz") / "data", max_request_size=1 << 20) as embedded:
        embedded.broker.topics.create("fuzz", 2)
        yield embedded


def exchange(broker, data: bytes, read_timeout: float = 0.3) -> bytes:
    """Send raw bytes on a new connection; whatever comes back before the broker closes it or goes quiet."""
    sock = socket.create_connection(broker.addresses[0], timeout=5)
    received = b""
    try:
        sock.sendall(data)
        sock.settimeout(read_timeout)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except (socket.timeout, ConnectionError):
        pass
    finally:
        sock.close()
    return received


def assert_still_serving(broker) -> None:
    wire = Wire(broker.bootstrap_servers)
    assert wire.request(ApiKey.API_VERSIONS, 3, kp.ApiVersionsRequest(client_software_name="x",
                                                                      client_software_version="1")).error_code == 0
    wire.close()


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_frames(fuzzed, garbage):
    exchange(fuzzed, struct.pack(">i", len(garbage)) + garbage)
    assert_still_serving(fuzzed)


@FUZZ
@given(st.integers(-2 ** 31, 2 ** 31 - 1), st.binary(max_size=20))
def test_forged_lengths(fuzzed, length, tail):
    # Sizes beyond max_request_size (1 MiB here) or negative close the connection before any allocation.
    exchange(fuzzed, struct.pack(">i", length) + tail, read_timeout=0.05)
    assert_still_serving(fuzzed)


@FUZZ
@given(st.integers(-32768, 32767), st.integers(-32768, 32767), st.binary(max_size=40))
def test_unknown_api_keys_and_versions(fuzzed, api_key, version, body):
    header = struct.pack(">hhih", api_key, version, 1, 1) + b"c"
    answer = exchange(fuzzed, struct.pack(">i", len(header) + len(body)) + header + body)
    served = BROKER_VERSIONS.get(api_key)
    if api_key == ApiKey.API_VERSIONS and answer:
        assert struct.unpack(">i", answer[4:8])[0] == 1       # answered, with our correlation id
    elif served is None or not served[0] <= version <= served[1]:
        assert answer == b""                                  # closed without an answer
    assert_still_serving(fuzzed)


def _valid_frames() -> list[tuple[int, int, bytes]]:
    topic_data = kp.ProduceRequest.TopicProduceData(name="fuzz", partition_data=[
        kp.ProduceRequest.PartitionProduceData(index=0, records=record_batch([b"a", b"b"], keys=[b"k", None]))])
    fetch_topic = kp.FetchRequest.FetchTopic(topic="fuzz", partitions=[kp.FetchRequest.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=4096)])
    requests = [
        (ApiKey.PRODUCE, 9, kp.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[topic_data])),
        (ApiKey.FETCH, 11, kp.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=65536, session_id=0,
                                           session_epoch=-1, topics=[fetch_topic], rack_id="")),
        (ApiKey.METADATA, 9, kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(name="fuzz")])),
        (ApiKey.LIST_OFFSETS, 7, kp.ListOffsetsRequest(replica_id=-1, topics=[
            kp.ListOffsetsRequest.ListOffsetsTopic(name="fuzz", partitions=[
                kp.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])),
        (ApiKey.JOIN_GROUP, 5, kp.JoinGroupRequest(group_id="g", session_timeout_ms=6000, rebalance_timeout_ms=6000,
                                                   member_id="", protocol_type="consumer", protocols=[
                                                       kp.JoinGroupRequest.JoinGroupRequestProtocol(
                                                           name="range", metadata=b"\x00\x00")])),
        (ApiKey.OFFSET_COMMIT, 8, kp.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1,
                                                         member_id="", topics=[
                                                             kp.OffsetCommitRequest.OffsetCommitRequestTopic(
                                                                 name="fuzz", partitions=[
                                                                     kp.OffsetCommitRequest.
                                                                     OffsetCommitRequestPartition(
                                                                         partition_index=0, committed_offset=1)])])),
        (ApiKey.CREATE_TOPICS, 5, kp.CreateTopicsRequest(topics=[kp.CreateTopicsRequest.CreatableTopic(
            name="fz", num_partitions=1, replication_factor=1, assignments=[], configs=[])])),
        (ApiKey.DESCRIBE_CONFIGS, 4, kp.DescribeConfigsRequest(resources=[
            kp.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="fuzz",
                                                              configuration_keys=None)])),
        (ApiKey.SYNC_GROUP, 5, kp.SyncGroupRequest(group_id="g", generation_id=1, member_id="m", assignments=[])),
        (ApiKey.OFFSET_FETCH, 8, kp.OffsetFetchRequest(groups=[kp.OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="g", topics=None)])),
    ]
    return [(key, version, bytes(memoryview(kp.encode_request(key, version, 7, "fuzz", body))))
            for key, version, body in requests]


VALID = _valid_frames()


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_mutated_valid_requests(fuzzed, frame, data):
    api_key, version, raw = frame
    raw = bytearray(raw)
    # Keep the size prefix and the API key/version (so the request reaches its handler); mutate the rest.
    for _ in range(data.draw(st.integers(1, 6))):
        position = data.draw(st.integers(8, len(raw) - 1))
        raw[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(12, len(raw)))
        raw = raw[:cut]
        raw[0:4] = struct.pack(">i", len(raw) - 4)
    exchange(fuzzed, bytes(raw), read_timeout=0.1)
    assert_still_serving(fuzzed)


@FUZZ
@given(st.integers(-2 ** 31, 2 ** 31 - 1), st.integers(-2 ** 63, 2 ** 63 - 1), st.integers(-2 ** 31, 2 ** 31 - 1),
       st.integers(-2 ** 31, 2 ** 31 - 1))
def test_fetch_with_random_numbers(fuzzed, partition, offset, max_bytes, max_wait):
    wire = Wire(fuzzed.bootstrap_servers)
    request = kp.FetchRequest(max_wait_ms=min(max_wait, 50), min_bytes=1, max_bytes=max_bytes, session_id=0,
                              session_epoch=-1, rack_id="", topics=[kp.FetchRequest.FetchTopic(
                                  topic="fuzz", partitions=[kp.FetchRequest.FetchPartition(
                                      partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    response = wire.request(ApiKey.FETCH, 11, request)
    assert len(response.responses) == 1
    wire.close()
