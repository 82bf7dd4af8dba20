"""fastmq.kafka.fetcher: fetch sessions, prefetching, pull-frequency control and bad fetch responses.

Against Tansu where a real broker can show the behaviour (it stores batches with a bad CRC as they come), and
against a scripted broker for what no healthy broker does on demand: fetch sessions (Tansu creates none),
unreadable responses and error codes this version of fastmq does not know.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from typing import Any, Callable

import pytest

from fastmq.kafka._native.records import RecordBatchBuilder
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient
from fastmq.kafka.consumer import Consumer
from fastmq.kafka.fetcher import PREFETCH_DEPTH, FetchSession
from fastmq.kafka.structs import TopicPartition
from tests.support.brokers import on_brokers

TS = 1_700_000_000_000
WAIT = 20.0


def batch(base_offset: int, count: int, value: bytes = b"v") -> bytes:
    builder = RecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30, base_offset=base_offset)
    for delta in range(count):
        builder.append(delta, TS, None, value + b"%d" % (base_offset + delta), [])
    return bytes(builder.build())


def poll_until(consumer: Consumer, count: int, timeout: float = WAIT) -> list:
    records, deadline = [], time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for chunk in consumer.poll(0.5).values():
            records.extend(chunk)
    return records


# ---- fetch sessions: the client's bookkeeping --------------------------------------------------------------

def test_fetch_session_full_then_incremental_then_forget():
    a, b, c = (TopicPartition("t", p) for p in range(3))
    session = FetchSession()
    assert session.build({a: 0, b: 0}, True) == (0, 0, [a, b], [])
    session.on_response(77, 0, {a: 0, b: 0})
    assert (session.session_id, session.epoch) == (77, 1)
    # Only what changed travels; what is no longer wanted is forgotten.
    assert session.build({a: 5, b: 0, c: 0}, True) == (77, 1, [a, c], [])
    session.on_response(77, 1, {a: 5, b: 0, c: 0})
    assert session.build({a: 5, c: 3}, True) == (77, 2, [c], [b])
    session.reset()
    assert session.build({a: 5}, True) == (0, 0, [a], [])


def test_a_broker_without_sessions_gets_full_requests():
    a = TopicPartition("t", 0)
    session = FetchSession()
    session.on_response(0, 0, {a: 0})
    assert session.build({a: 9}, True) == (0, 0, [a], [])
    assert session.build({a: 9}, False) == (0, -1, [a], [])


# ---- a scripted broker ----------------------------------------------------------------------------------------

class ScriptedBroker:
    """A one-node Kafka broker on 127.0.0.1 that answers ApiVersions and Metadata itself and Fetch through
    `on_fetch(request, version) -> FetchResponse | bytes` (bytes: a whole frame body to send as it is)."""

    VERSIONS = {kp.ApiKey.API_VERSIONS: (0, 3), kp.ApiKey.METADATA: (1, 9), kp.ApiKey.FETCH: (4, 12),
                kp.ApiKey.LIST_OFFSETS: (1, 7)}

    def __init__(self, topic: str, on_fetch: Callable[[Any, int], Any], partitions: int = 1) -> None:
        self.topic = topic
        self.partitions = partitions
        self.on_fetch = on_fetch
        self.fetches: list[Any] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _read(self, conn: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            try:
                chunk = conn.recv(size - len(data))
            except (TimeoutError, socket.timeout):
                if self._stop.is_set():
                    raise ConnectionError("stopped") from None
                continue
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        try:
            while not self._stop.is_set():
                (size,) = struct.unpack(">i", self._read(conn, 4))
                header, body = kp.decode_request(self._read(conn, size))
                key, version, cid = header.request_api_key, header.request_api_version, header.correlation_id
                if key == kp.ApiKey.API_VERSIONS:
                    response = kp.ApiVersionsResponse(error_code=0, api_keys=[
                        kp.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                        for k, (lo, hi) in self.VERSIONS.items()])
                elif key == kp.ApiKey.METADATA:
                    response = self._metadata()
                elif key == kp.ApiKey.FETCH:
                    self.fetches.append(body)
                    response = self.on_fetch(body, version)
                elif key == kp.ApiKey.LIST_OFFSETS:
                    L = kp.ListOffsetsResponse
                    response = L(topics=[L.ListOffsetsTopicResponse(name=t.name, partitions=[
                        L.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                                       timestamp=-1, offset=0 if p.timestamp == -2 else 5)
                        for p in t.partitions]) for t in body.topics])
                else:
                    raise ConnectionError(f"unexpected API {key}")
                if isinstance(response, bytes):
                    frame = struct.pack(">ii", len(response) + 4, cid) + response
                else:
                    frame = bytes(kp.encode_response(key, version, cid, response))
                conn.sendall(frame)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()

    def _metadata(self) -> Any:
        M = kp.MetadataResponse
        return M(brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
                 cluster_id="scripted", controller_id=1, topics=[M.MetadataResponseTopic(
                     error_code=0, name=self.topic, is_internal=False, partitions=[
                         M.MetadataResponsePartition(error_code=0, partition_index=p, leader_id=1, leader_epoch=0,
                                                     replica_nodes=[1], isr_nodes=[1])
                         for p in range(self.partitions)])])

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()
        for thread in self._threads:
            thread.join(5)


def fetch_response(parts: dict[int, tuple[int, bytes | None]], topic: str, session_id: int = 0) -> Any:
    """parts: partition -> (error code, records)."""
    F = kp.FetchResponse
    return F(error_code=0, session_id=session_id, responses=[F.FetchableTopicResponse(topic=topic, partitions=[
        F.PartitionData(partition_index=p, error_code=code, high_watermark=100, last_stable_offset=100,
                        log_start_offset=0, records=records)
        for p, (code, records) in parts.items()])])


@pytest.fixture
def scripted():
    brokers = []

    def start(on_fetch, partitions: int = 1):
        broker = ScriptedBroker(f"s-{uuid.uuid4().hex[:8]}", on_fetch, partitions)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.stop()


def consumer_for(broker: ScriptedBroker, partitions: int = 1, **options) -> Consumer:
    consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, fetch_max_wait_ms=50,
                        retry_backoff_ms=20, **options)
    tps = [TopicPartition(broker.topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    return consumer


def test_fetch_sessions_send_only_what_changed(scripted):
    sessions = {"next": 0}

    def on_fetch(request, version):
        if request.session_epoch == 0:
            sessions["next"] += 1
        partitions = {p.partition: p.fetch_offset for t in request.topics for p in t.partitions}
        parts = {p: (0, batch(offset, 2)) for p, offset in partitions.items() if offset < 6}
        time.sleep(0.01)  # a broker that takes its time answering
        return fetch_response(parts, broker.topic, session_id=1000 + sessions["next"])

    broker = scripted(on_fetch, partitions=3)
    consumer = consumer_for(broker, partitions=3)
    try:
        records = poll_until(consumer, 18)
        assert len(records) == 18
        assert sorted({(r.partition, r.offset) for r in records}) == [(p, o) for p in range(3) for o in range(6)]
        first, *later = broker.fetches
        assert first.session_epoch == 0 and first.session_id == 0
        assert len(first.topics[0].partitions) == 3
        incremental = [r for r in later if r.session_epoch > 0]
        assert incremental, "the consumer never used the session the broker created"
        assert all(r.session_id == 1001 for r in incremental)
        # Once everything is read, nothing changes: the session carries on with empty requests.
        time.sleep(0.3)  # a few idle fetches go by
        assert any(not r.topics for r in broker.fetches[-3:])
    finally:
        consumer.close()


def test_an_unknown_error_code_reaches_poll_with_its_number(scripted):
    broker = scripted(lambda request, version: fetch_response({0: (999, None)}, broker.topic))
    consumer = consumer_for(broker)
    try:
        with pytest.raises(kerrors.UnknownError) as info:
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                consumer.poll(0.5)
        assert info.value.errno == 999
        assert "fetch of" in str(info.value)
    finally:
        consumer.close()


def test_an_unreadable_fetch_response_raises_a_protocol_error_then_fetching_recovers(scripted):
    calls = {"n": 0}

    def on_fetch(request, version):
        calls["n"] += 1
        whole = bytes(kp.encode_response(kp.ApiKey.FETCH, version, 0, fetch_response({0: (0, batch(0, 3))}, broker.topic)))
        if calls["n"] == 1:
            return whole[8:-20]                 # the body cut short (the frame's size says so)
        return whole[8:]

    broker = scripted(on_fetch)
    consumer = consumer_for(broker)
    try:
        with pytest.raises(kerrors.KafkaProtocolError, match="could not be read"):
            poll_until(consumer, 1)
        assert [r.offset for r in poll_until(consumer, 3)] == [0, 1, 2]
    finally:
        consumer.close()


def test_offset_out_of_range_resets_by_policy_or_raises_with_none(scripted):
    def on_fetch(request, version):
        offset = request.topics[0].partitions[0].fetch_offset
        if offset >= 5:
            return fetch_response({0: (kerrors.OffsetOutOfRangeError.errno, None)}, broker.topic)
        return fetch_response({0: (0, batch(offset, 5 - offset))}, broker.topic)

    broker = scripted(on_fetch)
    tp = TopicPartition(broker.topic, 0)
    consumer = consumer_for(broker, auto_offset_reset="earliest")
    try:
        consumer.seek(tp, 1000)
        assert [r.offset for r in poll_until(consumer, 5)] == [0, 1, 2, 3, 4]
    finally:
        consumer.close()
    strict = consumer_for(broker, auto_offset_reset="none")
    try:
        strict.seek(tp, 1000)
        with pytest.raises(kerrors.OffsetOutOfRangeError, match="auto_offset_reset is 'none'"):
            poll_until(strict, 1)
        assert strict.position(tp) == 1000
    finally:
        strict.close()


def test_records_cut_inside_the_only_batch_are_a_clear_error(scripted):
    broker = scripted(lambda request, version: fetch_response({0: (0, batch(0, 5)[:50])}, broker.topic))
    consumer = consumer_for(broker)
    try:
        with pytest.raises(kerrors.CorruptRecordError, match="without one whole record batch"):
            poll_until(consumer, 1)
    finally:
        consumer.close()


# ---- against Tansu ------------------------------------------------------------------------------------------

def produce_raw(bootstrap: str, topic: str, record_set: bytes) -> None:
    client = KafkaClient(bootstrap_servers=bootstrap)
    try:
        info = client.topic_metadata(topic, WAIT)
        P = kp.ProduceRequest
        response = client.request(info.partitions[0].leader, P(acks=1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=topic, topic_id=info.topic_id, partition_data=[
                P.PartitionProduceData(index=0, records=record_set)])]))
        assert response.responses[0].partition_responses[0].error_code == 0
    finally:
        client.close()


@on_brokers("tansu")       # Apache Kafka checks the CRC of what is produced (CORRUPT_MESSAGE): none lands there
def test_a_corrupt_batch_on_the_broker_raises_at_its_offset_until_sought_past(kafka_broker):
    topic = f"crc-{uuid.uuid4().hex[:8]}"
    produce_raw(kafka_broker.bootstrap_servers, topic, batch(0, 3))
    bad = bytearray(batch(0, 3, b"w"))
    bad[-2] ^= 0x01                                 # a value byte: only the CRC notices
    produce_raw(kafka_broker.bootstrap_servers, topic, bytes(bad))
    produce_raw(kafka_broker.bootstrap_servers, topic, batch(0, 3, b"z"))
    tp = TopicPartition(topic, 0)
    consumer = Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest")
    try:
        consumer.assign([tp])
        assert [r.value for r in poll_until(consumer, 3)] == [b"v0", b"v1", b"v2"]
        for _ in range(2):                          # it stays at the bad batch
            with pytest.raises(kerrors.CorruptRecordError, match="CRC"):
                poll_until(consumer, 1)
            assert consumer.position(tp) == 3
        consumer.seek(tp, 6)
        assert [r.value for r in poll_until(consumer, 3)] == [b"z0", b"z1", b"z2"]
    finally:
        consumer.close()
    unchecked = Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest", check_crcs=False)
    try:
        unchecked.assign([tp])
        assert len(poll_until(unchecked, 9)) == 9
    finally:
        unchecked.close()


def test_prefetching_is_bounded_per_partition(kafka_broker):
    import confluent_kafka
    topic = f"pre-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 5})
    for i in range(3000):
        producer.produce(topic, b"x" * 100, partition=0)
    assert producer.flush(WAIT) == 0
    consumer = Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                        max_partition_fetch_bytes=4096, fetch_max_bytes=4096)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        assert len(consumer.poll(WAIT, max_records=1)[tp]) == 1
        time.sleep(0.5)                             # the loop fetches ahead while we are not polling ...
        state = consumer._subscriptions.assignment[tp]
        assert 1 <= state.queued - state.drained <= PREFETCH_DEPTH   # ... but only so far
        assert len(poll_until(consumer, 2999)) == 2999
    finally:
        consumer.close()


def test_pull_frequency_control_spaces_out_empty_fetches(kafka_broker):
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    counts = {}
    for backoff in (0, 400):
        consumer = Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                            fetch_max_wait_ms=10, empty_fetch_backoff_ms=backoff)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.poll(0.2)
            start = consumer._fetcher.fetch_requests
            consumer.poll(1.2)
            counts[backoff] = consumer._fetcher.fetch_requests - start
        finally:
            consumer.close()
    assert counts[400] <= 4
    assert counts[0] > counts[400]
