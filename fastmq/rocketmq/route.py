"""Topic routes as the namesrv answers GET_ROUTEINFO_BY_TOPIC (TopicRouteData), and the queues they give.

{"brokerDatas":[{"brokerAddrs":{"0":"ip:port"},"brokerName":"broker-a","cluster":"DefaultCluster"}],
 "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}], ...}
Namesrvs answering clients of version < 401 (and older ones always) write brokerAddrs keys as bare integers,
which is not JSON: parse_route accepts both.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from fastmq.errors import CorruptDataError
from fastmq.json_document import json_object
from fastmq.rocketmq.protocol import MASTER_ID, PERM_READ, PERM_WRITE

_BARE_INTEGER_KEY = re.compile(rb'([{,]\s*)(-?\d+)(\s*:)')


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


@dataclass
class TopicRoute:
    topic: str
    brokers: dict[str, dict[int, str]]               # broker name -> {broker id: address}; id 0 is the master
    write_queues: list[MessageQueue] = field(default_factory=list)
    read_queues: list[MessageQueue] = field(default_factory=list)
    order_topic_conf: str | None = None

    def master(self, broker_name: str) -> str | None:
        return self.brokers.get(broker_name, {}).get(MASTER_ID)


def parse_json_lenient(data: bytes) -> object:
    """JSON, or the namesrv's JSON with bare integer keys."""
    try:
        return json.loads(data)
    except ValueError:
        try:
            return json.loads(_BARE_INTEGER_KEY.sub(rb'\1"\2"\3', data))
        except ValueError as exc:
            raise CorruptDataError(f"a RocketMQ JSON body does not parse: {exc}") from None


def parse_route(topic: str, body: bytes) -> TopicRoute:
    data = json_object(body, "the topic route", CorruptDataError, loads=parse_json_lenient)
    brokers: dict[str, dict[int, str]] = {}
    try:
        for broker in data.get("brokerDatas") or ():
            brokers[broker["brokerName"]] = {int(k): v for k, v in (broker.get("brokerAddrs") or {}).items()}
        route = TopicRoute(topic, brokers, order_topic_conf=data.get("orderTopicConf"))
        for queue_data in sorted(data.get("queueDatas") or (), key=lambda q: q["brokerName"]):
            name = queue_data["brokerName"]
            perm = int(queue_data.get("perm", 6))
            if route.master(name) is None:
                continue            # no master: nothing can be sent there, nor offsets committed
            if perm & PERM_WRITE:
                route.write_queues.extend(MessageQueue(topic, name, i) for i in range(int(queue_data["writeQueueNums"])))
            if perm & PERM_READ:
                route.read_queues.extend(MessageQueue(topic, name, i) for i in range(int(queue_data["readQueueNums"])))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptDataError(f"the route of topic {topic!r} is malformed: {exc!r}") from None
    return route
