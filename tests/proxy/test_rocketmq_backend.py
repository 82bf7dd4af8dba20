"""The proxy with its RocketMQ backend (fastmq.rocketmq's client) in front of the embedded broker's namesrv and
RocketMQ front end, and of Apache RocketMQ (the session's `rocketmq_server`): produce (one message, a batch) and consume over HTTP, keys, tags and headers as RocketMQ
carries them, messages a RocketMQ producer wrote, nack and redelivery, and clear 4xx answers for what RocketMQ
cannot carry or does not have."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from fastmq.rocketmq import Message, Producer
from tests.proxy.processes import running_proxy
from tests.support.rocketmq import route_of
from tests.support.waiting import wait_for

TOPIC = "rmq-http"
CONFIG = """
backend = "rocketmq"
namesrv_addr = "{namesrv}"
redis_url = "{redis_url}"
namespace = "rocketmq-{unique}"
[producers.rmq-writer]
topic = "rmq-http"
[producers.rmq-nowhere]
topic = "rmq-no-such-topic"
[consumers.rmq-reader]
topic = "rmq-http"
lease_ms = 10000
"""


def create_topic(broker_addr: str, namesrv_addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC, as `mqadmin updateTopic` sends it; then until the namesrv has the topic's route
    (the broker registers it at once, but Apache RocketMQ's registration is asynchronous)."""
    from fastmq.rocketmq.protocol import RequestCode, ResponseCode
    from fastmq.rocketmq.remoting import RemotingClient

    remoting = RemotingClient(request_timeout=10.0)
    try:
        answer = remoting.call(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
            "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
    finally:
        remoting.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    wait_for(lambda: route_of(namesrv_addr, topic).code == ResponseCode.SUCCESS, timeout=30,
             message=f"the namesrv has no route of {topic}")


@pytest.fixture(scope="module", params=["embedded", "apache"])
def namesrv(request, tmp_path_factory):
    """The namesrv of a RocketMQ cluster with a 2-queue topic TOPIC: an embedded broker with a namesrv and a
    RocketMQ listener, or Apache RocketMQ."""
    from fastmq.broker import EmbeddedBroker
    from fastmq.broker.config import ListenerConfig

    if request.param == "apache":
        server = request.getfixturevalue("rocketmq_server")
        create_topic(server.broker_addr, server.namesrv_addr, TOPIC, 2)
        yield server.namesrv_addr
        return
    broker = EmbeddedBroker(tmp_path_factory.mktemp("rocketmq-proxy-broker"), commit_log_file_size=4 << 20,
                            listeners=[ListenerConfig(port=0), ListenerConfig(port=0, protocol="namesrv"),
                                       ListenerConfig(port=0, protocol="rocketmq")])
    with broker:
        create_topic(broker.address("rocketmq"), broker.address("namesrv"), TOPIC, 2)
        yield broker.address("namesrv")


@pytest.fixture(scope="module")
def rocketmq_proxy(namesrv, redis_url, tmp_path_factory):
    with running_proxy("fastmq-proxy-rocketmq", tmp_path_factory.mktemp("rocketmq-proxy"),
                       CONFIG.format(namesrv=namesrv, redis_url=redis_url, unique=uuid.uuid4().hex[:8])) as client:
        yield client


def test_messages_produced_over_http_and_by_a_rocketmq_producer_are_consumed_with_keys_tags_and_headers(
        rocketmq_proxy, namesrv):
    client = rocketmq_proxy
    one = client.call("POST", "/produce", query={"producer": "rmq-writer", "key": "k1", "tags": "tagA"},
                      body=b"plain text", content_type="text/plain", headers={"x-message-header-origin": "http"})
    assert one.status == 200, one.body
    batch = client.produce("rmq-writer", [{"value": {"n": n}, "key": f"b{n}", "headers": {"n": str(n)}}
                                          for n in range(3)])
    assert batch.status == 200, batch.body
    results = one.json["results"] + batch.json["results"]
    assert [r["queue"].rpartition(":")[0] for r in results] == ["broker-a"] * 4, results
    # Each message's msgId as the broker answered it: 32 hex digits, all different.
    assert all(len(r["id"]) == 32 and int(r["id"], 16) >= 0 for r in results) and len({r["id"] for r in results}) == 4
    # A batch is stored in one queue at consecutive offsets.
    batch_queue = {r["queue"] for r in batch.json["results"]}
    assert len(batch_queue) == 1
    assert [r["offset"] for r in batch.json["results"]] == list(range(batch.json["results"][0]["offset"],
                                                                      batch.json["results"][0]["offset"] + 3))
    with Producer("rmq-direct", namesrv, send_timeout=10.0) as producer:
        direct = producer.send(Message(TOPIC, b"from a RocketMQ producer", tags="tagB", keys="d1",
                                       properties={"via": "rocketmq"}))

    wanted = {(r["queue"], r["offset"]) for r in results}
    wanted.add((f"{direct.message_queue.broker_name}:{direct.message_queue.queue_id}", direct.queue_offset))
    got = {}
    for _ in range(30):
        if wanted <= set(got):
            break
        answer = client.message("rmq-reader", max=10, wait_ms=1000).json
        got.update(((answer["queue"], m["offset"]), m) for m in answer["messages"])
        if answer["token"]:
            assert client.ack("rmq-reader", answer["token"]).json == {"ok": True}
    assert wanted <= set(got), f"got {sorted(got)}, wanted {sorted(wanted)}"
    by_value = {m["value"]: m for m in got.values()}
    text = by_value["plain text"]
    assert text["key"] == "k1" and text["headers"] == {"origin": "http", "tags": "tagA"}
    last = next(m for m in got.values() if m["key"] == "b2")
    assert json.loads(last["value"]) == {"n": 2} and last["headers"] == {"n": "2"}
    peer = by_value["from a RocketMQ producer"]
    assert peer["key"] == "d1" and peer["headers"] == {"via": "rocketmq", "tags": "tagB"}

    # Everything is acked: nothing more comes.
    assert client.message("rmq-reader", max=10).json["status"] == "empty"


def test_a_nacked_message_comes_again_from_the_rocketmq_queue(rocketmq_proxy):
    client = rocketmq_proxy
    sent = client.produce("rmq-writer", [{"value": "again"}]).json["results"][0]
    first = None
    for _ in range(20):
        answer = client.message("rmq-reader", max=1, wait_ms=1000).json
        if answer["messages"] and answer["messages"][0]["value"] == "again":
            first = answer
            break
        if answer["token"]:
            client.ack("rmq-reader", answer["token"])
    assert first is not None and first["queue"] == sent["queue"]
    assert client.call("POST", "/nack", json_body={"consumer": "rmq-reader", "token": first["token"]}).status == 200
    again = client.message("rmq-reader", max=1, wait_ms=2000).json
    assert again["messages"][0]["offset"] == sent["offset"] and again["attempt"] == 2
    assert client.ack("rmq-reader", again["token"]).status == 200


def test_what_rocketmq_cannot_carry_or_does_not_have_gets_a_clear_4xx(rocketmq_proxy):
    client = rocketmq_proxy
    for headers in ({"KEYS": "a property of RocketMQ's own"}, {"h": "a \x01 separator"}):
        refused = client.produce("rmq-writer", [{"value": "v", "headers": headers}])
        assert refused.status == 400 and refused.json["error"] == "bad_message", refused.body
    nowhere = client.produce("rmq-nowhere", [{"value": "x"}])
    assert nowhere.status in (404, 502) and not nowhere.json["ok"], nowhere.body


def test_an_offset_reset_to_a_time_goes_back_through_rocketmqs_offset_search(rocketmq_proxy):
    """SEARCH_OFFSET_BY_TIMESTAMP: after a reset to time 0 every queue is handed out again from its first message,
    and after a reset to a time to come there is nothing to hand out."""
    client = rocketmq_proxy
    assert client.produce("rmq-writer", [{"value": "reset"}]).status == 200
    assert client.call("POST", "/admin/consumers/rmq-reader/reset", json_body={"to": 0}).status == 200
    firsts = []
    for _ in range(10):
        answer = client.message("rmq-reader", max=1, wait_ms=500).json
        if not answer["token"]:
            break
        firsts.append(answer["messages"][0]["offset"])
        assert client.call("POST", "/nack", json_body={"consumer": "rmq-reader", "token": answer["token"],
                                                       "delay_ms": 60_000}).status == 200
    assert firsts and set(firsts) == {0}, firsts
    later = int(time.time() * 1000) + 60_000
    assert client.call("POST", "/admin/consumers/rmq-reader/reset", json_body={"to": later}).status == 200
    assert client.message("rmq-reader", max=1).json["status"] == "empty"
