"""TubeMQ consumers: a pull consumer (get_message / confirm) and a push consumer (a thread calling a listener),
balanced by the master.

Registration: the consumer registers its group and topics with the master (filters per topic ride along as
topicCondition) and waits: the master assigns partitions through events in heartbeat responses (seed 5.6).
CONNECT / ONLY_CONNECT: each partition is registered at its broker (opType 31, with the topic's message-type
filters, and the exact start offset asked for while the bound session is not allocated); one the broker answers
PARTITION_OCCUPIED is dropped from the attempt, and the event's report lists only those registered.
DISCONNECT / ONLY_DISCONNECT: partitions are unregistered (opType 32) once they are not in use. REPORT: the next heartbeat lists what the
consumer holds (as every event report and every sixth heartbeat do). STOPREBALANCE: nothing to do. Reports go
back with the next heartbeat, which is made at once.
A master that forgot the consumer (HB_NO_NODE) or fails is registered with again (the next master of the list),
naming the partitions still held.

Consumption: get_message() takes the next idle partition in turn, reads a batch from its broker and hands it
out with its partition in use; confirm(result, consumed) sends the commit 1:1 (consumed True moves the group's
offset past the batch; False rolls it back and the batch comes again: with manual confirmation of exactly what
was processed this is effectively-once). The Java client's reactions to getMessage codes apply: NOT_FOUND (no new
message) rests the partition `empty_backoff` s, FORBIDDEN / SERVICE_UNAVAILABLE / MOVED their pauses,
HB_NO_NODE / CERTIFICATE_FAILURE / DUPLICATE_PARTITION drop it, SERVER_CONSUME_SPEED_LIMIT waits minLimitTime.
`max_messages_per_second` limits consumption (a token bucket, fastmq.client.RateLimiter) and
`min_pull_interval` how often one partition is pulled; the master's flow-control rules (fastmq.tubemq.flow,
received with register and heartbeat responses) add their rests after empty pulls, between pulls and past a
data limit.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from fastmq.client import RateLimiter
from fastmq.closeable import Closeable
from fastmq.errors import (
    ConfigurationError,
    CorruptDataError,
    FastMQError,
    IllegalStateError,
    OperationTimeoutError,
    ProtocolError,
)
from fastmq.tubemq import rpc
from fastmq.tubemq._proto import broker_pb2, master_pb2
from fastmq.tubemq.constants import (
    CONNECT_EVENTS,
    DISCONNECT_EVENTS,
    OP_REGISTER,
    OP_UNREGISTER,
    READ_FROM_MAX,
    READ_FROM_MAX_ALWAYS,
    READ_NORMAL,
    EventStatus,
    EventType,
)
from fastmq.tubemq.errors import GET_MESSAGE_BACKOFF, GET_MESSAGE_DROPS_PARTITION, ErrorCode, TubeMQError
from fastmq.tubemq.flow import FlowRules
from fastmq.tubemq.message import Message, checksum, decode_payload
from fastmq.tubemq.metadata import (
    Partition,
    encode_required_partitions,
    encode_subscribe_info,
    parse_subscribe_info,
)
from fastmq.tubemq.rpc_client import RpcClient
from fastmq.tubemq.session import Heartbeat, MasterSession, local_address, make_client_id

log = logging.getLogger(__name__)

# Where a group without a committed offset starts (the Java client's ConsumePosition codes), and the
# RegisterRequestC2B.readStatus each asks for at a partition's first registration (later ones: 0, normal).
FROM_LATEST_OFFSET = 0
FROM_FIRST_OFFSET = -1
FROM_MAX_OFFSET_ALWAYS = 1
_FIRST_READ_STATUS = {FROM_FIRST_OFFSET: READ_NORMAL, FROM_LATEST_OFFSET: READ_FROM_MAX,
                      FROM_MAX_OFFSET_ALWAYS: READ_FROM_MAX_ALWAYS}
# A heartbeat lists what the consumer holds with every event report and at least every this many beats, as the
# Java client's (maxSubInfoReportIntvlTimes): a real master balances by these lists, and re-sends CONNECT events
# for partitions it does not see held.
SUBSCRIPTION_REPORT_BEATS = 6
NO_RULES = -2           # the flow-control check id of a consumer that has no rules yet


@dataclass
class ConsumeResult:
    """One batch of one partition; confirm it with Consumer.confirm(result, consumed)."""

    partition: Partition
    messages: list[Message]
    # Where the batch's read started. TubeMQ tells no message's own offset: a topic store's partitions share
    # one index, so a partition's messages are not one entry apart (a Message has no offset); where a message
    # went is its SendResult.append_offset, the offset bound consumption starts a partition at.
    offset: int
    confirm_context: str          # "partitionKey:bookedTimestamp", as the Java client's


@dataclass
class _Held:
    partition: Partition
    in_use: bool = False
    rest_until: float = 0.0
    release: bool = False          # the master took it back while in use: unregister at confirm
    last_pull: float = 0.0
    empty_in_a_row: int = 0        # empty pulls in a row (flow-control rules of type 1)
    rest_after: float = 0.0        # the rest the flow-control rules set after the batch in use
    booked_at: int = 0


@dataclass
class _Pending:
    """An event received and handled, to report with the next heartbeat."""

    event: Any
    done: list[str] = field(default_factory=list)


class PullConsumer(Closeable):
    """Reads the topics of `topics` (a list, or {topic: [message types] or None} for server-side filters) as
    member `group`. Thread-safe; get_message() may be called from several threads."""

    def __init__(self, masters: str, group: str, topics: Iterable[str] | Mapping[str, Iterable[str] | None], *,
                 rpc_client: RpcClient | None = None, consume_position: int = FROM_FIRST_OFFSET,
                 heartbeat_interval: float = 13.0, empty_backoff: float = 0.4, request_timeout_ms: int = 10_000,
                 offsets: Mapping[str, int] | None = None, session_key: str | None = None,
                 bound_consumers: int = 1, select_big: bool = True,
                 max_messages_per_second: float | None = None, min_pull_interval: float = 0.0,
                 user: str | None = None, password: str | None = None, ssl_context: Any = None,
                 kind: str = "Pull") -> None:
        if isinstance(topics, Mapping):
            self.filters = {topic: sorted(types) if types else None for topic, types in topics.items()}
        else:
            self.filters = {topic: None for topic in topics}
        if not self.filters:
            raise ConfigurationError("a TubeMQ consumer subscribes to at least one topic")
        self._own_rpc = rpc_client is None
        self.rpc = rpc_client if rpc_client is not None else RpcClient(request_timeout_ms=request_timeout_ms,
                                                                       ssl_context=ssl_context)
        self.session = MasterSession(masters, self.rpc, user=user, password=password)
        self.group = group
        self.client_id = make_client_id(group, kind)
        self.host = local_address()
        self.consume_position = consume_position
        self.empty_backoff = empty_backoff
        self.min_pull_interval = min_pull_interval
        # Bound consumption: {partition key "brokerId:topic:partitionId": offset}; the group's session (its key,
        # how many consumers it waits for, bigger or smaller offset when two name one partition). The offsets are
        # applied only while the master says the session is not allocated yet, once per partition.
        self.offsets = dict(offsets or {})
        self.session_key = session_key or f"{self.client_id}"
        self.bound_consumers = bound_consumers
        self.select_big = select_big
        self._not_allocated = bool(self.offsets)
        self._offsets_applied: set[str] = set()
        self._registered_once: set[str] = set()
        self.rate_limit = RateLimiter(max_messages_per_second) if max_messages_per_second else None
        # Flow-control rules from the master (fastmq.tubemq.flow): the default's and the group's, by check id.
        self._flow_ids = (NO_RULES, NO_RULES)
        self._flow_rules = (FlowRules(), FlowRules())
        self.flow = FlowRules()
        self._minute_read = (0, 0)                  # (minute, bytes read in it) for data-limit rules
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._held: dict[str, _Held] = {}           # partition key -> state
        self._turns: deque[str] = deque()           # partition keys in pulling order
        self._reports: deque[_Pending] = deque()
        self._report_subscriptions = False
        self._beats_since_report = 0
        self._closed = False
        self._heartbeat = Heartbeat("fastmq-tubemq-consumer", heartbeat_interval, self._beat)
        try:
            self._register()
        except BaseException:
            if self._own_rpc:                # a refused consumer leaves no connection or loop behind
                self.rpc.close()
            raise
        self._heartbeat.start()
        self._heartbeat.beat_now()

    # ---- master --------------------------------------------------------------------------------------------

    def _subscribe_infos(self) -> list[str]:
        """What this consumer holds, as the master reads it (partitions on their way out left out)."""
        with self._lock:
            return [encode_subscribe_info(self.client_id, self.group, held.partition)
                    for held in self._held.values() if not held.release]

    def _register(self) -> None:
        conditions = [f"{topic}#{','.join(types)}" for topic, types in self.filters.items() if types]
        response = self.session.call(rpc.CONSUMER_REGISTER, master_pb2.RegisterRequestC2M(
            clientId=self.client_id, groupName=self.group, hostName=self.host, topicList=list(self.filters),
            subscribeInfo=self._subscribe_infos(), topicCondition=conditions, requireBound=bool(self.offsets),
            sessionTime=int(time.time() * 1000), sessionKey=self.session_key, totalCount=self.bound_consumers,
            selectBig=self.select_big, notAllocated=self._not_allocated,
            requiredPartition=encode_required_partitions(self.offsets) or None,
            defFlowCheckId=self._flow_ids[0], groupFlowCheckId=self._flow_ids[1], qryPriorityId=-2,
            authInfo=self.session.certificate(),
            jdkVersion="python"), master_pb2.RegisterResponseM2C)
        if not response.success:
            raise TubeMQError(response.errCode, f"consumer registration: {response.errMsg}")
        self.session.note_authorization(response)
        self._note_allocation(response)
        self._note_flow_rules(response)

    def _note_flow_rules(self, response: Any) -> None:
        """Rules the master sends when the check ids this consumer named are not the current ones."""
        texts = (response.defFlowControlInfo, response.groupFlowControlInfo)
        ids = (response.defFlowCheckId if response.HasField("defFlowCheckId") else self._flow_ids[0],
               response.groupFlowCheckId if response.HasField("groupFlowCheckId") else self._flow_ids[1])
        rules = list(self._flow_rules)
        for index in range(2):
            if ids[index] != self._flow_ids[index]:
                try:
                    rules[index] = FlowRules.parse(texts[index])
                except ProtocolError as exc:
                    log.warning("TubeMQ flow-control rules from the master ignored: %s", exc)
                    return
        with self._lock:
            self._flow_ids, self._flow_rules = ids, (rules[0], rules[1])
            self.flow = rules[1].over(rules[0])

    def _note_allocation(self, response: Any) -> None:
        """A master that says the bound session is allocated ends the offset resets for good (as Java's)."""
        if response.HasField("notAllocated") and not response.notAllocated:
            self._not_allocated = False

    def _beat(self) -> None:
        if self._closed:
            return
        with self._lock:
            report = self._reports.popleft() if self._reports else None
            self._beats_since_report += 1
            report_subscriptions = (self._report_subscriptions or report is not None
                                    or self._beats_since_report >= SUBSCRIPTION_REPORT_BEATS)
            if report_subscriptions:
                self._report_subscriptions, self._beats_since_report = False, 0
        request = master_pb2.HeartRequestC2M(clientId=self.client_id, groupName=self.group,
                                             reportSubscribeInfo=report_subscriptions,
                                             defFlowCheckId=self._flow_ids[0], groupFlowCheckId=self._flow_ids[1],
                                             authInfo=self.session.certificate())
        if report_subscriptions:
            request.subscribeInfo.extend(self._subscribe_infos())
        if report is not None:
            request.event.CopyFrom(report.event)
            request.event.status = EventStatus.DONE
            del request.event.subscribeInfo[:]
            request.event.subscribeInfo.extend(report.done)
        try:
            response = self.session.call(rpc.CONSUMER_HEARTBEAT, request, master_pb2.HeartResponseM2C,
                                         failover=False)
        except Exception as exc:
            log.warning("TubeMQ consumer heartbeat failed (%s): registering again", exc)
            self._register()
            self._heartbeat.beat_now()
            return
        if response.errCode == ErrorCode.HB_NO_NODE:
            self._register()
            self._heartbeat.beat_now()
            return
        if not response.success:
            log.warning("TubeMQ consumer heartbeat refused: %s", TubeMQError(response.errCode, response.errMsg))
            return
        self.session.note_authorization(response)
        self._note_allocation(response)
        self._note_flow_rules(response)
        self._beat_brokers()
        if response.HasField("event"):
            self._handle(response.event)
            self._heartbeat.beat_now()           # report at once
        elif self._reports:
            self._heartbeat.beat_now()

    def _handle(self, event: Any) -> None:
        partitions = [parse_subscribe_info(info)[2] for info in event.subscribeInfo]
        op_type = event.opType
        if op_type in CONNECT_EVENTS:
            done = [encode_subscribe_info(self.client_id, self.group, p) for p in partitions if self._connect(p)]
            with self._lock:
                self._reports.append(_Pending(event, done))
        elif op_type in DISCONNECT_EVENTS:
            for partition in partitions:
                self._disconnect(partition)
            with self._lock:
                self._reports.append(_Pending(event, list(event.subscribeInfo)))
        elif op_type == EventType.REPORT:
            with self._lock:
                self._report_subscriptions = True
        elif op_type != EventType.STOPREBALANCE:
            log.warning("TubeMQ balancing event with unknown opType %d ignored", op_type)

    # ---- brokers -------------------------------------------------------------------------------------------

    def _broker_call(self, partition: Partition, method: int, request: Any, response_class: type) -> Any:
        return self.rpc.call((partition.broker.host, partition.broker.port), method, request, response_class)

    def _connect(self, partition: Partition) -> bool:
        """Register a partition at its broker; False when it cannot be had now (PARTITION_OCCUPIED and the
        like: the master hands it out again later)."""
        request = broker_pb2.RegisterRequestC2B(
            opType=OP_REGISTER, clientId=self.client_id, groupName=self.group, topicName=partition.topic,
            partitionId=partition.partition_id,
            readStatus=(READ_NORMAL if partition.key in self._registered_once
                        else _FIRST_READ_STATUS[self.consume_position]),
            filterCondStr=self.filters.get(partition.topic) or [], sessionKey=self.session_key,
            authInfo=self.session.broker_auth())
        with self._lock:
            bound = self.offsets.get(partition.key)
            if bound is not None and self._not_allocated and partition.key not in self._offsets_applied:
                request.currOffset = bound
        try:
            response = self._broker_call(partition, rpc.CONSUMER_REGISTER_TO_BROKER, request,
                                         broker_pb2.RegisterResponseB2C)
        except Exception as exc:
            log.warning("TubeMQ partition %s could not be registered: %s", partition.key, exc)
            return False
        if not response.success:
            log.info("TubeMQ partition %s not registered: %s", partition.key,
                     TubeMQError(response.errCode, response.errMsg))
            return False
        with self._lock:
            self._registered_once.add(partition.key)
            if request.HasField("currOffset"):
                self._offsets_applied.add(partition.key)
            if partition.key not in self._held:
                self._held[partition.key] = _Held(partition)
                self._turns.append(partition.key)
            self._changed.notify_all()
        return True

    def _disconnect(self, partition: Partition) -> None:
        with self._lock:
            held = self._held.get(partition.key)
            if held is None:
                return
            if held.in_use:
                held.release = True
                return
            self._forget(partition.key)
        self._unregister(partition)

    def _forget(self, key: str) -> None:
        self._held.pop(key, None)
        try:
            self._turns.remove(key)
        except ValueError:
            pass

    def _unregister(self, partition: Partition) -> None:
        try:
            self._broker_call(partition, rpc.CONSUMER_REGISTER_TO_BROKER, broker_pb2.RegisterRequestC2B(
                opType=OP_UNREGISTER, clientId=self.client_id, groupName=self.group, topicName=partition.topic,
                partitionId=partition.partition_id, readStatus=READ_NORMAL, authInfo=self.session.broker_auth()),
                broker_pb2.RegisterResponseB2C)
        except Exception as exc:
            log.info("TubeMQ partition %s not unregistered: %s", partition.key, exc)

    def _beat_brokers(self) -> None:
        """C2B heartbeats: each broker hears which partitions this consumer still reads."""
        by_broker: dict[Any, list[str]] = {}
        with self._lock:
            for held in self._held.values():
                p = held.partition
                by_broker.setdefault(p.broker, []).append(f"{p.broker.encode()}#{p.topic}:{p.partition_id}")
        for broker, infos in by_broker.items():
            self.rpc.call_async((broker.host, broker.port), rpc.CONSUMER_HEARTBEAT_TO_BROKER,
                                broker_pb2.HeartBeatRequestC2B(clientId=self.client_id, groupName=self.group,
                                                               readStatus=READ_NORMAL, partitionInfo=infos,
                                                               authInfo=self.session.broker_auth()),
                                broker_pb2.HeartBeatResponseB2C, _ignore)

    @property
    def partitions(self) -> list[Partition]:
        """The partitions this consumer holds now."""
        with self._lock:
            return [held.partition for held in self._held.values()]

    # ---- consuming -----------------------------------------------------------------------------------------

    def _take_partition(self, deadline: float) -> _Held:
        with self._lock:
            while True:
                if self._closed:
                    raise IllegalStateError("the consumer is closed")
                now = time.monotonic()
                soonest = deadline
                for _ in range(len(self._turns)):
                    key = self._turns[0]
                    self._turns.rotate(-1)
                    held = self._held[key]
                    ready_at = max(held.rest_until, held.last_pull + self.min_pull_interval)
                    if held.in_use:
                        continue
                    if ready_at <= now:
                        held.in_use = True
                        held.last_pull = now
                        return held
                    soonest = min(soonest, ready_at)
                if now >= deadline:
                    raise OperationTimeoutError("no message arrived in time")
                self._changed.wait(max(0.001, min(soonest, deadline) - now))

    def get_message(self, timeout: float = 10.0) -> ConsumeResult:
        """The next batch of one partition (confirm it with confirm()). OperationTimeoutError when nothing
        came within `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            if self.rate_limit is not None:
                with self._lock:
                    wait = self.rate_limit.wait_for(1) if self.rate_limit.available() < 1 else 0.0
                if wait:
                    if time.monotonic() + wait > deadline:
                        raise OperationTimeoutError("the consumption rate limit holds messages back")
                    time.sleep(wait)
            held = self._take_partition(deadline)
            result = self._pull(held)
            if result is not None:
                return result
            if time.monotonic() >= deadline:
                raise OperationTimeoutError("no message arrived in time")

    def _pull(self, held: _Held) -> ConsumeResult | None:
        partition = held.partition
        try:
            response = self._broker_call(partition, rpc.GET_MESSAGE, broker_pb2.GetMessageRequestC2B(
                clientId=self.client_id, partitionId=partition.partition_id, groupName=self.group,
                topicName=partition.topic, lastPackConsumed=False, manualCommitOffset=False, escFlowCtrl=False),
                broker_pb2.GetMessageResponseB2C)
        except Exception as exc:
            log.info("TubeMQ getMessage on %s failed: %s", partition.key, exc)
            self._release(held, rest=self.empty_backoff)
            return None
        if response.success and response.messages:
            messages = []
            for transferred in response.messages:
                if transferred.checkSum != checksum(transferred.payLoadData):
                    log.warning("TubeMQ message %d of %s dropped: its checksum does not match",
                                transferred.messageId, partition.key)
                    continue
                try:
                    message = decode_payload(partition.topic, transferred.payLoadData, transferred.flag)
                except CorruptDataError as exc:
                    log.warning("TubeMQ message %d of %s dropped: %s", transferred.messageId, partition.key, exc)
                    continue
                message.partition, message.message_id = partition.partition_id, transferred.messageId
                messages.append(message)
            if self.rate_limit is not None:
                with self._lock:
                    self.rate_limit.take(len(messages))
            held.empty_in_a_row = 0
            held.rest_after = self._rest_after_data(partition.topic, response)
            held.booked_at = int(time.time() * 1000)
            return ConsumeResult(partition, messages, response.currOffset, f"{partition.key}:{held.booked_at}")
        code = response.errCode
        if code in GET_MESSAGE_DROPS_PARTITION:
            with self._lock:
                self._forget(partition.key)
            return None
        if code == ErrorCode.SERVER_CONSUME_SPEED_LIMIT:
            rest = response.minLimitTime / 1000.0
        elif code == ErrorCode.NOT_FOUND:
            held.empty_in_a_row += 1
            rule_rest = self.flow.empty_rest(held.empty_in_a_row)
            rest = max(self.empty_backoff if rule_rest is None else rule_rest,
                       self.flow.pull_interval(bool(self.filters.get(partition.topic)), found_nothing=True))
        else:
            rest = GET_MESSAGE_BACKOFF.get(code, self.empty_backoff)
        self._release(held, rest=rest)
        return None

    def _rest_after_data(self, topic: str, response: Any) -> float:
        """The rest the flow-control rules set after a batch: the pull frequency, and the data limit once this
        minute's reading passed it while the partition lags far enough."""
        rest = self.flow.pull_interval(bool(self.filters.get(topic)), found_nothing=False)
        now = time.localtime()
        minute = now.tm_hour * 60 + now.tm_min
        read = sum(len(message.payLoadData) for message in response.messages)
        with self._lock:
            stamp = int(time.time() // 60)
            seen_minute, seen = self._minute_read
            self._minute_read = (stamp, read + (seen if seen_minute == stamp else 0))
            limit = self.flow.data_limit(minute, response.currDataDlt)
            if limit is not None and self._minute_read[1] >= limit.bytes_per_minute:
                rest = max(rest, limit.rest)
        return rest

    def _release(self, held: _Held, rest: float = 0.0) -> None:
        release = False
        with self._lock:
            held.in_use = False
            held.rest_until = time.monotonic() + rest
            if held.release:
                self._forget(held.partition.key)
                release = True
            self._changed.notify_all()
        if release:
            self._unregister(held.partition)

    def confirm(self, result: ConsumeResult, consumed: bool = True) -> None:
        """Commit a batch (consumed) or roll it back for redelivery (not consumed); 1:1 with get_message."""
        partition = result.partition
        with self._lock:
            held = self._held.get(partition.key)
            if held is None or not held.in_use or result.confirm_context != f"{partition.key}:{held.booked_at}":
                raise IllegalStateError(f"{result.confirm_context} is not the batch in use of {partition.key}")
        try:
            response = self._broker_call(partition, rpc.COMMIT_OFFSET, broker_pb2.CommitOffsetRequestC2B(
                clientId=self.client_id, topicName=partition.topic, partitionId=partition.partition_id,
                groupName=self.group, lastPackConsumed=consumed), broker_pb2.CommitOffsetResponseB2C)
        finally:
            self._release(held, rest=held.rest_after)
        if not response.success:
            raise TubeMQError(response.errCode, f"commit on {partition.key}: {response.errMsg}")

    # ---- closing -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Unregister every partition at its broker, then leave the group at the master."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            held = [h.partition for h in self._held.values()]
            self._held.clear()
            self._turns.clear()
            self._changed.notify_all()
        self._heartbeat.stop()
        for partition in held:
            self._unregister(partition)
        try:
            self.session.call(rpc.CONSUMER_CLOSE, master_pb2.CloseRequestC2M(
                clientId=self.client_id, groupName=self.group, authInfo=self.session.certificate()),
                master_pb2.CloseResponseM2C, failover=False)
        except Exception as exc:
            log.info("TubeMQ consumer close not acknowledged by the master: %s", exc)
        if self._own_rpc:
            self.rpc.close()


class PushConsumer(Closeable):
    """Calls listener(messages) from `threads` threads for every batch; a batch is confirmed as consumed when
    the listener returns, and rolled back (redelivered) when it raises."""

    def __init__(self, masters: str, group: str, topics: Iterable[str] | Mapping[str, Iterable[str] | None],
                 listener: Callable[[list[Message]], Any], *,
                 threads: int = 1, **options: Any) -> None:
        self.consumer = PullConsumer(masters, group, topics, kind="Push", **options)
        self.listener = listener
        self._stopped = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"fastmq-tubemq-push-{index}", daemon=True)
                         for index in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                result = self.consumer.get_message(timeout=0.5)
            except OperationTimeoutError:
                continue
            except IllegalStateError:
                return
            try:
                self.listener(result.messages)
                consumed = True
            except Exception:
                log.exception("a TubeMQ push listener failed: the batch comes again")
                consumed = False
            try:
                self.consumer.confirm(result, consumed=consumed)
            except (TubeMQError, OSError, FastMQError) as exc:     # the partition moved on meanwhile
                log.warning("TubeMQ push consumer could not confirm a batch of %s: %s", result.partition.key, exc)

    def close(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(10)
        self.consumer.close()


def _ignore(response: Any, error: BaseException | None) -> None:
    """C2B heartbeats need no answer: a lost partition shows at its next getMessage (HB_NO_NODE)."""
