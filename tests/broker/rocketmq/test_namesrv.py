"""The namesrv: its route tables (registration, heartbeats, the 2-minute expiry, KV config surviving a restart)
and its requests over the wire, with the broker endpoint of the same embedded broker registered in it."""
from __future__ import annotations

import json

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from fastmq.broker.persist import ConfigWriter
from fastmq.broker.rocketmq.routes import (
    BROKER_EXPIRED_S,
    ORDER_TOPIC_CONFIG,
    KVConfigFile,
    QueueData,
    Registration,
    RouteTables,
)
from fastmq.rocketmq import Message, Producer
from tests.support.waiting import wait_for

from .conftest import broker_address

GET_ROUTEINFO_BY_TOPIC = 105
REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
GET_BROKER_CLUSTER_INFO = 106
PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG = 100, 101, 102
GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
TOPIC_NOT_EXIST = 17
QUERY_NOT_FOUND = 22


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def registration(name: str, addr: str, topics: dict[str, int], version: int = 1, broker_id: int = 0) -> Registration:
    return Registration("c1", name, addr, broker_id, {topic: QueueData(name, n, n, 6) for topic, n in topics.items()},
                        {"counter": version})


def test_route_tables_register_expire_and_unregister(tmp_path):
    clock = Clock()
    writer = ConfigWriter()
    try:
        routes = RouteTables(KVConfigFile(tmp_path), writer.write, clock)
        routes.register(registration("a", "127.0.0.1:1", {"t": 4, "only-a": 2}))
        routes.register(registration("b", "127.0.0.1:2", {"t": 8}))
        route = routes.route("t")
        assert [q["brokerName"] for q in route["queueDatas"]] == ["a", "b"]
        assert route["brokerDatas"][1]["brokerAddrs"] == {"0": "127.0.0.1:2"}
        assert routes.cluster_info()["clusterAddrTable"] == {"c1": ["a", "b"]}
        # a registration with a new data version adds and updates topics and drops none (Apache's 5.x brokers
        # register only the topics just created); a topic leaves with remove_topic_of or DELETE_TOPIC_IN_NAMESRV
        routes.register(registration("a", "127.0.0.1:1", {"t": 4, "new-a": 1}, version=2))
        assert routes.route("only-a") is not None and routes.route("new-a") is not None
        routes.remove_topic_of("only-a", "a")
        assert routes.route("only-a") is None
        routes.delete_topic("new-a", "another-cluster")
        assert routes.route("new-a") is not None
        routes.delete_topic("new-a", "c1")
        assert routes.route("new-a") is None
        # b keeps beating, a goes silent for longer than two minutes
        clock.now += BROKER_EXPIRED_S / 2
        routes.register(registration("b", "127.0.0.1:2", {"t": 8}, version=1))
        clock.now += BROKER_EXPIRED_S / 2 + 1
        assert routes.scan_not_active() == ["127.0.0.1:1"]
        assert [q["brokerName"] for q in routes.route("t")["queueDatas"]] == ["b"]
        routes.unregister("c1", "b", "127.0.0.1:2", 0)
        assert routes.route("t") is None and routes.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    finally:
        writer.close()


def test_kv_config_survives_a_restart_and_orders_routes(tmp_path):
    writer = ConfigWriter()
    routes = RouteTables(KVConfigFile(tmp_path), writer.write)
    routes.kv_put(ORDER_TOPIC_CONFIG, "ordered", "a:4")
    routes.kv_put("ns", "k", "v")
    routes.kv_delete("ns", "k")
    writer.close()
    again = RouteTables(KVConfigFile(tmp_path), ConfigWriter().write)
    assert again.kv_get(ORDER_TOPIC_CONFIG, "ordered") == "a:4" and again.kv_get("ns", "k") is None
    again.register(registration("a", "127.0.0.1:1", {"ordered": 4}))
    assert again.route("ordered")["orderTopicConf"] == "a:4"


def test_routes_of_the_embedded_broker(rmq, namesrv):
    answer = namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    route = json.loads(answer.body)
    host, port = broker_address(rmq)
    assert answer.code == 0
    assert route["brokerDatas"] == [{"cluster": "DefaultCluster", "brokerName": "broker-a",
                                     "brokerAddrs": {"0": f"{host}:{port}"}}]
    assert route["queueDatas"][0]["perm"] == 7        # read, write, inherit: the template of new topics
    # an old client (version < 401) gets the bare integer keys it parses
    old = namesrv.answer(namesrv.send(GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, version=400))
    assert b'"brokerAddrs":{0:"' in old.body
    missing = namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "no-such-topic"})
    assert missing.code == TOPIC_NOT_EXIST and "no-such-topic" in missing.remark
    clusters = json.loads(namesrv.call(GET_BROKER_CLUSTER_INFO).body)
    assert clusters["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    # A topic made through the Kafka front end is routed too: one store, one topic table.
    rmq.broker.topics.create("made-by-kafka", 3)
    rmq.broker.front_end("rocketmq").register()
    route = json.loads(namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "made-by-kafka"}).body)
    assert route["queueDatas"][0]["writeQueueNums"] == 3
    assert "made-by-kafka" in json.loads(namesrv.call(GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)["topicList"]
    # deleted (through any protocol), it leaves the routes
    rmq.broker.topics.delete("made-by-kafka")
    wait_for(lambda: namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "made-by-kafka"}).code == TOPIC_NOT_EXIST,
             message="the deleted topic is still routed")


def test_register_kv_and_unregister_over_the_wire(namesrv):
    body = json.dumps({"topicConfigSerializeWrapper": {
        "topicConfigTable": {"remote-topic": {"topicName": "remote-topic", "readQueueNums": 2, "writeQueueNums": 2,
                                              "perm": 6}},
        "dataVersion": {"timestamp": 1, "counter": 1}}, "filterServerList": []}).encode()
    fields = {"brokerName": "broker-z", "brokerAddr": "127.0.0.1:19999", "clusterName": "Other", "brokerId": 0,
              "haServerAddr": "", "compressed": "false"}
    assert namesrv.call(REGISTER_BROKER, fields, body).code == 0
    route = json.loads(namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "remote-topic"}).body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:19999"}
    assert namesrv.call(PUT_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": "remote-topic",
                                        "value": "broker-z:2"}).code == 0
    assert namesrv.call(GET_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": "remote-topic"}).ext_fields == {
        "value": "broker-z:2"}
    route = json.loads(namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "remote-topic"}).body)
    assert route["orderTopicConf"] == "broker-z:2"
    assert namesrv.call(DELETE_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": "remote-topic"}).code == 0
    assert namesrv.call(GET_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": "remote-topic"}).code == QUERY_NOT_FOUND
    # a compressed body that is not a zlib stream is refused with a clear error, the connection stays
    refused = namesrv.call(REGISTER_BROKER, dict(fields, compressed="true"), b"\x00\x01")
    assert refused.code == 1 and "not a zlib stream" in refused.remark
    assert namesrv.call(UNREGISTER_BROKER, {k: fields[k] for k in ("brokerName", "brokerAddr", "clusterName",
                                                                   "brokerId")}).code == 0
    assert namesrv.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "remote-topic"}).code == TOPIC_NOT_EXIST


def test_a_broker_registers_with_the_namesrv_of_another_process(tmp_path):
    namesrv_only = EmbeddedBroker(tmp_path / "namesrv", listeners=[ListenerConfig(port=0, protocol="namesrv")])
    with namesrv_only:
        address = namesrv_only.address("namesrv")
        options = {"rocketmq": {"namesrv_addr": address, "broker_name": "broker-remote"}}
        with EmbeddedBroker(tmp_path / "broker", listeners=[ListenerConfig(port=0, protocol="rocketmq")],
                            front_end_options=options) as broker:
            routes = namesrv_only.broker.front_end("namesrv").routes
            wait_for(lambda: routes.route("TBW102"), message="the broker did not register")
            with Producer("remote-producer", address, send_timeout=10.0) as producer:
                sent = producer.send(Message("via-remote-namesrv", b"hello"))
            assert sent.message_queue.broker_name == "broker-remote"
            assert broker.broker.store.get_message_by_id(sent.offset_msg_id).body == b"hello"
            assert routes.cluster_info()["brokerAddrTable"]["broker-remote"]["brokerAddrs"] == {
                "0": broker.address("rocketmq")}
            broker.broker.topics.delete("via-remote-namesrv")       # told with DELETE_TOPIC_IN_NAMESRV
            wait_for(lambda: routes.route("via-remote-namesrv") is None, message="the deleted topic is still routed")
            assert routes.route("TBW102") is not None
        # closing, the broker unregistered itself
        assert routes.route("via-remote-namesrv") is None and routes.cluster_info()["brokerAddrTable"] == {}
