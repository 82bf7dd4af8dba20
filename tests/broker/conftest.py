"""Fixtures of the broker tests: a fresh embedded broker per test (small files) and a
blocking Kafka wire client that speaks the protocol with fastmq's codecs, byte for byte."""
from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.kafka import protocol as kp
from fastmq.kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

WAIT = 10.0


def small_broker(path, **options: Any) -> EmbeddedBroker:
    options.setdefault("commit_log_file_size", 4 << 20)
    options.setdefault("group_initial_rebalance_delay_ms", 100)
    return EmbeddedBroker(path, **options)


@pytest.fixture
def broker(tmp_path):
    with small_broker(tmp_path / "data") as embedded:
        yield embedded


def wait_for(predicate, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


class Wire:
    """One blocking connection: request() sends a request and returns the decoded response body."""

    def __init__(self, address: tuple[str, int] | str, client_id: str = "wire-test") -> None:
        if isinstance(address, str):
            host, port = address.rsplit(":", 1)
            address = (host, int(port))
        self.sock = socket.create_connection(address, timeout=WAIT)
        self.client_id = client_id
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: Any) -> int:
        self.correlation_id += 1
        frame = kp.encode_request(api_key, version, self.correlation_id, self.client_id, body)
        self.sock.sendall(bytes(memoryview(frame)))
        return self.correlation_id

    def receive_frame(self) -> bytes:
        size = struct.unpack(">i", self.recv_exact(4))[0]
        return self.recv_exact(size)

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        received_id, body = kp.decode_response(api_key, version, self.receive_frame())
        assert received_id == correlation_id
        return body

    def request(self, api_key: int, version: int, body: Any) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, body))

    def recv_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def closed_by_peer(self, timeout: float = WAIT) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionError, OSError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


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
