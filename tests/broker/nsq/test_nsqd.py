"""The embedded broker's nsqd (fastmq/broker/nsq) with fastmq.nsq's client, raw wire commands, and Kafka clients on
the same topics."""
from __future__ import annotations

import socket
import struct

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.nsq import Consumer, NSQServerError, Producer
from fastmq.nsq._native import codec
from tests.support.nsq import receive
from tests.support.waiting import wait_for

WAIT = 20.0


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(listeners=[ListenerConfig(), ListenerConfig(protocol="nsq")], num_partitions=2) as started:
        yield started


def nsqd_address(broker) -> str:
    host, port = broker.addresses[1]
    return f"{host}:{port}"


def test_publish_and_consume_with_our_client(broker):
    with Producer(nsqd_address(broker)) as producer, \
            Consumer("plain", "ch", nsqd_tcp_addresses=nsqd_address(broker), max_in_flight=20) as consumer:
        futures = [producer.publish("plain", b"m%d" % i) for i in range(100)]
        futures.append(producer.publish_many("plain", [b"x", b"y"], partition=1))
        for future in futures:
            assert future.result(WAIT) is None
        bodies = sorted(message.body for message in receive(consumer, 102))
    assert bodies == sorted([b"m%d" % i for i in range(100)] + [b"x", b"y"])


def test_requeue_timeout_and_deferred_publish(broker):
    with Producer(nsqd_address(broker)) as producer, \
            Consumer("redo", "ch", nsqd_tcp_addresses=nsqd_address(broker), backoff_ms=10,
                     msg_timeout_ms=1000) as consumer:
        producer.publish("redo", b"again").result(WAIT)
        first = receive(consumer, 1, finish=False)[0]
        first.requeue(0, backoff=False)
        second = receive(consumer, 1, finish=False)[0]
        assert (second.id, second.attempts) == (first.id, 2)
        # not answered: back after msg_timeout
        third = receive(consumer, 1, finish=False)[0]
        assert (third.id, third.attempts) == (first.id, 3)
        third.finish()
        producer.publish("redo", b"later", defer_ms=300).result(WAIT)
        producer.publish("redo", b"now").result(WAIT)
        assert [message.body for message in receive(consumer, 2)] == [b"now", b"later"]


def test_a_topic_written_through_nsq_reads_through_kafka_and_back(broker):
    from fastmq.kafka import Consumer as KafkaConsumer, Producer as KafkaProducer

    with Producer(nsqd_address(broker)) as producer:
        producer.publish_many("bridge", [b"from-nsq-%d" % i for i in range(5)], partition=0).result(WAIT)
    kafka_consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                   group_id="g")
    try:
        kafka_consumer.subscribe(["bridge"])
        got = []
        wait_for(lambda: got.extend(r.value for rs in kafka_consumer.poll(500).values() for r in rs) or len(got) >= 5,
                 timeout=WAIT, message=lambda: f"5 records through Kafka, got {got}")
    finally:
        kafka_consumer.close()
    assert sorted(got) == [b"from-nsq-%d" % i for i in range(5)]
    with Consumer("bridge", "ch", nsqd_tcp_addresses=nsqd_address(broker), max_in_flight=10) as consumer:
        receive(consumer, 5)
        with KafkaProducer(bootstrap_servers=broker.bootstrap_servers) as kafka_producer:
            kafka_producer.send("bridge", b"from-kafka", partition=1).get(WAIT)
        assert receive(consumer, 1)[0].body == b"from-kafka"


def test_pub_trace_and_ordered_subscription_on_the_wire(broker):
    with socket.create_connection(("127.0.0.1", broker.addresses[1][1]), timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.pub_trace("traced", 1, 77, b"hello"))
        frame_type, data = read_frame(sock)
        assert frame_type == codec.FRAME_RESPONSE
        offset, trace_id, _, size = codec.decode_trace_reply(data)
        assert (trace_id, size) == (77, 5)
        sock.sendall(codec.pub("traced", b"second", 1) + codec.sub_ordered("traced", "ch", 1) + codec.rdy(10))
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        frame_type, data = read_frame(sock)
        message = codec.decode_message(data, codec.WITH_OFFSET)
        assert (message.body, message.queue_offset) == (b"hello", offset)
        # ordered: nothing more until this one is finished, even with RDY 10; a requeue brings it back first
        sock.sendall(codec.req(message.id, 0))
        again = codec.decode_message(read_frame(sock)[1], codec.WITH_OFFSET)
        assert (again.body, again.attempts) == (b"hello", 2)
        sock.sendall(codec.fin(again.id))
        assert codec.decode_message(read_frame(sock)[1], codec.WITH_OFFSET).body == b"second"
        sock.sendall(codec.pub("traced", b"x", 9))
        frame_type, data = read_frame(sock)
        assert frame_type == codec.FRAME_ERROR and data.startswith(b"E_BAD_PARTITION")


def test_bad_input_gets_errors(broker):
    with pytest.raises(NSQServerError, match="E_BAD_MESSAGE"):
        with Producer(nsqd_address(broker)) as producer:
            producer.publish("plain", b"").result(WAIT)
    with socket.create_connection(("127.0.0.1", broker.addresses[1][1]), timeout=WAIT) as sock:
        sock.sendall(b"  V9")
        assert read_frame(sock)[1].startswith(b"E_BAD_PROTOCOL")
    with socket.create_connection(("127.0.0.1", broker.addresses[1][1]), timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + b"BOGUS x\n")
        assert read_frame(sock)[1].startswith(b"E_INVALID")
        assert sock.recv(1) == b""                      # fatal: closed


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    size, frame_type = struct.unpack(">II", recv_exact(sock, 8))
    return frame_type, recv_exact(sock, size - 4)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data
