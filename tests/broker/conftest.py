"""Fixtures of the broker tests: a fresh embedded broker per test (small files), a wire connection to it
(tests/support/kafka_wire.py) and request helpers on top."""
from __future__ import annotations

import struct
from typing import Any

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import protocol as kp
from fastmq.kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from tests.support.kafka_wire import Wire



def small_broker(path, **options: Any) -> EmbeddedBroker:
    options.setdefault("commit_log_file_size", 4 << 20)
    options.setdefault("group_initial_rebalance_delay_ms", 100)
    return EmbeddedBroker(path, **options)


@pytest.fixture
def broker(tmp_path):
    with small_broker(tmp_path / "data") as embedded:
        yield embedded


@pytest.fixture
def wire(broker):
    connection = Wire(broker.bootstrap_servers)
    yield connection
    connection.close()


def record_batch(values, *, keys=None, headers=None, timestamps=None, producer=(-1, -1, -1), codec: int = 0) -> bytes:
    """A v2 batch of these values (keys/headers/timestamps per record when given)."""
    producer_id, epoch, sequence = producer
    builder = DefaultRecordBatchBuilder(2, codec, False, producer_id, epoch, sequence, 1 << 30)
    for i, value in enumerate(values):
        builder.append(i, timestamps[i] if timestamps else 1_700_000_000_000 + i,
                       keys[i] if keys else None, value, headers[i] if headers else [])
    return bytes(builder.build())


def produce(wire: Wire, topic: str, partition: int, records: bytes, acks: int = 1, version: int = 9,
            transactional_id: str | None = None) -> Any:
    request = kp.ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=10000,
                                topic_data=[kp.ProduceRequest.TopicProduceData(
                                    name=topic, partition_data=[kp.ProduceRequest.PartitionProduceData(
                                        index=partition, records=records)])])
    if acks == 0:
        wire.send(0, version, request)
        return None
    response = wire.request(0, version, request)
    return response.responses[0].partition_responses[0]


def fetch(wire: Wire, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1,
          max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, version: int = 11,
          isolation_level: int = 0) -> Any:
    request = kp.FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                              isolation_level=isolation_level,
                              session_id=0, session_epoch=-1, topics=[kp.FetchRequest.FetchTopic(
                                  topic=topic, partitions=[kp.FetchRequest.FetchPartition(
                                      partition=partition, fetch_offset=offset,
                                      partition_max_bytes=partition_max_bytes)])], rack_id="")
    return wire.request(1, version, request).responses[0].partitions[0]


def records_of(partition_data: Any) -> list:
    """Every record of a fetched partition, across its batches."""
    data = bytes(partition_data.records or b"")
    records = []
    while len(data) >= 12:
        size = struct.unpack(">i", data[8:12])[0] + 12
        if size > len(data):
            break
        records.extend(DefaultRecordBatch(data[:size]))
        data = data[size:]
    return records


def metadata(wire: Wire, topics: list[str] | None, version: int = 9, allow_auto: bool = True) -> Any:
    request = kp.MetadataRequest(topics=None if topics is None else [
        kp.MetadataRequest.MetadataRequestTopic(name=name) for name in topics], allow_auto_topic_creation=allow_auto)
    return wire.request(3, version, request)
