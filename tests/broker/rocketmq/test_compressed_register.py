"""Compressed broker registrations at the embedded namesrv (register_body.py): the codec against an encoder written
here from Apache's RegisterBrokerBody.encode(true), fuzzed bodies, the wire (both header forms, bodyCrc32, the
answer and tables of the JSON form), and a real Apache 5.x broker run with compressedRegister=true."""
from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.broker.rocketmq import namesrv as namesrv_module
from fastmq.broker.rocketmq.register_body import (
    MAPPING_SINCE_VERSION,
    MAX_INFLATED,
    body_crc32,
    decode_compressed,
    is_deflated,
)
from fastmq.errors import CorruptDataError
from fastmq.rocketmq import Message, Producer, PullConsumer
from tests.support.rocketmq import RocketMQCluster, create_topics, unique
from tests.support.waiting import wait_for

from .conftest import Remoting, namesrv_address

REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO = 103, 104, 105, 106
V4_9_8, V5_5_0 = 409, 513           # MQVersion.Version ordinals: a 4.x broker's body ends after the filter servers
TOPIC_NAMES = st.text("abcXYZ019_-%|", min_size=1, max_size=30)
JAVA_INTS = st.integers(-2 ** 31, 2 ** 31 - 1)
ATTRIBUTES = st.dictionaries(st.text("+abc.", min_size=1, max_size=5), st.text("xyz0", max_size=5), max_size=2)
TOPICS = st.dictionaries(TOPIC_NAMES, st.tuples(JAVA_INTS, JAVA_INTS, JAVA_INTS,
                                                st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]), ATTRIBUTES), max_size=8)


def section(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def inflated_body(data_version: dict, topics: dict, filter_servers: list[str], mappings: list[dict],
                  version: int) -> bytes:
    """The inflated sections as RegisterBrokerBody.encode(true) writes them (5.x attributes as JSON)."""
    parts = [section(json.dumps(data_version).encode()), struct.pack(">i", len(topics))]
    for name, (read, write, perm, filter_type, attributes) in topics.items():
        compact = json.dumps(attributes, separators=(",", ":"))
        parts.append(section(f"{name} {read} {write} {perm} {filter_type} {compact}".encode()))
    parts.append(section(json.dumps(filter_servers).encode()))
    if version >= MAPPING_SINCE_VERSION:
        parts.append(struct.pack(">i", len(mappings)) + b"".join(section(json.dumps(m).encode()) for m in mappings))
    return b"".join(parts)


def compressed_body(topics: dict, version: int = V5_5_0, data_version: dict | None = None) -> bytes:
    return zlib.compress(inflated_body(data_version or {"stateVersion": 0, "timestamp": 1, "counter": 3}, topics,
                                       [], [{"topic": "static", "bname": "b", "epoch": 0}], version), 9)


def table_of(topics: dict) -> dict:
    return {name: {"readQueueNums": read, "writeQueueNums": write, "perm": perm, "topicSysFlag": 0}
            for name, (read, write, perm, _, _) in topics.items()}


@given(TOPICS, st.sampled_from([V4_9_8, V5_5_0]), st.integers(0, 2 ** 62), st.lists(st.text(max_size=8), max_size=3))
def test_a_compressed_body_decodes_to_the_topic_table_it_was_made_of(topics, version, counter, filter_servers):
    data_version = {"stateVersion": 0, "timestamp": 1700000000000, "counter": counter}
    body = zlib.compress(inflated_body(data_version, topics, filter_servers, [{"topic": "t", "x": [1, 2]}], version))
    assert is_deflated(body) and not is_deflated(json.dumps({"a": topics}).encode())
    assert decode_compressed(body, version) == (data_version, table_of(topics))


@given(TOPICS, st.sampled_from([V4_9_8, V5_5_0]), st.data())
def test_a_body_cut_short_is_refused(topics, version, data):
    inflated = inflated_body({"counter": 1}, topics, ["127.0.0.1:1"], [{"topic": "t"}], version)
    cut = data.draw(st.integers(0, len(inflated) - 1))
    with pytest.raises(CorruptDataError, match="RegisterBrokerBody"):
        decode_compressed(zlib.compress(inflated[:cut]), version)


def overwritten(topics: dict, at: int, junk: bytes) -> bytes:
    """A good body with a few of its inflated bytes overwritten."""
    raw = inflated_body({"counter": 1}, topics, [], [], V5_5_0)
    return zlib.compress(raw[:at] + junk + raw[at + len(junk):])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(zlib.compress),
                 st.builds(overwritten, TOPICS, st.integers(0, 200), st.binary(min_size=1, max_size=6))),
       st.sampled_from([V4_9_8, V5_5_0]))
def test_fuzzed_bodies_decode_or_raise_the_clear_error(body, version):
    try:
        data_version, table = decode_compressed(body, version)
    except CorruptDataError:
        return
    assert isinstance(data_version, dict) and all(set(entry) == {"readQueueNums", "writeQueueNums", "perm",
                                                                 "topicSysFlag"} for entry in table.values())


def test_bad_topic_lines_counts_and_a_body_inflating_past_the_limit_are_refused():
    def body(lines: list[bytes], count: int | None = None) -> bytes:
        raw = section(b'{"counter":1}') + struct.pack(">i", len(lines) if count is None else count)
        return zlib.compress(raw + b"".join(section(line) for line in lines) + section(b"[]") + struct.pack(">i", 0))

    for line, error in [(b"t 1 2 6", "is not 'name"), (b"t 1 x 6 SINGLE_TAG", "is not an int"),
                        (b"t 1 2 6 ANY_TAG", "topicFilterType"), (b"t 1 2 99999999999 SINGLE_TAG", "is not an int"),
                        (b" 1 2 6 SINGLE_TAG", "is not 'name"), (b"t\xff 1 2 6 SINGLE_TAG", "not UTF-8")]:
        with pytest.raises(CorruptDataError, match=error):
            decode_compressed(body([line]), V5_5_0)
    with pytest.raises(CorruptDataError, match="topic configs 1073741824 runs past"):
        decode_compressed(body([b"t 1 1 6 SINGLE_TAG"], count=2 ** 30), V5_5_0)
    with pytest.raises(CorruptDataError, match="runs past"):
        decode_compressed(zlib.compress(struct.pack(">i", -1)), V5_5_0)
    with pytest.raises(CorruptDataError, match=f"inflates past {MAX_INFLATED}"):
        decode_compressed(zlib.compress(bytes(MAX_INFLATED + 1), 9), V5_5_0)
    with pytest.raises(CorruptDataError, match="not a zlib stream"):
        decode_compressed(b"x\x9c\xff\xff", V5_5_0)
    # Java's split: trailing empty fields are dropped, attributes that are not JSON are not looked at
    assert decode_compressed(body([b"t 1 2 6 MULTI_TAG  ", b"u 3 3 4 SINGLE_TAG {not json"]), V5_5_0)[1] == {
        "t": {"readQueueNums": 1, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0},
        "u": {"readQueueNums": 3, "writeQueueNums": 3, "perm": 4, "topicSysFlag": 0}}


# -- over the wire ------------------------------------------------------------------------------------------------

@pytest.fixture
def namesrv(rmq):
    connection = Remoting(namesrv_address(rmq))
    yield connection
    connection.close()


def fields_of(broker: str, compressed: bool, body: bytes, crc: int | None = None) -> dict[str, object]:
    return {"brokerName": broker, "brokerAddr": "127.0.0.1:19998", "clusterName": "Zipped", "brokerId": 0,
            "haServerAddr": "", "compressed": str(compressed).lower(),
            "bodyCrc32": body_crc32(body) if crc is None else crc}


def registered(namesrv: Remoting, fields: dict, body: bytes, topic: str, version: int = V5_5_0) -> tuple:
    """Register as a broker of that version, read the answer, the topic's route and the cluster info,
    unregister."""
    answer = namesrv.answer(namesrv.send(REGISTER_BROKER, fields, body, version=version))
    route = namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    cluster = json.loads(namesrv.call(GET_BROKER_CLUSTER_INFO).body)
    assert namesrv.call(UNREGISTER_BROKER, {k: fields[k] for k in ("brokerName", "brokerAddr", "clusterName",
                                                                   "brokerId")}).code == 0
    return (answer.code, answer.remark, answer.ext_fields, answer.body, route.code, json.loads(route.body),
            cluster["brokerAddrTable"]["broker-zip"], cluster["clusterAddrTable"]["Zipped"])


def test_both_header_forms_register_as_the_json_form_does_and_a_bad_crc_or_body_is_refused(namesrv):
    topics = {"zipped-a": (4, 4, 6, "SINGLE_TAG", {}), "zipped-b": (2, 1, 4, "MULTI_TAG", {"+message.type": "FIFO"})}
    json_body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {
        name: {"topicName": name, "readQueueNums": r, "writeQueueNums": w, "perm": p, "topicFilterType": f}
        for name, (r, w, p, f, _) in topics.items()}, "dataVersion": {"counter": 3}},
        "filterServerList": []}).encode()
    expected = registered(namesrv, fields_of("broker-zip", False, json_body), json_body, "zipped-b")
    assert expected[0] == 0 and expected[4] == 0 and expected[5]["queueDatas"][0]["writeQueueNums"] == 1
    old = compressed_body(topics, V4_9_8)         # 4.x: compressed=true, no mapping section
    assert registered(namesrv, fields_of("broker-zip", True, old), old, "zipped-b", V4_9_8) == expected
    new = compressed_body(topics, V5_5_0)         # 5.x: compressed=false over a deflated body
    assert registered(namesrv, fields_of("broker-zip", False, new), new, "zipped-b") == expected
    refused = namesrv.call(REGISTER_BROKER, fields_of("broker-zip", False, new, crc=body_crc32(new) ^ 1), new)
    assert (refused.code, refused.remark) == (1, "crc32 not match")
    broken = new[:len(new) // 2]
    refused = namesrv.call(REGISTER_BROKER, fields_of("broker-zip", True, broken), broken)
    assert refused.code == 1 and refused.remark.startswith("REGISTER_BROKER body: compressed RegisterBrokerBody")
    assert namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "zipped-b"}).code == 17    # nothing registered



# -- a real Apache broker ----------------------------------------------------------------------------------------

def test_an_apache_broker_with_compressed_register_serves_through_our_namesrv(tmp_path, monkeypatch):
    decoded: list[int] = []

    def counted(body: bytes, version: int):
        decoded.append(version)
        return decode_compressed(body, version)

    monkeypatch.setattr(namesrv_module, "decode_compressed", counted)
    topic = unique("zipped")
    with EmbeddedBroker(tmp_path / "namesrv", listeners=[ListenerConfig(port=0, protocol="namesrv")]) as ours, \
            RocketMQCluster(tmp_path / "apache", namesrv=ours.address("namesrv"),
                            properties={"compressedRegister": "true"}) as cluster:
        # the kit waited until TBW102 routed through our namesrv: the broker's first registration went through
        namesrv = ours.address("namesrv")
        assert decoded and min(decoded) >= MAPPING_SINCE_VERSION      # 5.x's form: compressed=false, deflated
        create_topics(cluster.broker_addr, namesrv, topic)
        routes = ours.broker.front_end("namesrv").routes
        assert routes.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": cluster.broker_addr}
        queues = routes.route(topic)["queueDatas"]
        assert [(q["brokerName"], q["writeQueueNums"]) for q in queues] == [("broker-a", 4)]
        with Producer(unique("zipped-producer"), namesrv, send_timeout=10.0) as producer:
            sent = [producer.send(Message(topic, b"zipped-%d" % i)) for i in range(4)]
        assert {s.message_queue.broker_name for s in sent} == {"broker-a"}
        with PullConsumer(unique("zipped-consumer"), namesrv,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
            consumer.subscribe(topic)
            got: list = []
            wait_for(lambda: got.extend(consumer.poll(0.3)) or len(got) >= 4, timeout=30,
                     message=lambda: f"{len(got)} of 4 messages pulled")
        assert sorted(m.body for m in got) == [b"zipped-%d" % i for i in range(4)]
