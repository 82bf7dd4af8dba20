"""The namesrv front end (`namesrv://host:port` listeners): RocketMQ's name server on the broker's I/O loop.

Served (R/RequestCode.java): PUT_KV_CONFIG 100, GET_KV_CONFIG 101, DELETE_KV_CONFIG 102, REGISTER_BROKER 103,
UNREGISTER_BROKER 104, GET_ROUTEINFO_BY_TOPIC 105, GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER
206, DELETE_TOPIC_IN_NAMESRV 216, GET_KVLIST_BY_NAMESPACE 219. The tables are routes.RouteTables; every
SCAN_INTERVAL_S the brokers silent for two minutes are dropped and their connections closed. A RocketMQ front end
in the same broker registers in-process (no connection) and keeps registering every 30 s like any other broker.

REGISTER_BROKER's body is RegisterBrokerBody as JSON: {"topicConfigSerializeWrapper": {"topicConfigTable":
{topic: TopicConfig}, "dataVersion": {...}}, "filterServerList": [...]}, or its compressed form (a broker with
compressedRegister=true; register_body.py: the layout, and how 5.x brokers send it under compressed=false), which
registers the same topics in the same tables with the same answer. A non-zero bodyCrc32 is checked against the body
for both forms, as Apache's namesrv does ("crc32 not match"); a body that does not decode is answered SYSTEM_ERROR.
"""
from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.periodic import PeriodicWork
from fastmq.broker.rocketmq.register_body import body_crc32, decode_compressed, is_deflated
from fastmq.broker.rocketmq.remoting import Handler, RemotingListener, Request, RequestError
from fastmq.broker.rocketmq.routes import SCAN_INTERVAL_S, KVConfigFile, QueueData, Registration, RouteTables
from fastmq.errors import CorruptDataError
from fastmq.rocketmq.protocol import MASTER_ID, RequestCode, ResponseCode
from fastmq.store.config import loads_lenient

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

log = logging.getLogger(__name__)

PUT_KV_CONFIG = 100
GET_KV_CONFIG = 101
DELETE_KV_CONFIG = 102
REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
DELETE_TOPIC_IN_NAMESRV = 216
GET_KVLIST_BY_NAMESPACE = 219
# Clients before 4.9.4 (version ordinal 401, MQVersion.Version.V4_9_4; Apache's ClientRequestProcessor) parse
# brokerAddrs with fastjson's bare integer keys, as the namesrv writes them for them: {0:"ip:port"}.
STANDARD_JSON_VERSION = 401
QUOTED_BROKER_ID = re.compile(rb'"(\d+)":"')


def json_body(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def parse_json_body(request: Request, what: str) -> Any:
    try:
        return loads_lenient(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestError(f"{what} body is not JSON: {exc}") from None


def topic_table_of(request: Request) -> tuple[Any, Any]:
    """REGISTER_BROKER's (dataVersion, topicConfigTable), from either form of RegisterBrokerBody."""
    crc = request.integer("bodyCrc32", 0)
    if crc and body_crc32(request.body or b"") != crc:
        raise RequestError("crc32 not match")
    if request.body and (request.boolean("compressed") or is_deflated(request.body)):
        try:
            return decode_compressed(request.body, request.command.version)
        except CorruptDataError as exc:
            raise RequestError(f"REGISTER_BROKER body: {exc}") from None
    body = parse_json_body(request, "REGISTER_BROKER") if request.body else {}
    wrapper = body.get("topicConfigSerializeWrapper", {}) if isinstance(body, dict) else None
    if not isinstance(wrapper, dict):
        raise RequestError("REGISTER_BROKER body is not a RegisterBrokerBody")
    return wrapper.get("dataVersion"), wrapper.get("topicConfigTable", {})


def registration_of(request: Request) -> Registration:
    data_version, table = topic_table_of(request)
    if not isinstance(table, dict):
        raise RequestError("REGISTER_BROKER body is not a RegisterBrokerBody")
    broker_name = request.text("brokerName")
    topics = {}
    for topic, config in table.items():
        if not isinstance(config, dict):
            raise RequestError(f"topic config of {topic!r} is not an object")
        try:
            topics[str(topic)] = QueueData(broker_name, int(config.get("readQueueNums", 0)),
                                           int(config.get("writeQueueNums", 0)), int(config.get("perm", 6)),
                                           int(config.get("topicSysFlag", 0)))
        except (TypeError, ValueError):
            raise RequestError(f"topic config of {topic!r} has non-numeric queue numbers or perm") from None
    return Registration(request.text("clusterName"), broker_name, request.text("brokerAddr"),
                        request.integer("brokerId", low=0), topics, data_version, request.text("haServerAddr", ""))


class NamesrvFrontEnd(FrontEnd):
    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.routes = RouteTables(KVConfigFile(broker.store.root / "config"), broker.writer.write)
        self.remoting_listeners: list[RemotingListener] = []
        self._periodic = PeriodicWork(broker.loop)

    def start(self) -> None:
        handlers = self.handler_table()
        for listener in self.listeners:
            self.remoting_listeners.append(RemotingListener(self.broker, listener, handlers,
                                                            self.routes.connection_closed))
            self.addresses.append(self.remoting_listeners[-1].address)
        self._periodic.every("namesrv broker scan", SCAN_INTERVAL_S, self._scan)

    @property
    def address(self) -> str:
        """host:port of the first namesrv listener (what brokers and clients are given)."""
        return self.remoting_listeners[0].advertised

    def _scan(self) -> None:
        for addr in self.routes.scan_not_active():
            log.warning("broker %s sent no heartbeat for 2 minutes: dropped from the routes", addr)

    def stats(self) -> dict[str, Any]:
        return {"namesrv": {"brokers": sorted(self.routes.broker_live), "topics": len(self.routes.topic_queue)}}

    def close(self) -> None:
        self._periodic.stop()
        for listener in self.remoting_listeners:
            listener.close()

    # -- handlers ---------------------------------------------------------------------------------------------

    def handler_table(self) -> dict[int, Handler]:
        return {PUT_KV_CONFIG: self.put_kv_config, GET_KV_CONFIG: self.get_kv_config,
                DELETE_KV_CONFIG: self.delete_kv_config, REGISTER_BROKER: self.register_broker,
                UNREGISTER_BROKER: self.unregister_broker, RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route_info,
                RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
                GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list, DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
                GET_KVLIST_BY_NAMESPACE: self.kv_list}

    def put_kv_config(self, request: Request) -> None:
        self.routes.kv_put(request.text("namespace"), request.text("key"), request.text("value"))
        request.respond()

    def get_kv_config(self, request: Request) -> None:
        namespace, key = request.text("namespace"), request.text("key")
        value = self.routes.kv_get(namespace, key)
        if value is None:
            request.respond(ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {namespace} Key: {key}")
        else:
            request.respond(fields={"value": value})

    def delete_kv_config(self, request: Request) -> None:
        self.routes.kv_delete(request.text("namespace"), request.text("key"))
        request.respond()

    def kv_list(self, request: Request) -> None:
        namespace = request.text("namespace")
        table = self.routes.kv_namespace(namespace)
        if not table:
            request.respond(ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {namespace}")
        else:
            request.respond(body=json_body({"table": table}))

    def register_broker(self, request: Request) -> None:
        registration = registration_of(request)
        broker = self.routes.register(registration, request.conn)
        master = broker.broker_addrs.get(MASTER_ID, "") if registration.broker_id != MASTER_ID else ""
        request.respond(fields={"haServerAddr": self.routes.broker_live[registration.broker_addr].ha_server_addr
                                if master else "", "masterAddr": master},
                        body=json_body({"table": self.routes.kv_namespace("ORDER_TOPIC_CONFIG")}))

    def unregister_broker(self, request: Request) -> None:
        self.routes.unregister(request.text("clusterName"), request.text("brokerName"), request.text("brokerAddr"),
                               request.integer("brokerId", low=0))
        request.respond()

    def route_info(self, request: Request) -> None:
        topic = request.text("topic")
        route = self.routes.route(topic)
        if route is None:
            request.respond(ResponseCode.TOPIC_NOT_EXIST,
                            remark=f"No topic route info in name server for the topic: {topic}")
        else:
            body = json_body(route)
            if request.command.version < STANDARD_JSON_VERSION:
                body = QUOTED_BROKER_ID.sub(rb'\1:"', body)
            request.respond(body=body)

    def cluster_info(self, request: Request) -> None:
        request.respond(body=json_body(self.routes.cluster_info()))

    def topic_list(self, request: Request) -> None:
        request.respond(body=json_body({"topicList": self.routes.topics()}))

    def delete_topic(self, request: Request) -> None:
        self.routes.delete_topic(request.text("topic"), request.text("clusterName", ""))
        request.respond()
