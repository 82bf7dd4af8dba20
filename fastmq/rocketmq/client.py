"""One client instance (RocketMQ's MQClientInstance): the namesrvs, the topic routes, the heartbeats.

- Routes come from a namesrv (GET_ROUTEINFO_BY_TOPIC), asked in turn when one fails. Every known topic is looked
  up again every 30 s (fastmq.client's MetadataRefresh keeps the schedule: periodic, on demand after errors,
  backing off while lookups fail).
- Heartbeats (HEART_BEAT with the producer groups and the consumers' subscriptions) go to every master broker
  of the known routes every 30 s, and at once when a producer or consumer registers; UNREGISTER_CLIENT at close.
- Requests from brokers (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY,
  CHECK_TRANSACTION_STATE) go to the member of the group they name (fastmq.rocketmq.server_requests).
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import threading
from concurrent.futures import Future
from typing import Any, Protocol

from fastmq.client import MetadataRefresh, parse_servers
from fastmq.rocketmq._native.remoting import SERIALIZE_ROCKETMQ, RemotingCommand
from fastmq.rocketmq import server_requests
from fastmq.rocketmq.acl import Credentials
from fastmq.rocketmq.errors import RocketMQError, TopicNotFoundError, broker_error
from fastmq.rocketmq._native.pending import DEFAULT_MAX_PENDING_BYTES
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.remoting import RemotingClient, future_callback
from fastmq.rocketmq.route import TopicRoute, parse_route

_log = logging.getLogger(__name__)

NAMESRV_PORT = 9876
ROUTE_MAX_AGE = 30.0
HEARTBEAT_INTERVAL = 30.0
TICK = 0.5
_instances = itertools.count(1)


class Member(Protocol):
    """A producer or consumer registered with an instance."""

    group: str

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]: ...


def local_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))      # no packet is sent: this only picks the outgoing interface
            address: str = probe.getsockname()[0]
            return address
    except OSError:
        return "127.0.0.1"


def check_success(response: RemotingCommand, what: str) -> RemotingCommand:
    if response.code != ResponseCode.SUCCESS:
        raise broker_error(response.code, response.remark, what)
    return response


class ClientInstance:
    """Shared by the producers and consumers of one application (or owned by one of them)."""

    def __init__(self, namesrv_addr: str | list[str] | None, *, instance_name: str | None = None,
                 request_timeout: float = 3.0, serialize_type: int = SERIALIZE_ROCKETMQ,
                 credentials: Credentials | None = None, max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        # None (a producer or consumer given neither a namesrv nor an instance) fails as an empty list does.
        self.namesrvs = [f"{host}:{port}" for host, port in parse_servers(namesrv_addr or "", NAMESRV_PORT)]
        self.client_id = f"{local_ip()}@{instance_name or f'{os.getpid()}#{next(_instances)}'}"
        self.request_timeout = request_timeout
        self.remoting = RemotingClient(request_timeout=request_timeout, serialize_type=serialize_type,
                                       credentials=credentials, max_pending_bytes=max_pending_bytes)
        self.remoting.on_server_request = self._server_request
        self.routes: dict[str, TopicRoute] = {}
        self.members: dict[str, Member] = {}
        self._namesrv_index = 0
        self._lock = threading.Lock()
        self._refresh = MetadataRefresh(ROUTE_MAX_AGE, 1.0, 10.0)
        self._last_heartbeat = 0.0
        self._closed = False
        self._timer = self.remoting.loop.call_later(TICK, self._tick)

    # ---- routes -------------------------------------------------------------------------------------------

    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The topic's route, asking a namesrv when it is unknown (or refresh is set)."""
        route = self.routes.get(topic)
        if route is None or refresh:
            route = self._lookup(topic)
            known = topic in self.routes
            self.routes[topic] = route
            if not known:
                self.send_heartbeats()
        return route

    def _lookup(self, topic: str) -> TopicRoute:
        last_error: BaseException | None = None
        for attempt in range(len(self.namesrvs)):
            address = self.namesrvs[(self._namesrv_index + attempt) % len(self.namesrvs)]
            try:
                response = self.remoting.call(address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            except Exception as exc:          # unreachable namesrv: the next one
                last_error = exc
                self._namesrv_index = (self._namesrv_index + attempt + 1) % len(self.namesrvs)
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                raise TopicNotFoundError(f"no route for topic {topic!r}: {response.remark}")
            check_success(response, f"route lookup of {topic!r}")
            return parse_route(topic, response.body or b"{}")
        raise RocketMQError(f"no namesrv of {self.namesrvs} answered the route lookup of {topic!r}") from last_error

    def request_refresh(self, reason: str) -> None:
        """Look the routes up again soon (after a send or pull failed)."""
        self._refresh.request(reason)

    def master_address(self, broker_name: str, topic: str | None = None) -> str:
        route = self.routes.get(topic) if topic is not None else None
        if route is not None:          # the usual case, once per send: no list of every route
            address = route.master(broker_name)
            if address is not None:
                return address
        for route in list(self.routes.values()):
            address = route.master(broker_name)
            if address is not None:
                return address
        if topic is not None:
            address = self.route(topic, refresh=True).master(broker_name)
            if address is not None:
                return address
        raise RocketMQError(f"no master address known for broker {broker_name!r}")

    def broker_addresses(self) -> set[str]:
        return {address for route in list(self.routes.values()) for address in
                (addrs.get(0) for addrs in route.brokers.values()) if address}

    # ---- members and heartbeats ---------------------------------------------------------------------------

    def register(self, member: Member) -> None:
        self.members[f"{type(member).__name__}:{member.group}:{id(member)}"] = member

    def members_of(self, kind: str, group: str) -> list[Member]:
        """The registered producers ("producer") or consumers ("consumer") of a group."""
        return [m for m in list(self.members.values()) if m.group == group and m.heartbeat_data()[0] == kind]

    def unregister(self, member: Member) -> None:
        for key, value in list(self.members.items()):
            if value is member:
                del self.members[key]

    def heartbeat_body(self) -> bytes:
        producers: list[dict[str, Any]] = []
        consumers: list[dict[str, Any]] = []
        for member in list(self.members.values()):
            kind, data = member.heartbeat_data()
            (producers if kind == "producer" else consumers).append(data)
        return json.dumps({"clientID": self.client_id, "producerDataSet": producers,
                           "consumerDataSet": consumers}).encode()

    def send_heartbeats(self, wait: bool = True) -> None:
        """HEART_BEAT to every master broker; with wait, until each answered (or failed)."""
        self._last_heartbeat = self.remoting.loop.time()
        body = self.heartbeat_body()
        futures = [self.remoting.invoke(address, RequestCode.HEART_BEAT, None, body)
                   for address in self.broker_addresses()]
        if wait:
            for future in futures:
                try:
                    future.result(self.request_timeout + 1.0)
                except Exception as exc:
                    _log.warning("heartbeat failed: %s", exc)

    def _tick(self) -> None:
        if self._closed:
            return
        now = self.remoting.loop.time()
        delay = self._refresh.delay(now)
        if delay == 0.0 and self.routes:
            self._refresh.started(now)
            pending = [(topic, self._lookup_async(topic)) for topic in list(self.routes)]
            threading.Thread(target=self._finish_refresh, args=(pending,), daemon=True,
                             name="fastmq-rocketmq-route").start()
        if now - self._last_heartbeat >= HEARTBEAT_INTERVAL and self.members:
            threading.Thread(target=self.send_heartbeats, daemon=True, name="fastmq-rocketmq-heartbeat").start()
            self._last_heartbeat = now
        self._timer = self.remoting.loop.call_later(TICK, self._tick)

    def _lookup_async(self, topic: str) -> Future[Any]:
        future: Future[Any] = Future()
        address = self.namesrvs[self._namesrv_index % len(self.namesrvs)]
        frame, opaque = self.remoting.encode(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        self.remoting.invoke_frame(address, frame, opaque, future_callback(future))
        return future

    def _finish_refresh(self, pending: list[tuple[str, Future[Any]]]) -> None:
        failed = None
        for topic, future in pending:
            try:
                response = future.result(self.request_timeout + 1.0)
                if response.code == ResponseCode.SUCCESS:
                    self.routes[topic] = parse_route(topic, response.body or b"{}")
            except Exception as exc:
                failed = f"route refresh of {topic!r} failed: {exc}"
                self._namesrv_index += 1
        now = self.remoting.loop.time()
        if failed:
            self._refresh.failed(failed)
        else:
            self._refresh.succeeded(now)

    def _server_request(self, address: str, request: RemotingCommand
                        ) -> RemotingCommand | Future[RemotingCommand] | None:
        return server_requests.answer(self, address, request)

    # ---- closing ------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        groups = [(m.heartbeat_data()[0], m.group) for m in self.members.values()]
        futures = []
        for address in self.broker_addresses():
            for kind, group in groups:
                fields = {"clientID": self.client_id, kind + "Group": group}
                futures.append(self.remoting.invoke(address, RequestCode.UNREGISTER_CLIENT, fields))
        for future in futures:
            try:
                future.result(self.request_timeout + 1.0)
            except Exception as exc:
                _log.debug("unregistering failed: %s", exc)
        self.remoting.close()
