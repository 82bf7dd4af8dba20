"""The embedded broker's nsqd (fastmq/broker/nsq) with fastmq.nsq's client, raw wire commands, and Kafka clients on
the same topics."""
from __future__ import annotations

import json
import socket
import struct
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.nsq import Consumer, NSQServerError, Producer
from fastmq.nsq._native import codec
from tests.support.nsq import http_get_json, receive
from tests.support.sockets import recv_exact
from tests.support.waiting import wait_for

WAIT = 20.0


@pytest.fixture(scope="module")
def broker():
    listeners = [ListenerConfig(), ListenerConfig(protocol="nsq"), ListenerConfig(protocol="nsq-http"),
                 ListenerConfig(protocol="nsqlookupd-http")]
    with EmbeddedBroker(listeners=listeners, num_partitions=2) as started:
        yield started


def http_address(broker, index: int) -> str:
    host, port = broker.addresses[index]
    return f"{host}:{port}"


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
            producer.publish("plain", b"x" * (2 * 1024 * 1024)).result(WAIT)     # over max.message.bytes
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


def test_http_apis_and_lookup_with_partitions(broker):
    nsqd_http, lookupd_http = http_address(broker, 2), http_address(broker, 3)
    assert urllib.request.urlopen(f"http://{nsqd_http}/ping", timeout=WAIT).read() == b"OK"
    post(nsqd_http, "/topic/create?topic=web")
    post(nsqd_http, "/channel/create?topic=web&channel=ch")
    post(nsqd_http, "/pub?topic=web", b"one")
    post(nsqd_http, "/mpub?topic=web&partition=1", b"two\nthree\n")
    lookup = http_get_json(lookupd_http, "/lookup?topic=web&metainfo=true")
    assert lookup["channels"] == ["ch"] and lookup["meta"]["partition_num"] == 2
    assert sorted(lookup["partitions"]) == ["0", "1"]
    assert lookup["producers"][0]["tcp_port"] == broker.addresses[1][1]
    with pytest.raises(urllib.error.HTTPError) as missing:
        http_get_json(lookupd_http, "/lookup?topic=nothing")
    assert missing.value.code == 404
    wrapped = json.loads(urllib.request.urlopen(f"http://{lookupd_http}/topics", timeout=WAIT).read())
    assert wrapped["status_code"] == 200 and "web" in wrapped["data"]["topics"]
    # Through the lookupd: one connection per partition
    with Consumer("web", "ch", lookupd_http_addresses=lookupd_http, max_in_flight=10) as consumer:
        assert sorted(message.body for message in receive(consumer, 3)) == [b"one", b"three", b"two"]
        assert consumer.connections == 2
    stats = http_get_json(nsqd_http, "/stats?format=json&topic=web")
    assert stats["topics"][0]["channels"][0]["depth"] == 0


def test_sharding_id_always_picks_the_same_partition(broker):
    lookupd_http = http_address(broker, 3)
    post(http_address(broker, 2), "/topic/create?topic=sharded")
    with Producer(lookupd_http_addresses=lookupd_http) as producer:
        for key in ("order-1", "order-2", "order-3"):
            for index in range(5):
                producer.publish("sharded", f"{key}:{index}".encode(), sharding_id=key).result(WAIT)
        trace = producer.publish_trace("sharded", b"traced", 1234, sharding_id="order-1").result(WAIT)
        assert trace.trace_id == 1234
    with Consumer("sharded", "ch", lookupd_http_addresses=lookupd_http, max_in_flight=20, start_offset=None) \
            as consumer:
        messages = receive(consumer, 16)
    by_key: dict[str, set] = {}
    for message in messages:
        key = message.body.split(b":")[0].decode()
        by_key.setdefault(key, set()).add(parse_partition(message.id))
    assert all(len(partitions) == 1 for partitions in by_key.values()), by_key


def parse_partition(message_id: bytes) -> int:
    return int(message_id[:4], 16)


def post(address: str, path: str, body: bytes = b"") -> bytes:
    request = urllib.request.Request(f"http://{address}{path}", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return response.read()


def test_cli_flags_make_nsq_listeners(tmp_path):
    from fastmq.cli import build_parser
    from fastmq.cli.broker import broker_config

    args = build_parser().parse_args(["broker", "--data-dir", str(tmp_path), "--nsqd", "127.0.0.1:0",
                                      "--nsqd-http", "127.0.0.1:0", "--nsqlookupd-http", "127.0.0.1:0"])
    config = broker_config(args)
    assert [listener.protocol for listener in config.listeners] == ["nsq", "nsq-http", "nsqlookupd-http"]


@settings(max_examples=40, deadline=None)
@given(garbage=st.binary(max_size=200), command=st.sampled_from(
    [b"", b"PUB t\n", b"MPUB t\n", b"FIN ", b"REQ ", b"SUB t c\n", b"RDY x\n", b"IDENTIFY\n", b"DPUB t 5\n"]))
def test_fuzzed_commands_never_break_the_broker(broker, garbage, command):
    # Any bytes after the magic: the broker answers, closes that connection, or waits for more; it keeps serving.
    with socket.create_connection(("127.0.0.1", broker.addresses[1][1]), timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + command + garbage)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2.0)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass
    with socket.create_connection(("127.0.0.1", broker.addresses[1][1]), timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.pub("fuzzcheck", b"alive"))
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)


@pytest.fixture(scope="module")
def tls_broker(pki):
    listener = ListenerConfig(protocol="nsq", ssl_certfile=pki.server_cert, ssl_keyfile=pki.server_key)
    with EmbeddedBroker(listeners=[listener]) as started:
        yield started


@pytest.mark.parametrize("features", [{"snappy": True}, {"deflate": True}, {"tls": True},
                                      {"tls": True, "deflate": True}], ids=["snappy", "deflate", "tls", "tls+deflate"])
def test_negotiated_features(tls_broker, pki, features):
    from fastmq.io.tls import create_client_context

    options = dict(features)
    if options.pop("tls", False):
        options["tls"] = create_client_context(ssl_cafile=pki.ca_file)
    address = "%s:%d" % tls_broker.addresses[0]
    topic = "features_" + "_".join(sorted(features))
    bodies = [bytes([i % 251]) * (i * 37 % 3000 + 1) for i in range(100)]
    with Producer(address, **options) as producer, \
            Consumer(topic, "ch", nsqd_tcp_addresses=address, max_in_flight=50, **options) as consumer:
        producer.publish_many(topic, bodies).result(WAIT)
        assert sorted(message.body for message in receive(consumer, 100)) == sorted(bodies)
        negotiated = producer.loop.run_in_loop(
            lambda: producer.pool.connection(producer.pool.nodes[0]).adapter.negotiated, timeout=WAIT)
    assert all(negotiated["tls_v1" if key == "tls" else key] for key in features)


def test_pub_ext_headers_and_sub_advanced_offsets(broker):
    lookupd_http = http_address(broker, 3)
    post(http_address(broker, 2), "/topic/create?topic=youzan&extend=true")
    with Producer(lookupd_http_addresses=lookupd_http) as producer:
        assert producer.publish_ext("youzan", b"plain-ext", {"region": "hz"}, partition=0).result(WAIT) is None
        trace = producer.publish_ext("youzan", b"traced-ext", {"##trace_id": "4242"}, partition=0).result(WAIT)
        assert trace.trace_id == 4242
        producer.publish_many("youzan", [b"third", b"fourth"], partition=0).result(WAIT)
    # the lookup's meta says the topic has ext headers: the consumer IDENTIFYs with extend_support by itself
    with Consumer("youzan", "ext", lookupd_http_addresses=lookupd_http, partition=0, max_in_flight=10) as consumer:
        messages = receive(consumer, 4)
    assert [(m.body, m.headers) for m in messages[:2]] == [(b"plain-ext", {"region": "hz"}),
                                                           (b"traced-ext", {"##trace_id": "4242"})]
    assert messages[2].headers == {} and messages[2].ext_version == 0
    # SUB_ADVANCED from queue offset 2 of partition 0: the offsets come with the messages
    with Consumer("youzan", "advanced", lookupd_http_addresses=lookupd_http, partition=0,
                  start_offset="msgcount:2", max_in_flight=10) as consumer:
        late = receive(consumer, 2)
    assert [(m.body, m.queue_offset) for m in late] == [(b"third", 2), (b"fourth", 3)]
    with pytest.raises(NSQServerError, match="E_INVALID_JSON_HEADER"):
        with Producer(nsqd_address(broker)) as producer:
            producer.publish_ext("youzan", b"x", b"[1, 2", partition=0).result(WAIT)


def test_rdy_passes_around_when_connections_outnumber_max_in_flight(broker):
    # Three partitions (three connections through the lookupd), max_in_flight 1: every connection gets its turn.
    lookupd_http = http_address(broker, 3)
    with Producer(nsqd_address(broker)) as producer:
        producer.publish("starve", b"first").result(WAIT)
    broker.broker.loop.run_in_loop(lambda: broker.broker.topics.add_partitions("starve", 3), timeout=WAIT)
    with Producer(nsqd_address(broker)) as producer:
        for partition in range(3):
            producer.publish("starve", b"p%d" % partition, partition=partition).result(WAIT)
    with Consumer("starve", "ch", lookupd_http_addresses=lookupd_http, max_in_flight=1,
                  rdy_redistribute_interval_s=0.2) as consumer:
        bodies = sorted(message.body for message in receive(consumer, 4))
        assert consumer.connections == 3
    assert bodies == [b"first", b"p0", b"p1", b"p2"]


def test_ordered_consumer_keeps_order_through_requeues(broker):
    # one chunk per message, several connections: a partition's messages still leave through one, in order
    with Producer(nsqd_address(broker), connections_per_nsqd=3, max_batch_messages=1) as producer:
        futures = [producer.publish("ordered", b"o%d" % i, partition=1) for i in range(6)]
        assert [future.result(WAIT) for future in futures] == [None] * 6
    seen = []
    with Consumer("ordered", "ch", nsqd_tcp_addresses=nsqd_address(broker), ordered=True, partition=1,
                  max_in_flight=10, backoff_ms=10) as consumer:
        def step() -> bool:
            message = consumer.poll(0.2)
            if message is not None:
                seen.append((message.body, message.attempts, message.queue_offset))
                if message.body == b"o2" and message.attempts == 1:
                    message.requeue(0, backoff=False)
                else:
                    message.finish()
            return len(seen) >= 7

        wait_for(step, timeout=WAIT, interval=0, message=lambda: f"7 deliveries, saw {seen}")
    assert [body for body, _, _ in seen] == [b"o0", b"o1", b"o2", b"o2", b"o3", b"o4", b"o5"]
    assert [offset for _, _, offset in seen] == [0, 1, 2, 2, 3, 4, 5]


def test_a_client_silent_for_two_heartbeats_is_closed(broker):
    with socket.create_connection(("127.0.0.1", broker.addresses[1][1]), timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.identify({"heartbeat_interval": 1000}))
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        # (answered heartbeats keep a connection: the nsqjs peer test runs 1 s heartbeats for about 3 s)
        sock.settimeout(4.0)
        data = b""
        while True:                        # not answered: closed at the heartbeat after two silent intervals
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        assert data.count(codec.HEARTBEAT) <= 2
