"""Kafka protocol hot paths, side by side with kafka-python 3.0.12 and aiokafka 0.14.

- ProduceRequest encode (client) and decode (broker), 4 partitions x 256 KiB record sets;
- FetchResponse decode (client) and encode (broker), 4 partitions x 256 KiB record sets;
  encoders write whole frames (size, header, body), decoders take frames without the size and leave records
  as views;
- MetadataResponse decode and encode, 100 topics x 4 partitions on 3 brokers.

Run: pytest benches/bench_kafka_protocol.py --benchmark-only (short; the machine is shared).
"""
from __future__ import annotations

import io
import os
import uuid

import pytest

from fastmq.kafka import protocol as kp

RECORD_SET = 256 * 1024
PARTITIONS = 4
RECORD_SETS = [os.urandom(RECORD_SET) for _ in range(PARTITIONS)]
TOTAL = RECORD_SET * PARTITIONS


def _produce_request():
    P = kp.ProduceRequest
    return P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(name="bench", partition_data=[
        P.PartitionProduceData(index=i, records=RECORD_SETS[i]) for i in range(PARTITIONS)])])


def _fetch_response():
    F = kp.FetchResponse
    return F(responses=[F.FetchableTopicResponse(topic="bench", partitions=[
        F.PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
                        aborted_transactions=None, records=RECORD_SETS[i]) for i in range(PARTITIONS)])])


def _metadata_response():
    M = kp.MetadataResponse
    return M(brokers=[M.MetadataResponseBroker(node_id=i, host=f"broker-{i}.example", port=9092, rack=None)
                      for i in range(3)],
             cluster_id="bench-cluster", controller_id=0,
             topics=[M.MetadataResponseTopic(name=f"topic-{t}", topic_id=uuid.UUID(int=t + 1), partitions=[
                 M.MetadataResponsePartition(partition_index=p, leader_id=p % 3, leader_epoch=5,
                                             replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2]) for p in range(4)])
                     for t in range(100)])


# ---------------------------------------------------------------------------------------------------------
# ProduceRequest encode
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [8, 9, 11])
def test_produce_encode_fastmq(compare, version):
    request = _produce_request()
    bench = compare(f"kafka-produce-encode-4x256KiB-v{version}", "fastmq", items=PARTITIONS, nbytes=TOTAL)
    frame = bench(kp.encode_request, kp.ApiKey.PRODUCE, version, 1, "bench", request)
    assert len(frame) > TOTAL


@pytest.mark.parametrize("version", [8, 9, 11])
def test_produce_encode_kafka_python(compare, version):
    from kafka.protocol.producer import ProduceRequest
    P = ProduceRequest
    request = P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(name="bench", partition_data=[
        P.TopicProduceData.PartitionProduceData(index=i, records=RECORD_SETS[i]) for i in range(PARTITIONS)])])
    request.API_VERSION = version
    request.with_header(correlation_id=1, client_id="bench")
    bench = compare(f"kafka-produce-encode-4x256KiB-v{version}", "kafka-python", items=PARTITIONS, nbytes=TOTAL)
    frame = bench(request.encode, header=True, framed=True)
    assert len(frame) > TOTAL


def test_produce_encode_aiokafka(compare):
    from aiokafka.protocol.api import RequestHeader_v1
    from aiokafka.protocol.produce import ProduceRequest_v8

    def encode():
        request = ProduceRequest_v8(None, -1, 30000, [("bench", [(i, RECORD_SETS[i]) for i in range(PARTITIONS)])])
        message = RequestHeader_v1(request, correlation_id=1, client_id="bench").encode() + request.encode()
        return len(message).to_bytes(4, "big") + message

    bench = compare("kafka-produce-encode-4x256KiB-v8", "aiokafka", items=PARTITIONS, nbytes=TOTAL)
    assert len(bench(encode)) > TOTAL


@pytest.mark.parametrize("version", [9, 11])
def test_produce_decode_fastmq(compare, version):
    frame = bytes(kp.encode_request(kp.ApiKey.PRODUCE, version, 1, "bench", _produce_request()))[4:]
    bench = compare(f"kafka-produce-decode-4x256KiB-v{version}", "fastmq", items=PARTITIONS, nbytes=TOTAL)
    _, request = bench(kp.decode_request, frame)
    assert request.topic_data[0].partition_data[3].records == RECORD_SETS[3]


@pytest.mark.parametrize("version", [9, 11])
def test_produce_decode_kafka_python(compare, version):
    from kafka.protocol.producer import ProduceRequest
    frame = bytes(kp.encode_request(kp.ApiKey.PRODUCE, version, 1, "bench", _produce_request()))[4:]
    bench = compare(f"kafka-produce-decode-4x256KiB-v{version}", "kafka-python", items=PARTITIONS, nbytes=TOTAL)
    request = bench(ProduceRequest.decode, frame, version=version, header=True)
    assert bytes(request.topic_data[0].partition_data[3].records) == RECORD_SETS[3]


# ---------------------------------------------------------------------------------------------------------
# FetchResponse decode and encode
# ---------------------------------------------------------------------------------------------------------

def _fetch_frame(version: int) -> bytes:
    return bytes(kp.encode_response(kp.ApiKey.FETCH, version, 1, _fetch_response()))[4:]


@pytest.mark.parametrize("version", [11, 12, 17])
def test_fetch_decode_fastmq(compare, version):
    frame = _fetch_frame(version)
    bench = compare(f"kafka-fetch-decode-4x256KiB-v{version}", "fastmq", items=PARTITIONS, nbytes=TOTAL)
    _, response = bench(kp.decode_response, kp.ApiKey.FETCH, version, frame)
    assert response.responses[0].partitions[3].records == RECORD_SETS[3]


@pytest.mark.parametrize("version", [11, 12, 17])
def test_fetch_decode_kafka_python(compare, version):
    from kafka.protocol.consumer import FetchResponse
    frame = _fetch_frame(version)
    bench = compare(f"kafka-fetch-decode-4x256KiB-v{version}", "kafka-python", items=PARTITIONS, nbytes=TOTAL)
    response = bench(FetchResponse.decode, frame, version=version, header=True)
    assert bytes(response.responses[0].partitions[3].records) == RECORD_SETS[3]


def test_fetch_decode_aiokafka(compare):
    from aiokafka.protocol.api import ResponseHeader_v0
    from aiokafka.protocol.fetch import FetchResponse_v11
    frame = _fetch_frame(11)

    def decode():
        data = io.BytesIO(frame)
        ResponseHeader_v0.decode(data)
        return FetchResponse_v11.decode(data)

    bench = compare("kafka-fetch-decode-4x256KiB-v11", "aiokafka", items=PARTITIONS, nbytes=TOTAL)
    response = bench(decode)
    assert response.topics[0][1][3][-1] == RECORD_SETS[3]


@pytest.mark.parametrize("version", [12, 17])
def test_fetch_encode_fastmq(compare, version):
    response = _fetch_response()
    bench = compare(f"kafka-fetch-encode-4x256KiB-v{version}", "fastmq", items=PARTITIONS, nbytes=TOTAL)
    assert len(bench(kp.encode_response, kp.ApiKey.FETCH, version, 1, response)) > TOTAL


@pytest.mark.parametrize("version", [12, 17])
def test_fetch_encode_kafka_python(compare, version):
    from kafka.protocol.consumer import FetchResponse
    frame = _fetch_frame(version)
    response = FetchResponse.decode(frame, version=version, header=True)
    bench = compare(f"kafka-fetch-encode-4x256KiB-v{version}", "kafka-python", items=PARTITIONS, nbytes=TOTAL)
    assert len(bench(response.encode, header=True, framed=True)) > TOTAL


# ---------------------------------------------------------------------------------------------------------
# MetadataResponse, 100 topics
# ---------------------------------------------------------------------------------------------------------

def _metadata_frame(version: int) -> bytes:
    return bytes(kp.encode_response(kp.ApiKey.METADATA, version, 1, _metadata_response()))[4:]


@pytest.mark.parametrize("version", [5, 12])
def test_metadata_decode_fastmq(compare, version):
    frame = _metadata_frame(version)
    bench = compare(f"kafka-metadata-decode-100-topics-v{version}", "fastmq", items=100, nbytes=len(frame))
    _, response = bench(kp.decode_response, kp.ApiKey.METADATA, version, frame)
    assert len(response.topics) == 100


@pytest.mark.parametrize("version", [5, 12])
def test_metadata_decode_kafka_python(compare, version):
    from kafka.protocol.metadata import MetadataResponse
    frame = _metadata_frame(version)
    bench = compare(f"kafka-metadata-decode-100-topics-v{version}", "kafka-python", items=100, nbytes=len(frame))
    assert len(bench(MetadataResponse.decode, frame, version=version, header=True).topics) == 100


def test_metadata_decode_aiokafka(compare):
    from aiokafka.protocol.api import ResponseHeader_v0
    from aiokafka.protocol.metadata import MetadataResponse_v5
    frame = _metadata_frame(5)

    def decode():
        data = io.BytesIO(frame)
        ResponseHeader_v0.decode(data)
        return MetadataResponse_v5.decode(data)

    bench = compare("kafka-metadata-decode-100-topics-v5", "aiokafka", items=100, nbytes=len(frame))
    assert len(bench(decode).topics) == 100


@pytest.mark.parametrize("version", [5, 12])
def test_metadata_encode_fastmq(compare, version):
    response = _metadata_response()
    bench = compare(f"kafka-metadata-encode-100-topics-v{version}", "fastmq", items=100)
    assert len(bench(kp.encode_response, kp.ApiKey.METADATA, version, 1, response)) > 100 * 40
