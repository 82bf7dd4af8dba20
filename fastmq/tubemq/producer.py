"""The TubeMQ producer: registers with a master, learns the brokers and partitions of its topics from heartbeats,
and sends messages to brokers, synchronously or not.

Life: publish(topics) registers with the master (the first call) and heartbeats at once for the topics'
partitions; later calls add topics (they go out in the next heartbeat, which is made at once). The heartbeat
thread beats every `heartbeat_interval` s; a master that forgot the producer (HB_NO_NODE) or cannot be reached
makes it register again, with the next master of the list. Every broker serving a topic is connected ahead of the
first send. A partition is chosen by key (CRC32 of the key) or round robin, skipping brokers that failed
`bad_broker_threshold` sends in a row, for `bad_broker_penalty` s (fastmq.client.NodeHealth). The connections are
the RpcClient's: one per broker and master, shared by the producers and consumers given the same RpcClient (a
session factory's), reconnected on demand and closed when idle for `connections_max_idle_ms`.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from fastmq.client import NodeHealth
from fastmq.closeable import Closeable
from fastmq.errors import ConfigurationError, IllegalStateError, OperationTimeoutError
from fastmq.io import NetworkError
from fastmq.tubemq import rpc
from fastmq.tubemq._proto import broker_pb2, master_pb2
from fastmq.tubemq.errors import ErrorCode, TubeMQError
from fastmq.tubemq.message import Message, checksum, pack_ipv4
from fastmq.tubemq.metadata import BrokerInfo, Partition, parse_broker_info, parse_topic_info
from fastmq.tubemq.rpc_client import RpcClient
from fastmq.tubemq.session import Heartbeat, MasterSession, local_address, make_client_id

log = logging.getLogger(__name__)

# Seconds between looks at which brokers are blocked (NodeHealth), rather than one per send.
_AVOIDED_RECHECK = 0.1
_future_lock = threading.Lock()


class SendFuture:
    """The outcome of one send_async: result(timeout) waits for the SendResult or raises the send's error.
    Lighter than concurrent.futures.Future (one per message): its Event is made only for a caller that waits."""

    __slots__ = ("_result", "_error", "_done", "_event")

    def __init__(self) -> None:
        self._result: SendResult | None = None
        self._error: BaseException | None = None
        self._done = False
        self._event: threading.Event | None = None

    def done(self) -> bool:
        return self._done

    def _finish(self, result: SendResult | None, error: BaseException | None) -> None:
        self._result, self._error = result, error
        with _future_lock:
            self._done = True
            event = self._event
        if event is not None:
            event.set()

    def result(self, timeout: float | None = None) -> SendResult:
        if not self._done:
            with _future_lock:
                if not self._done and self._event is None:
                    self._event = threading.Event()
                event = self._event
            if event is not None and not event.wait(timeout):
                raise OperationTimeoutError(f"the send was not answered within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None     # an answer sets the result or the error
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except OperationTimeoutError:
            raise
        except BaseException as exc:
            return exc
        return None


@dataclass(frozen=True)
class SendResult:
    partition: Partition
    message_id: int
    append_offset: int
    append_time: int


class Producer(Closeable):
    """Sends messages to the topics it publishes. Thread-safe."""

    def __init__(self, masters: str, *, rpc_client: RpcClient | None = None, heartbeat_interval: float = 13.0,
                 request_timeout_ms: int = 10_000, user: str | None = None, password: str | None = None,
                 bad_broker_threshold: int = 3, bad_broker_penalty: float = 30.0,
                 connections_max_idle_ms: float = 180_000, ssl_context: Any = None) -> None:
        self._own_rpc = rpc_client is None
        self.rpc = rpc_client if rpc_client is not None else RpcClient(
            request_timeout_ms=request_timeout_ms, connections_max_idle_ms=connections_max_idle_ms,
            ssl_context=ssl_context)
        self.session = MasterSession(masters, self.rpc, user=user, password=password)
        self.client_id = make_client_id("producer", "Pub")
        self.host = local_address()
        self._sent_addr = pack_ipv4(self.host)
        self.health: NodeHealth[int] = NodeHealth(bad_broker_threshold, bad_broker_penalty)
        self._lock = threading.RLock()
        self._topics: list[str] = []
        self._brokers: dict[int, BrokerInfo] = {}
        self._broker_checksum = -1
        self._partitions: dict[str, list[Partition]] = {}
        self._max_sizes: dict[str, int] = {}
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._avoided: set[Any] = set()
        self._avoided_checked = 0.0
        self._registered = False
        self._closed = False
        self._metadata_changed = threading.Condition(self._lock)
        self._heartbeat = Heartbeat("fastmq-tubemq-producer", heartbeat_interval, self._beat)

    # ---- master --------------------------------------------------------------------------------------------

    def publish(self, *topics: str, timeout: float = 30.0) -> None:
        """Add topics to publish to; returns once their partitions are known (ConfigurationError otherwise)."""
        if self._closed:
            raise IllegalStateError("the producer is closed")
        with self._lock:
            for topic in topics:
                if topic not in self._topics:
                    self._topics.append(topic)
            first = not self._registered
        if first:
            self._register()
            self._heartbeat.start()
        self._beat()
        deadline = time.monotonic() + timeout
        with self._lock:
            while not all(self._partitions.get(topic) for topic in topics):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = [topic for topic in topics if not self._partitions.get(topic)]
                    raise ConfigurationError(f"the TubeMQ master knows no partitions of {', '.join(missing)}")
                if not self._metadata_changed.wait(min(remaining, 0.2)):
                    self._heartbeat.beat_now()

    def _register(self) -> None:
        with self._lock:
            topics = list(self._topics)
        response = self.session.call(rpc.PRODUCER_REGISTER, master_pb2.RegisterRequestP2M(
            clientId=self.client_id, topicList=topics, brokerCheckSum=-1, hostName=self.host,
            authInfo=self.session.certificate(), jdkVersion="python",
            appdConfig=master_pb2.ApprovedClientConfig(configId=-2)), master_pb2.RegisterResponseM2P)
        if not response.success:
            raise TubeMQError(response.errCode, f"producer registration: {response.errMsg}")
        self.session.note_authorization(response)
        self._update_brokers(response.brokerCheckSum, response.brokerInfos)
        self._registered = True

    def _beat(self) -> None:
        if self._closed:
            return
        with self._lock:
            topics = list(self._topics)
            broker_checksum = self._broker_checksum
        try:
            response = self.session.call(rpc.PRODUCER_HEARTBEAT, master_pb2.HeartRequestP2M(
                clientId=self.client_id, brokerCheckSum=broker_checksum, hostName=self.host, topicList=topics,
                authInfo=self.session.certificate()), master_pb2.HeartResponseM2P, failover=False)
        except Exception as exc:
            log.warning("TubeMQ producer heartbeat failed (%s): registering again", exc)
            self._register()
            return
        if response.errCode == ErrorCode.HB_NO_NODE:
            self._register()
            return
        if not response.success:
            log.warning("TubeMQ producer heartbeat refused: %s", TubeMQError(response.errCode, response.errMsg))
            return
        self.session.note_authorization(response)
        if response.brokerInfos:
            self._update_brokers(response.brokerCheckSum, response.brokerInfos)
        self._update_topics(response.topicInfos)

    def _update_brokers(self, broker_checksum: int, infos: Iterable[str]) -> None:
        brokers = {}
        for text in infos:
            broker = parse_broker_info(text)
            brokers[broker.broker_id] = broker
        with self._lock:
            self._brokers = brokers
            self._broker_checksum = broker_checksum

    def _update_topics(self, infos: Iterable[str]) -> None:
        with self._lock:
            partitions: dict[str, list[Partition]] = {}
            for text in infos:
                topic, found, max_size = parse_topic_info(text, self._brokers)
                partitions.setdefault(topic, []).extend(found)
                if max_size is not None:
                    self._max_sizes[topic] = max_size
            for topic, found in partitions.items():
                found.sort(key=lambda p: (p.broker.broker_id, p.partition_id))
                if found != self._partitions.get(topic):
                    for broker in {p.broker for p in found}:
                        self.rpc.connect((broker.host, broker.port))     # pre-connection
                self._partitions[topic] = found
            self._metadata_changed.notify_all()

    def partitions(self, topic: str) -> list[Partition]:
        with self._lock:
            return list(self._partitions.get(topic, ()))

    # ---- sending -------------------------------------------------------------------------------------------

    def _choose(self, topic: str, key: bytes | str | None) -> Partition:
        with self._lock:
            partitions = self._partitions.get(topic)
            if not partitions:
                raise ConfigurationError(f"topic {topic!r} is not published by this producer (or has no "
                                         "partitions): call publish() first")
            now = time.monotonic()
            if now >= self._avoided_checked + _AVOIDED_RECHECK:
                self._avoided, self._avoided_checked = self.health.avoided(now), now
            avoided = self._avoided
            usable = [p for p in partitions if p.broker.broker_id not in avoided] or partitions if avoided \
                else partitions
            if key is not None:
                data = key.encode() if isinstance(key, str) else key
                return usable[zlib.crc32(data) % len(usable)]
            counter = self._round_robin.setdefault(topic, itertools.count())
            return usable[next(counter) % len(usable)]

    def send_async(self, message: Message, *, key: bytes | str | None = None,
                   callback: Callable[[SendResult | None, BaseException | None], Any] | None = None) -> SendFuture:
        """Send without waiting: the SendFuture (and callback, on the I/O thread) get the SendResult or the error."""
        if self._closed:
            raise IllegalStateError("the producer is closed")
        partition = self._choose(message.topic, key)
        data, flag = message.encode()
        max_size = self._max_sizes.get(message.topic)
        if max_size is not None and len(data) > max_size:
            raise ConfigurationError(f"message of {len(data)} bytes exceeds the topic's {max_size}")
        request = broker_pb2.SendMessageRequestP2B(
            clientId=self.client_id, topicName=message.topic, partitionId=partition.partition_id, data=data,
            flag=flag, checkSum=checksum(data), sentAddr=self._sent_addr, msgType=message.msg_type,
            msgTime=message.msg_time, authInfo=self.session.broker_auth())
        future = SendFuture()
        broker_id = partition.broker.broker_id

        def answered(response: Any, error: BaseException | None) -> None:
            if error is None and not response.success:
                error = TubeMQError(response.errCode, response.errMsg)
            if error is not None:
                if isinstance(error, (NetworkError, ConnectionError)) or (
                        isinstance(error, TubeMQError) and error.code in (ErrorCode.SERVICE_UNAVAILABLE,
                                                                          ErrorCode.INTERNAL_SERVER_ERROR)):
                    self.health.failed(broker_id, time.monotonic())
                result = None
            else:
                self.health.succeeded(broker_id)
                result = SendResult(partition, response.messageId, response.appendOffset, response.appendTime)
            future._finish(result, error)
            if callback is not None:
                try:
                    callback(result, error)
                except Exception:
                    log.exception("a TubeMQ send callback failed")

        self.rpc.call_async((partition.broker.host, partition.broker.port), rpc.SEND_MESSAGE, request,
                            broker_pb2.SendMessageResponseB2P, answered)
        return future

    def send(self, message: Message, *, key: bytes | str | None = None, timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer; raises TubeMQError (with its ErrorCode) or a network error."""
        return self.send_async(message, key=key).result(timeout if timeout is not None
                                                        else self.rpc.request_timeout_ms / 1000 + 5)

    # ---- closing -------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._heartbeat.stop()
        if self._registered:
            try:
                self.session.call(rpc.PRODUCER_CLOSE, master_pb2.CloseRequestP2M(
                    clientId=self.client_id, authInfo=self.session.certificate()), master_pb2.CloseResponseM2P,
                    failover=False)
            except Exception as exc:
                log.info("TubeMQ producer close not acknowledged by the master: %s", exc)
        if self._own_rpc:
            self.rpc.close()
