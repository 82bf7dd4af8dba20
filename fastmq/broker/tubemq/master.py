"""The TubeMQ master of the embedded broker: producers and consumers register and heartbeat here, learn the
brokers and topics, and consumer groups are balanced here.

Metadata: the one broker is the TubeMQ broker front end of the same process (tubemq-broker listener); its topics
are the core's, created on first use (a producer's or consumer's topic list), one store per topic. brokerCheckSum
is a hash of the broker list: a client sending the current one is not sent brokerInfos again.

Balancing (balancer.py) runs every `balance_interval` seconds on groups that are settled: no consumer still has
an event it has not reported back. Events go out in heartbeat responses (status PROCESSING) and come back in
heartbeat requests (DONE or FAILED); a CONNECT report lists the partitions the consumer registered at the broker,
and those it could not (PARTITION_OCCUPIED) become unheld again. A heartbeat that reports the consumer's
subscriptions (reportSubscribeInfo; the Java client's every few beats) corrects what the master believes it
holds. A consumer or producer silent for `client_timeout` seconds is dropped, as is a consumer on close; the
broker then frees its partitions.

Authentication, when the broker has users (BrokerConfig.users, name -> password): every request carries a
signature of a user's password or an authorized token this master handed out, else it gets CERTIFICATE_FAILURE;
the broker then accepts only requests carrying the master's visit token (anti-bypass).

Bound consumption (requireBound): the members of a group name one session (sessionKey, totalCount, selectBig)
and the partitions each wants with its start offset (requiredPartition). Nothing is assigned until totalCount
members registered; then each gets the partitions it named (bound_balance). Until that first allocation was
reported back the members are told notAllocated=True, and only then do they register their partitions at the
broker with the offsets they named: a member joining later, or again, starts from the committed offsets.

Flow control: set_flow_rules() sets the rules of a group or the default ones (fastmq.tubemq.flow); each has a
check id, and a consumer naming an older id in its register or heartbeat request is sent the rules.

Master nodes: each tubemq-master listener is one node of a TubeMQ master group. One node is active; the others
answer every request with StandbyException, as standby TubeMQ masters do, and a client moves on to the next
master of its list. The nodes share one state (registered producers and consumers, groups, who owns which
partition, tokens) as TubeMQ's masters share theirs through their replicated store, so fail_over(node) loses
nothing: clients re-register at the new active node under their old ids and keep their partitions and tokens.
`standby = True` makes every node a standby.
"""
from __future__ import annotations

import dataclasses
import hmac
import logging
import random
import secrets
from typing import TYPE_CHECKING, Any, Iterable

from google.protobuf.message import Message

from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.periodic import PeriodicWork
from fastmq.broker.tubemq.balancer import balance, bound_balance
from fastmq.broker.tubemq.data import TubeMQBrokerFrontEnd
from fastmq.broker.tubemq.service import Handler, Refusal, RpcService
from fastmq.errors import ProtocolError
from fastmq.tubemq import rpc
from fastmq.tubemq._proto import master_pb2
from fastmq.tubemq.constants import CONNECT_EVENTS, EventStatus, EventType
from fastmq.tubemq.errors import ErrorCode
from fastmq.tubemq.flow import FlowRules
from fastmq.tubemq.message import checksum
from fastmq.tubemq.metadata import (
    Partition,
    encode_subscribe_info,
    encode_topic_info,
    parse_required_partitions,
    parse_subscribe_info,
)
from fastmq.tubemq.session import signature

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

log = logging.getLogger(__name__)

CLIENT_CONFIG_ID = 1
NO_RULES = -2           # the flow-control check id while no rules are set


@dataclasses.dataclass
class ConsumerState:
    client_id: str
    group: str
    topics: list[str]
    last_seen: float
    queued: list[Any] = dataclasses.field(default_factory=list)   # EventProto not sent yet
    sent: Any = None                                               # the EventProto awaiting its report
    required: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)   # bound: partition -> offset


@dataclasses.dataclass
class GroupState:
    consumers: dict[str, ConsumerState] = dataclasses.field(default_factory=dict)
    owner: dict[tuple[str, int], str] = dataclasses.field(default_factory=dict)   # (topic, partition) -> client
    rebalance_id: int = 0
    # Bound consumption: the session every member names, how many members it waits for, and whether its first
    # allocation is done (from then on members are told notAllocated=False: they reset no offsets).
    session: tuple[str, int, bool] | None = None     # (sessionKey, totalCount, selectBig)
    allocating: bool = False
    allocated: bool = False

    @property
    def not_allocated(self) -> bool:
        return self.session is not None and not self.allocated


class TubeMQMasterFrontEnd(FrontEnd):
    balance_interval = 0.2
    client_timeout = 30.0

    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.services: list[RpcService] = []
        self.standby = False
        self.active = 0                                # the master node (listener) that serves; the rest stand by
        self.flow_rules: dict[str | None, tuple[int, str]] = {}     # group (None: default) -> (check id, JSON)
        self._flow_check_id = NO_RULES + 1
        self.producers: dict[str, float] = {}
        self.groups: dict[str, GroupState] = {}
        self.visit_token = random.getrandbits(62)     # the anti-bypass token brokers check (with users)
        self.auth_token = secrets.token_hex(16)        # the authorized token handed out to authenticated clients
        self._periodic = PeriodicWork(broker.loop)

    def start(self) -> None:
        methods = {
            rpc.PRODUCER_REGISTER: (master_pb2.RegisterRequestP2M, self.register_producer),
            rpc.PRODUCER_HEARTBEAT: (master_pb2.HeartRequestP2M, self.producer_heartbeat),
            rpc.PRODUCER_CLOSE: (master_pb2.CloseRequestP2M, self.close_producer),
            rpc.CONSUMER_REGISTER: (master_pb2.RegisterRequestC2M, self.register_consumer),
            rpc.CONSUMER_HEARTBEAT: (master_pb2.HeartRequestC2M, self.consumer_heartbeat),
            rpc.CONSUMER_CLOSE: (master_pb2.CloseRequestC2M, self.close_consumer),
        }
        responses = {rpc.PRODUCER_REGISTER: master_pb2.RegisterResponseM2P,
                     rpc.PRODUCER_HEARTBEAT: master_pb2.HeartResponseM2P,
                     rpc.PRODUCER_CLOSE: master_pb2.CloseResponseM2P,
                     rpc.CONSUMER_REGISTER: master_pb2.RegisterResponseM2C,
                     rpc.CONSUMER_HEARTBEAT: master_pb2.HeartResponseM2C,
                     rpc.CONSUMER_CLOSE: master_pb2.CloseResponseM2C}
        for node, listener in enumerate(self.listeners):
            served = {method: (request_class, self._unless_standby(node, handler, responses[method]))
                      for method, (request_class, handler) in methods.items()}
            self.services.append(RpcService(self.broker.loop, listener, served))
            self.addresses.append(self.services[-1].address)
        self._periodic.every("TubeMQ balancing", self.balance_interval, self._balance_all)

    def fail_over(self, node: int) -> None:
        """Make master node `node` (the index of its listener) the active one; the others turn standby."""
        if not 0 <= node < len(self.services):
            raise ValueError(f"there is no master node {node} (this master has {len(self.services)})")
        self.active = node

    def _unless_standby(self, node: int, handler: Handler, response_class: type[Message]) -> Handler:
        def serve(request: Any, conn: Any) -> Any:
            if self.standby or node != self.active:
                raise StandbyException(f"master node {node} is a standby (node {self.active} is active)")
            refused = self._authenticate(request, response_class)
            return refused if refused is not None else handler(request, conn)
        return serve

    # ---- authentication ------------------------------------------------------------------------------------

    def _authenticate(self, request: Any, response_class: type[Message]) -> Any:
        """None when the request may be served: the broker has no users, or the request carries a token this
        master handed out or a good signature (user name, timestamp, nonce, HmacSHA1 with the password). Else
        the CERTIFICATE_FAILURE response."""
        users = self.broker.config.users
        if not users:
            return None
        certificate = request.authInfo
        if certificate.HasField("authorizedToken") and hmac.compare_digest(certificate.authorizedToken,
                                                                           self.auth_token):
            return None
        if certificate.HasField("authInfo"):
            info = certificate.authInfo
            password = users.get(info.userName)
            if password is not None and hmac.compare_digest(
                    signature(info.userName, password, info.timestamp, info.nonce), info.signature):
                return None
        fields = {"success": False, "errCode": ErrorCode.CERTIFICATE_FAILURE,
                  "errMsg": "authentication failed: a valid signature or authorized token is needed"}
        if "brokerCheckSum" in response_class.DESCRIPTOR.fields_by_name:
            fields["brokerCheckSum"] = -1
        return response_class(**fields)

    def _authorized(self) -> master_pb2.MasterAuthorizedInfo:
        info = master_pb2.MasterAuthorizedInfo(visitAuthorizedToken=self.visit_token)
        if self.broker.config.users:
            info.authAuthorizedToken = self.auth_token
        return info

    # ---- metadata ------------------------------------------------------------------------------------------

    def _data_broker(self) -> TubeMQBrokerFrontEnd | None:
        for front in self.broker.front_ends:
            if isinstance(front, TubeMQBrokerFrontEnd) and front.services:
                return front
        return None

    def _broker_infos(self) -> tuple[int, list[str]]:
        data = self._data_broker()
        infos = [data.info.encode()] if data is not None else []
        return checksum(",".join(infos).encode()), infos

    def _topic_infos(self, topics: Iterable[str]) -> list[str]:
        data = self._data_broker()
        if data is None:
            return []
        infos = []
        for topic in topics:
            partitions = data.partitions(topic)
            if partitions:
                infos.append(encode_topic_info(topic, [(data.broker_id, partitions, 1)], data.max_message_size))
        return infos

    def _create_topics(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self.broker.topics.get_or_create(topic)

    def _client_config(self) -> master_pb2.ApprovedClientConfig:
        data = self._data_broker()
        return master_pb2.ApprovedClientConfig(configId=CLIENT_CONFIG_ID,
                                               maxMsgSize=data.max_message_size if data is not None else 0)

    # ---- producers -----------------------------------------------------------------------------------------

    def register_producer(self, request: Any, conn: Any) -> Any:
        self._create_topics(request.topicList)
        self.producers[request.clientId] = self.broker.loop.time()
        checksum, infos = self._broker_infos()
        return master_pb2.RegisterResponseM2P(
            success=True, errCode=ErrorCode.SUCCESS, errMsg="OK!", brokerCheckSum=checksum, brokerInfos=infos,
            authorizedInfo=self._authorized(), appdConfig=self._client_config())

    def producer_heartbeat(self, request: Any, conn: Any) -> Any:
        if request.clientId not in self.producers:
            return master_pb2.HeartResponseM2P(success=False, errCode=ErrorCode.HB_NO_NODE,
                                               errMsg="the producer is not registered", brokerCheckSum=-1)
        self.producers[request.clientId] = self.broker.loop.time()
        self._create_topics(request.topicList)
        checksum, infos = self._broker_infos()
        return master_pb2.HeartResponseM2P(
            success=True, errCode=ErrorCode.SUCCESS, errMsg="OK!", brokerCheckSum=checksum,
            topicInfos=self._topic_infos(request.topicList),
            brokerInfos=infos if request.brokerCheckSum != checksum else [], requireAuth=False,
            authorizedInfo=self._authorized(), appdConfig=self._client_config())

    def close_producer(self, request: Any, conn: Any) -> Any:
        self.producers.pop(request.clientId, None)
        return master_pb2.CloseResponseM2P(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK!")

    # ---- consumers -----------------------------------------------------------------------------------------

    def register_consumer(self, request: Any, conn: Any) -> Any:
        if not request.topicList:
            return master_pb2.RegisterResponseM2C(success=False, errCode=ErrorCode.BAD_REQUEST,
                                                  errMsg="a consumer subscribes to at least one topic")
        group = self.groups.get(request.groupName) or GroupState()
        try:
            session, required = self._bound_session(group, request)
        except ValueError as refusal:
            return master_pb2.RegisterResponseM2C(success=False, errCode=ErrorCode.BAD_REQUEST, errMsg=str(refusal))
        self._create_topics(request.topicList)
        self.groups[request.groupName] = group
        group.session = session
        state = group.consumers.get(request.clientId)
        if state is None:
            group.consumers[request.clientId] = ConsumerState(request.clientId, request.groupName,
                                                              list(request.topicList), self.broker.loop.time(),
                                                              required=required)
            # A re-registering consumer names the partitions it still holds: those the broker agrees it holds
            # stay its own.
            data = self._data_broker()
            for info in request.subscribeInfo:
                _, _, partition = parse_subscribe_info(info)
                if data is not None and data.holds(request.groupName, partition.topic, partition.partition_id,
                                                   request.clientId):
                    group.owner.setdefault((partition.topic, partition.partition_id), request.clientId)
        else:
            state.topics, state.required = list(request.topicList), required
            state.last_seen = self.broker.loop.time()
        return master_pb2.RegisterResponseM2C(
            success=True, errCode=ErrorCode.SUCCESS, errMsg="OK!", topicInfo=self._topic_infos(request.topicList),
            notAllocated=group.not_allocated, qryPriorityId=-2, **self._flow_fields(request),
            authorizedInfo=self._authorized())

    def _bound_session(self, group: GroupState, request: Any
                       ) -> tuple[tuple[str, int, bool] | None, dict[tuple[str, int], int]]:
        """(the group's bound session, the partitions this consumer names {(topic, partition): offset}) for a
        registering consumer; ValueError when it does not fit the group: every member of a bound group names the
        same session key, consumer count and offset choice, and bound and unbound consumers do not mix."""
        others = [client for client in group.consumers if client != request.clientId]
        if not request.requireBound:
            if others and group.session is not None:
                raise ValueError(f"group {request.groupName} consumes bound (session {group.session[0]})")
            return None, {}
        session = (request.sessionKey, request.totalCount, not request.HasField("selectBig") or request.selectBig)
        if not request.sessionKey or request.totalCount < 1:
            raise ValueError("bound consumption needs a sessionKey and a totalCount of at least 1")
        if others and group.session != session:
            raise ValueError(f"group {request.groupName} runs another session than {session}: {group.session}")
        try:
            required = parse_required_partitions(request.requiredPartition)
        except ProtocolError as exc:
            raise ValueError(str(exc)) from None
        return session, {(topic, partition): offset for (_, topic, partition), offset in required.items()}

    def set_flow_rules(self, rules: str, group: str | None = None) -> None:
        """Set the flow-control rules (fastmq.tubemq.flow's JSON; "" clears them) of `group`, or the default
        ones of every group; consumers get them with their next heartbeat. ProtocolError when malformed."""
        FlowRules.parse(rules)
        self._flow_check_id += 1
        self.flow_rules[group] = (self._flow_check_id, rules)

    def _flow_fields(self, request: Any) -> dict[str, Any]:
        """The flow-control check ids, and the rules a consumer naming other ids does not have."""
        fields: dict[str, Any] = {}
        for scope, prefix in ((None, "def"), (request.groupName, "group")):
            check_id, rules = self.flow_rules.get(scope, (NO_RULES, ""))
            fields[f"{prefix}FlowCheckId"] = check_id
            if getattr(request, f"{prefix}FlowCheckId") != check_id:
                fields[f"{prefix}FlowControlInfo"] = rules
        return fields

    def consumer_heartbeat(self, request: Any, conn: Any) -> Any:
        group = self.groups.get(request.groupName)
        state = group.consumers.get(request.clientId) if group is not None else None
        if group is None or state is None:
            return master_pb2.HeartResponseM2C(success=False, errCode=ErrorCode.HB_NO_NODE,
                                               errMsg="the consumer is not registered")
        state.last_seen = self.broker.loop.time()
        if request.HasField("event") and state.sent is not None \
                and request.event.rebalanceId == state.sent.rebalanceId \
                and request.event.status in (EventStatus.DONE, EventStatus.FAILED):
            self._apply_report(group, state, request.event)
        if request.reportSubscribeInfo and state.sent is None and not state.queued:
            self._book_holdings(group, state, request.subscribeInfo)
        response = master_pb2.HeartResponseM2C(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK!",
                                               notAllocated=group.not_allocated, qryPriorityId=-2,
                                               requireAuth=False, **self._flow_fields(request))
        if state.sent is None and state.queued:
            event = state.queued.pop(0)
            event.status = EventStatus.PROCESSING
            state.sent = event
            response.event.CopyFrom(event)
        return response

    def _apply_report(self, group: GroupState, state: ConsumerState, report: Any) -> None:
        """A consumer reported how an event went: partitions it was to connect but did not are unheld."""
        sent, state.sent = state.sent, None
        if sent.opType not in CONNECT_EVENTS:
            return
        done = set()
        if report.status == EventStatus.DONE:
            for info in report.subscribeInfo:
                _, _, partition = parse_subscribe_info(info)
                done.add((partition.topic, partition.partition_id))
        for info in sent.subscribeInfo:
            _, _, partition = parse_subscribe_info(info)
            key = (partition.topic, partition.partition_id)
            if key not in done and group.owner.get(key) == state.client_id:
                del group.owner[key]

    def _book_holdings(self, group: GroupState, state: ConsumerState, infos: Iterable[str]) -> None:
        """A settled consumer listed what it holds: that is the truth. The Java client reports an event DONE
        with every partition it was given, even those the broker refused (PARTITION_OCCUPIED), and lists what
        it really holds every few heartbeats: what it was given but does not hold is unheld again (the next
        round hands it out anew), and what it holds that nobody owns is its own."""
        held: set[tuple[str, int]] = set()
        for info in infos:
            _, _, partition = parse_subscribe_info(info)
            held.add((partition.topic, partition.partition_id))
        for key, holder in list(group.owner.items()):
            if holder == state.client_id and key not in held:
                del group.owner[key]
        for key in held:
            group.owner.setdefault(key, state.client_id)

    def close_consumer(self, request: Any, conn: Any) -> Any:
        group = self.groups.get(request.groupName)
        if group is not None and request.clientId in group.consumers:
            self._drop_consumer(group, request.clientId)
        return master_pb2.CloseResponseM2C(success=True, errCode=ErrorCode.SUCCESS, errMsg="OK!")

    def _drop_consumer(self, group: GroupState, client_id: str) -> None:
        del group.consumers[client_id]
        for key, holder in list(group.owner.items()):
            if holder == client_id:
                del group.owner[key]
        data = self._data_broker()
        if data is not None:
            data.release_consumer(client_id)

    # ---- balancing -----------------------------------------------------------------------------------------

    def _balance_all(self) -> None:
        now = self.broker.loop.time()
        for client_id, seen in list(self.producers.items()):
            if now - seen > self.client_timeout:
                del self.producers[client_id]
        for name, group in list(self.groups.items()):
            for client_id, state in list(group.consumers.items()):
                if now - state.last_seen > self.client_timeout:
                    log.info("TubeMQ consumer %s of group %s timed out", client_id, name)
                    self._drop_consumer(group, client_id)
            if not group.consumers:
                del self.groups[name]
            elif not self.standby:
                self._balance(name, group)

    def _balance(self, name: str, group: GroupState) -> None:
        if any(state.sent is not None or state.queued for state in group.consumers.values()):
            return      # not settled: wait for every report
        data = self._data_broker()
        if data is None:
            return
        if group.session is not None:
            if group.allocating:                     # the first allocation was reported back: it is done
                group.allocating, group.allocated = False, True
            if len(group.consumers) < group.session[1]:
                return                               # a bound group waits for all its members
            claims = {client: {key: offset for key, offset in state.required.items()
                               if 0 <= key[1] < data.partitions(key[0])}
                      for client, state in group.consumers.items()}
            releases, assignments = bound_balance(claims, group.owner, select_big=group.session[2])
            group.allocating = not group.allocated and bool(assignments)
        else:
            topics = sorted({topic for state in group.consumers.values() for topic in state.topics})
            partitions = [(topic, index) for topic in topics for index in range(data.partitions(topic))]
            releases, assignments = balance(partitions, group.consumers, group.owner)
        info = data.info
        for events, op_type in ((releases, EventType.ONLY_DISCONNECT), (assignments, EventType.ONLY_CONNECT)):
            for client_id, keys in events.items():
                group.rebalance_id += 1
                for key in keys:
                    if op_type == EventType.ONLY_DISCONNECT:
                        group.owner.pop(key, None)
                    else:
                        group.owner[key] = client_id
                group.consumers[client_id].queued.append(master_pb2.EventProto(
                    rebalanceId=group.rebalance_id, opType=op_type, status=EventStatus.TODO,
                    subscribeInfo=[encode_subscribe_info(client_id, name, Partition(info, topic, index))
                                   for topic, index in keys]))

    def stats(self) -> dict[str, Any]:
        return {"tubemq_groups": {name: {"consumers": sorted(group.consumers),
                                         "owner": {f"{t}:{p}": c for (t, p), c in sorted(group.owner.items())}}
                                  for name, group in self.groups.items()}}

    def close(self) -> None:
        self._periodic.stop()
        for service in self.services:
            service.close()


class StandbyException(Refusal):
    """Raised by every handler of a standby master: the client gets an exception response naming it."""
