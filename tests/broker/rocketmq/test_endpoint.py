"""The RocketMQ broker endpoint over the wire: sends, pulls (tag filters, long polling by the Hold service),
offsets, heartbeats and group membership, queue locks, send-back through the delay levels to %RETRY% and %DLQ%,
delayed messages, the json files and statistics."""
from __future__ import annotations

import json

from fastmq.store import TopicConfigManager, decode_messages
from tests.support.waiting import wait_for

from .conftest import Remoting, broker_address

SEND, SEND_V2, PULL = 10, 310, 11
QUERY_OFFSET, UPDATE_OFFSET, SEARCH_BY_TIME, MAX_OFFSET, MIN_OFFSET, EARLIEST_TIME = 14, 15, 29, 30, 31, 32
HEART_BEAT, UNREGISTER_CLIENT, SEND_BACK, CONSUMER_LIST, NOTIFY_IDS_CHANGED, LOCK, UNLOCK = 34, 35, 36, 38, 40, 41, 42
TOPIC_NOT_EXIST, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED = 17, 19, 20, 21
SUSPEND, SUBSCRIPTION = 2, 4


def send(client: Remoting, topic: str, body: bytes, queue_id: int = 0, tags: str | None = None,
         properties: dict[str, str] | None = None, v2: bool = True, **extra) -> dict[str, str]:
    props = dict(properties or {}, **({"TAGS": tags} if tags else {}))
    fields = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
              "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 1700000000000, "flag": 0,
              "properties": "".join(f"{k}\x01{v}\x02" for k, v in props.items()), **extra}
    if v2:
        short = dict(zip(("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                          "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes"),
                         "abcdefghijkl"))
        fields = {short.get(k, k): v for k, v in fields.items()}
    answer = client.call(SEND_V2 if v2 else SEND, fields, body)
    assert answer.code == 0, answer.remark
    return answer.ext_fields


def pull_fields(topic: str, offset: int, queue_id: int = 0, sys_flag: int = 0, group: str = "g",
                suspend_ms: int = 0, subscription: str = "*") -> dict:
    return {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
            "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subscription": subscription,
            "subVersion": 0}


def pulled(client: Remoting, topic: str, offset: int, **options):
    answer = client.call(PULL, pull_fields(topic, offset, **options))
    return answer, decode_messages(answer.body) if answer.body else []


def heartbeat_body(client_id: str, group: str, topic: str, model: str = "CLUSTERING") -> bytes:
    return json.dumps({"clientID": client_id, "producerDataSet": [{"groupName": "pg"}], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
         "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
         "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
                                  "expressionType": "TAG"}]}]}).encode()


def test_send_creates_the_topic_and_pull_reads_it_back(client):
    first = send(client, "ep-basic", b"one", tags="TagA", properties={"KEYS": "k1"}, v2=False)
    second = send(client, "ep-basic", b"two", tags="TagB")
    assert (first["queueId"], first["queueOffset"], second["queueOffset"]) == ("0", "0", "1")
    assert len(first["msgId"]) == 32
    answer, messages = pulled(client, "ep-basic", 0)
    assert answer.code == 0 and answer.ext_fields["nextBeginOffset"] == "2" and answer.ext_fields["maxOffset"] == "2"
    assert [(m.body, m.properties["TAGS"], m.queue_offset) for m in messages] == [(b"one", "TagA", 0),
                                                                                  (b"two", "TagB", 1)]
    assert messages[0].properties["KEYS"] == "k1" and messages[0].born_timestamp == 1700000000000
    # tag filter from the request's subscription: only TagB; nothing matching from offset 1 on TagA
    answer, messages = pulled(client, "ep-basic", 0, sys_flag=SUBSCRIPTION, subscription="TagB || TagC")
    assert [m.body for m in messages] == [b"two"]
    answer, _ = pulled(client, "ep-basic", 1, sys_flag=SUBSCRIPTION, subscription="TagA")
    assert answer.code == PULL_RETRY_IMMEDIATELY and answer.ext_fields["nextBeginOffset"] == "2"
    assert pulled(client, "ep-basic", 2)[0].code == PULL_NOT_FOUND
    moved = pulled(client, "ep-basic", 9)[0]
    assert moved.code == PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "2"
    # the queue range the producer asked for (4) is smaller than the template's (8): 4 queues
    refused = client.call(SEND_V2, {"a": "pg", "b": "ep-basic", "c": "TBW102", "d": 4, "e": 4, "f": 0, "g": 0,
                                    "h": 0}, b"x")
    assert refused.code == 1 and "out of range" in refused.remark


def test_unknown_template_and_topic_are_refused(client):
    answer = client.call(SEND, {"producerGroup": "pg", "topic": "ep-no-template", "defaultTopic": "NOPE",
                                "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 0,
                                "flag": 0}, b"x")
    assert answer.code == TOPIC_NOT_EXIST and "ep-no-template" in answer.remark
    assert client.call(PULL, pull_fields("ep-never-made", 0)).code == TOPIC_NOT_EXIST


def test_held_pull_waits_for_a_message_while_the_connection_serves_others(rmq, client):
    send(client, "ep-hold", b"first")
    held = client.send(PULL, pull_fields("ep-hold", 1, sys_flag=SUSPEND, suspend_ms=30_000))
    # answers travel by opaque: a later request on the same connection is answered while the pull waits
    assert client.call(MAX_OFFSET, {"topic": "ep-hold", "queueId": 0}).ext_fields == {"offset": "1"}
    wait_for(lambda: rmq.stats()["rocketmq"]["held_pulls"] == 1, message="the pull is not held")
    other = Remoting(broker_address(rmq))
    try:
        send(other, "ep-hold", b"second")
    finally:
        other.close()
    answer = client.answer(held)
    assert answer.code == 0 and [m.body for m in decode_messages(answer.body)] == [b"second"]
    # a held pull that sees nothing is answered PULL_NOT_FOUND once its suspend time passed
    assert client.call(PULL, pull_fields("ep-hold", 2, sys_flag=SUSPEND, suspend_ms=100)).code == PULL_NOT_FOUND


def test_offsets(rmq, client):
    for i in range(3):
        send(client, "ep-offsets", b"m%d" % i)
    queue = {"topic": "ep-offsets", "queueId": 0}
    # no commit yet, and the queue starts at 0: offset 0, unless the client asks for QUERY_NOT_FOUND
    assert client.call(QUERY_OFFSET, dict(queue, consumerGroup="og")).ext_fields == {"offset": "0"}
    assert client.call(QUERY_OFFSET, dict(queue, consumerGroup="og", setZeroIfNotFound="false")).code == 22
    assert client.call(UPDATE_OFFSET, dict(queue, consumerGroup="og", commitOffset=2)).code == 0
    assert client.call(QUERY_OFFSET, dict(queue, consumerGroup="og")).ext_fields == {"offset": "2"}
    # PULL with COMMIT_OFFSET commits on the way
    client.call(PULL, dict(pull_fields("ep-offsets", 0, sys_flag=1, group="og2"), commitOffset=1))
    assert client.call(QUERY_OFFSET, dict(queue, consumerGroup="og2")).ext_fields == {"offset": "1"}
    assert client.call(MAX_OFFSET, queue).ext_fields == {"offset": "3"}
    assert client.call(MIN_OFFSET, queue).ext_fields == {"offset": "0"}
    assert client.call(SEARCH_BY_TIME, dict(queue, timestamp=0)).ext_fields == {"offset": "0"}
    assert int(client.call(EARLIEST_TIME, queue).ext_fields["timestamp"]) > 0
    offsets = wait_for(lambda: "ep-offsets@og" in (rmq.data_dir / "config" / "consumerOffset.json").read_text()
                       and json.loads((rmq.data_dir / "config" / "consumerOffset.json").read_text()))
    assert offsets["offsetTable"]["ep-offsets@og"] == {"0": 2}


def test_heartbeats_group_members_and_notification(rmq, client):
    other = Remoting(broker_address(rmq))
    try:
        assert client.call(HEART_BEAT, body=heartbeat_body("client-a", "hb-group", "ep-hb")).code == 0
        assert json.loads(client.call(CONSUMER_LIST, {"consumerGroup": "hb-group"}).body) == {
            "consumerIdList": ["client-a"]}
        assert other.call(HEART_BEAT, body=heartbeat_body("client-b", "hb-group", "ep-hb")).code == 0
        assert json.loads(client.call(CONSUMER_LIST, {"consumerGroup": "hb-group"}).body) == {
            "consumerIdList": ["client-a", "client-b"]}
        # the first member was told that the group changed
        assert any(r.code == NOTIFY_IDS_CHANGED and r.ext_fields == {"consumerGroup": "hb-group"}
                   for r in client.requests)
        # the group is known (subscriptionGroup.json) and has its retry topic
        assert rmq.broker.store.subscription_group_manager.find_subscription_group_config("hb-group") is not None
        assert rmq.broker.store.topic_config_manager.select_topic_config("%RETRY%hb-group") is not None
        assert other.call(UNREGISTER_CLIENT, {"clientID": "client-b", "consumerGroup": "hb-group"}).code == 0
        assert json.loads(client.call(CONSUMER_LIST, {"consumerGroup": "hb-group"}).body) == {
            "consumerIdList": ["client-a"]}
        clients = rmq.stats()["rocketmq"]["consumer_groups"]["hb-group"]
        assert clients["clients"] == ["client-a"] and clients["message_model"] == "CLUSTERING"
    finally:
        other.close()
    # a client whose connection closes leaves its groups
    client.close()
    wait_for(lambda: "hb-group" not in rmq.stats()["rocketmq"]["consumer_groups"])
    assert Remoting(broker_address(rmq)).call(CONSUMER_LIST, {"consumerGroup": "hb-group"}).code == 1


def test_queue_locks(client):
    def body(client_id: str, queues: list[int]) -> bytes:
        return json.dumps({"consumerGroup": "lock-group", "clientId": client_id,
                           "mqSet": [{"topic": "ep-lock", "brokerName": "broker-a", "queueId": q} for q in queues]}
                          ).encode()

    def locked(answer) -> list[int]:
        return sorted(mq["queueId"] for mq in json.loads(answer.body)["lockOKMQSet"])

    assert locked(client.call(LOCK, body=body("a", [0, 1]))) == [0, 1]
    assert locked(client.call(LOCK, body=body("b", [1, 2]))) == [2]
    assert client.call(UNLOCK, body=body("a", [1])).code == 0
    assert locked(client.call(LOCK, body=body("b", [1, 2]))) == [1, 2]
    assert locked(client.call(LOCK, body=body("a", [0, 1]))) == [0]


def test_send_back_retries_through_the_delay_levels_then_dead_letters(rmq, client):
    stored = send(client, "ep-retry", b"poison", tags="bad")
    offset = decode_messages(client.call(PULL, pull_fields("ep-retry", 0)).body)[0].commitlog_offset
    fields = {"offset": offset, "group": "rg", "delayLevel": 0, "originMsgId": stored["msgId"],
              "originTopic": "ep-retry", "maxReconsumeTimes": 2}
    assert client.call(SEND_BACK, fields).code == 0
    retried = wait_for(lambda: pulled(client, "%RETRY%rg", 0)[1], message="no retry arrived")
    assert retried[0].body == b"poison" and retried[0].reconsume_times == 1
    assert retried[0].properties["RETRY_TOPIC"] == "ep-retry"
    assert retried[0].properties["ORIGIN_MESSAGE_ID"] == stored["msgId"]
    assert client.call(SEND_BACK, dict(fields, offset=retried[0].commitlog_offset)).code == 0
    twice = wait_for(lambda: pulled(client, "%RETRY%rg", 1)[1], message="no second retry arrived")
    assert twice[0].reconsume_times == 2
    # out of retries: the dead-letter topic
    assert client.call(SEND_BACK, dict(fields, offset=twice[0].commitlog_offset)).code == 0
    dead = pulled(client, "%DLQ%rg", 0)[1]
    assert [(m.body, m.reconsume_times) for m in dead] == [(b"poison", 3)]


def test_delayed_message_arrives_later(client):
    send(client, "ep-delay", b"later", properties={"DELAY": "2"})
    assert client.call(MAX_OFFSET, {"topic": "ep-delay", "queueId": 0}).ext_fields == {"offset": "0"}
    messages = wait_for(lambda: pulled(client, "ep-delay", 0)[1], message="the delayed message never came")
    assert messages[0].body == b"later" and messages[0].properties["DELAY"] == "2"     # kept, as Apache 5.5 does


def test_statistics_and_files(rmq, client):
    send(client, "ep-stats", b"x" * 100)
    pulled(client, "ep-stats", 0)
    stats = rmq.stats()
    assert stats["topics"]["ep-stats"]["put"]["messages"] == 1
    assert stats["topics"]["ep-stats"]["get"]["messages"] == 1
    assert any("ep-stats" in c["produced"] and c["software"].startswith("PYTHON") for c in stats["clients"]["clients"])
    # On disk: topics.json and its journal (folded into the file when the store closes).
    on_disk = TopicConfigManager(rmq.data_dir / "config", read_only=True)
    on_disk.load()
    assert on_disk.select_topic_config("ep-stats").write_queue_nums == 4


def test_a_connection_holds_a_bounded_number_of_pulls(rmq, client, monkeypatch):
    from fastmq.broker.rocketmq import hold
    monkeypatch.setattr(hold, "MAX_HELD_PER_CONNECTION", 2)
    send(client, "ep-held-bound", b"x")
    held = [client.send(PULL, pull_fields("ep-held-bound", 1, sys_flag=SUSPEND, suspend_ms=30_000))
            for _ in range(2)]
    # the third is answered at once: nothing new
    assert client.call(PULL, pull_fields("ep-held-bound", 1, sys_flag=SUSPEND, suspend_ms=30_000)).code == \
        PULL_NOT_FOUND
    send(client, "ep-held-bound", b"y")
    assert [client.answer(opaque).code for opaque in held] == [0, 0]
