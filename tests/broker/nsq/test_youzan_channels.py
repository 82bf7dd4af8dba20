"""Youzan's channel features on the embedded broker: MPUB_TRACE, dispatch tags, ext filters, ordered topics
(E_SUB_ORDER_IS_MUST), and channel positions that survive a broker restart."""
from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.broker.nsq.filters import FilterError, build_filter, parse_header
from fastmq.nsq import Consumer, Producer
from fastmq.nsq._native import codec
from tests.broker.nsq.test_nsqd import http_address, post, read_frame
from tests.support.nsq import http_get_json, receive
from tests.support.waiting import wait_for

WAIT = 20.0


def listeners() -> list[ListenerConfig]:
    return [ListenerConfig(protocol="nsq"), ListenerConfig(protocol="nsq-http")]


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(listeners=listeners(), num_partitions=2) as started:
        yield started


def address(broker) -> str:
    return "%s:%d" % broker.addresses[0]


def test_mpub_trace_answers_with_the_first_offset(broker):
    with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.pub("mtrace", b"zero", 1)
                     + codec.mpub_trace("mtrace", 1, [7, 8, 9], [b"a", b"bb", b"ccc"]))
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        frame_type, data = read_frame(sock)
        assert frame_type == codec.FRAME_RESPONSE
        offset, trace_id, _, size = codec.decode_trace_reply(data)
        assert (offset, trace_id, size) == (1, 0, 6)
        sock.sendall(codec.mpub_trace("mtrace", 1, [1], [b""]))
        assert read_frame(sock)[1].startswith(b"E_BAD_MESSAGE")
    with Consumer("mtrace", "c", nsqd_tcp_addresses=address(broker), partition=1, max_in_flight=10) as consumer:
        assert [m.body for m in receive(consumer, 4)] == [b"zero", b"a", b"bb", b"ccc"]


def create_ext_topic(broker, topic: str) -> None:
    post(http_address(broker, 1), f"/topic/create?topic={topic}&extend=true")


def channel_names(broker, topic: str) -> set[str]:
    stats = http_get_json(http_address(broker, 1), f"/stats?format=json&topic={topic}")
    return {channel["channel_name"] for topic_stats in stats["topics"] for channel in topic_stats["channels"]}


def test_dispatch_tags_route_messages_to_their_subscribers(broker):
    create_ext_topic(broker, "tagged")
    with Producer(address(broker)) as producer:
        for i in range(6):
            tag = {"##client_dispatch_tag": "blue"} if i % 2 else {}
            producer.publish_ext("tagged", b"m%d" % i, dict(tag, n=i), partition=0).result(WAIT)
        producer.publish_ext("tagged", b"green", {"##client_dispatch_tag": "green"}, partition=0).result(WAIT)
    from tests.support.waiting import wait_for

    with Consumer("tagged", "c", nsqd_tcp_addresses=address(broker), partition=0, desired_tag="blue",
                  extend_support=True, max_in_flight=10) as blue:
        # The tagged subscriber first: a tagged message finding no subscriber of its tag goes to anyone, and in
        # one suite run the plain one subscribed first and took them all.
        wait_for(lambda: blue.connections, timeout=WAIT, message="the blue subscriber subscribed")
        plain = Consumer("tagged", "c", nsqd_tcp_addresses=address(broker), partition=0, extend_support=True,
                         max_in_flight=10)
        got = {"blue": [], "plain": []}

        def both() -> bool:
            for name, consumer in (("blue", blue), ("plain", plain)):
                message = consumer.poll(0.05)
                if message is not None:
                    got[name].append(message.body)
                    message.finish()
            return len(got["blue"]) + len(got["plain"]) >= 7

        with plain:
            wait_for(both, timeout=WAIT, interval=0, message=lambda: f"7 messages, got {got}")
    # every blue message went to the blue subscriber; "green" has no subscriber of its own: anyone takes it
    assert {b"m1", b"m3", b"m5"} <= set(got["blue"])
    assert not {b"m1", b"m3", b"m5"} & set(got["plain"])
    assert sorted(got["blue"] + got["plain"]) == sorted([b"m%d" % i for i in range(6)] + [b"green"])


def test_ext_filters_skip_what_they_refuse(broker):
    create_ext_topic(broker, "filtered")
    with Producer(address(broker)) as producer:
        for region in ("hz", "sh", "hz-2", "bj"):
            producer.publish_ext("filtered", region.encode(), {"region": region}, partition=0).result(WAIT)
        producer.publish("filtered", b"no-header", partition=0).result(WAIT)
        producer.publish_ext("filtered", b"last", {"region": "hz"}, partition=0).result(WAIT)
    with Consumer("filtered", "glob", nsqd_tcp_addresses=address(broker), partition=0, extend_support=True,
                  ext_filter={"type": 3, "filter_ext_key": "region", "filter_data": "hz*"}) as consumer:
        assert [m.body for m in receive(consumer, 3)] == [b"hz", b"hz-2", b"last"]
    with Consumer("filtered", "not-hz", nsqd_tcp_addresses=address(broker), partition=0, extend_support=True,
                  ext_filter={"type": 2, "filter_ext_key": "region", "filter_data": "^hz", "inverse": True}) \
            as consumer:
        # a new channel starts at the topic's end: publish after it exists (the consumer subscribes in the
        # background: under load the messages came first, and the channel, made after them, had none)
        wait_for(lambda: "not-hz" in channel_names(broker, "filtered"), WAIT, interval=0.05,
                 message="the consumer's channel made on the broker")
        with Producer(address(broker)) as producer:
            for region in ("hz", "sh"):
                producer.publish_ext("filtered", region.encode(), {"region": region}, partition=0).result(WAIT)
            producer.publish("filtered", b"plain", partition=0).result(WAIT)
        assert [m.body for m in receive(consumer, 2)] == [b"sh", b"plain"]
    with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.identify({"ext_filter": {"type": 2, "filter_ext_key": "k",
                                                                     "filter_data": "("}}))
        assert read_frame(sock)[1].startswith(b"E_BAD_BODY IDENTIFY ext_filter regex")


def test_ext_headers_tags_and_filters_belong_to_ext_topics(broker):
    """Youzan's topic-level ext flag: PUB_EXT only to ext topics, SUB with extend_support only on them (and only
    on them: an ext topic refuses subscribers without it), tags and filters ignored elsewhere."""
    with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.pub_ext("plain_topic", 0, {"region": "hz"}, b"m")
                     + codec.pub("plain_topic", b"kept", 0))
        frame_type, data = read_frame(sock)
        assert frame_type == codec.FRAME_ERROR and data.startswith(b"E_EXT_NOT_SUPPORT")
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)           # not fatal: the PUB went on
        # INTERNAL_CREATE_TOPIC name partition ext: an ext topic with partitions 0..2
        sock.sendall(b"INTERNAL_CREATE_TOPIC created_ext 2 true\n" + codec.pub_ext("created_ext", 2, {"k": "v"}, b"x")
                     + b"INTERNAL_CREATE_TOPIC bad_ext 0 maybe\n")
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        assert read_frame(sock)[1].startswith(b"E_BAD_EXT")
    for topic, identify, error in (("created_ext", {}, b"E_SUB_EXTEND_NEED"),
                                   ("plain_topic", {"extend_support": True}, b"E_SUB_EXTEND_FORBIDDON")):
        with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
            sock.sendall(codec.MAGIC_V2 + codec.identify(identify) + codec.sub(topic, "c", 0))
            assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
            assert read_frame(sock)[1].startswith(error)
            assert sock.recv(1) == b""                                     # fatal
    # a filter and a tag on a topic without ext headers are ignored: the subscriber gets everything
    with Consumer("plain_topic", "c", nsqd_tcp_addresses=address(broker), partition=0, desired_tag="blue",
                  ext_filter={"type": 1, "filter_ext_key": "region", "filter_data": "sh"}) as consumer:
        assert [m.body for m in receive(consumer, 1)] == [b"kept"]
    with Consumer("created_ext", "c", nsqd_tcp_addresses=address(broker), partition=2,
                  extend_support=True) as consumer:
        assert [(m.body, m.headers) for m in receive(consumer, 1)] == [(b"x", {"k": "v"})]


@pytest.mark.parametrize("spec, header, matched", [
    ({"type": 1, "filter_ext_key": "k", "filter_data": "v"}, {"k": "v"}, True),
    ({"type": 1, "filter_ext_key": "k", "filter_data": "v"}, {"k": 1}, False),
    ({"type": 1, "filter_ext_key": "k", "filter_data": "v"}, None, False),
    ({"type": 1, "filter_ext_key": "k", "filter_data": "v", "inverse": True}, None, True),
    ({"type": 2, "filter_ext_key": "k", "filter_data": "b+"}, {"k": "abbc"}, True),
    ({"type": 4, "filter_ext_key": "all", "filter_data_list": [{"filter_ext_key": "a", "filter_data": "1"},
                                                               {"filter_ext_key": "b", "filter_data": "2"}]},
     {"a": "1", "b": "3"}, False),
    ({"type": 4, "filter_ext_key": "any", "filter_data_list": [{"filter_ext_key": "a", "filter_data": "1"},
                                                               {"filter_ext_key": "b", "filter_data": "2"}]},
     {"a": "1", "b": "3"}, True),
])
def test_filter_kinds(spec, header, matched):
    assert build_filter(spec)(header) is matched


@settings(max_examples=60, deadline=None)
@given(spec=st.dictionaries(st.sampled_from(["type", "inverse", "filter_ext_key", "filter_data",
                                             "filter_data_list"]),
                            st.one_of(st.integers(-1, 6), st.text(max_size=8), st.booleans(),
                                      st.lists(st.dictionaries(st.text(max_size=3), st.text(max_size=3)),
                                               max_size=3))),
       ext=st.binary(max_size=40))
def test_fuzzed_filters_and_headers_are_refused_or_answer(spec, ext):
    try:
        match = build_filter(spec)
    except FilterError:
        return
    if match is not None:
        assert match(parse_header(ext)) in (True, False)


def test_ordered_topics_want_sub_ordered_and_a_partition(broker):
    post(http_address(broker, 1), "/topic/create?topic=strict&partition_num=2&orderedmulti=true")
    with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.pub("strict", b"where"))
        assert read_frame(sock)[1].startswith(b"E_BAD_PARTITION")
    with socket.create_connection(broker.addresses[0], timeout=WAIT) as sock:
        sock.sendall(codec.MAGIC_V2 + codec.pub("strict", b"here", 1) + codec.sub("strict", "c", 1))
        assert read_frame(sock) == (codec.FRAME_RESPONSE, codec.OK)
        assert read_frame(sock) == (codec.FRAME_ERROR, b"E_SUB_ORDER_IS_MUST this topic is configured only allow "
                                                       b"ordered sub")
        assert sock.recv(1) == b""
    with Consumer("strict", "c", nsqd_tcp_addresses=address(broker), ordered=True, partition=1) as consumer:
        assert receive(consumer, 1)[0].body == b"here"


def test_channel_positions_survive_a_restart(tmp_path):
    data_dir = tmp_path / "data"
    with EmbeddedBroker(data_dir, listeners=listeners()) as broker:
        post(http_address(broker, 1), "/topic/create?topic=kept")
        post(http_address(broker, 1), "/channel/create?topic=kept&channel=done")
        post(http_address(broker, 1), "/channel/create?topic=kept&channel=idle")      # finishes nothing
        with Producer(address(broker)) as producer:
            producer.publish_many("kept", [b"m%d" % i for i in range(10)]).result(WAIT)
        with Consumer("kept", "done", nsqd_tcp_addresses=address(broker), max_in_flight=20) as consumer:
            got = receive(consumer, 10, finish=False)
            for message in got[:6]:
                message.finish()
            # m6..m9 are still in flight when this consumer goes and the broker stops
        post(http_address(broker, 1), "/channel/create?topic=kept&channel=gone")
        post(http_address(broker, 1), "/channel/delete?topic=kept&channel=gone")
    with EmbeddedBroker(data_dir, listeners=listeners()) as broker:
        assert sorted(broker.broker.front_end("nsq").channels["kept"]) == ["done", "idle"]
        with Producer(address(broker)) as producer:
            producer.publish("kept", b"after").result(WAIT)
        with Consumer("kept", "done", nsqd_tcp_addresses=address(broker), max_in_flight=20) as consumer:
            assert [m.body for m in receive(consumer, 5)] == [b"m6", b"m7", b"m8", b"m9", b"after"]
        with Consumer("kept", "idle", nsqd_tcp_addresses=address(broker), max_in_flight=20) as consumer:
            assert len(receive(consumer, 11)) == 11
