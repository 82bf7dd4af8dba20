"""The RocketMQ broker front end (`rocketmq://host:port` listeners): a RocketMQ broker on the store and the core.

A RocketMQ topic is a store topic and a queue a store queue, the same ones Kafka's partitions are: what one
protocol writes the other reads (queue = partition), and topics live in the store's topics.json whoever made
them. On top of the core this front end keeps, in RocketMQ's terms: the clients known from their heartbeats
(clients.py), the queue locks of orderly consumers (locks.py), pulls held for long polling (hold.py), the delay
levels (schedule.py), and its registration with the namesrv: a namesrv front end of the same broker is told
in-process at start, every register_interval_ms and whenever a topic is created or deleted.

Topics are created on first send from the default-topic template (TBW102, created at start when
auto_create_topics is on) with the smaller of the producer's and the template's queue numbers; a consumer
group's %RETRY% topic when the group first heartbeats or sends a message back; its %DLQ% topic when a message
runs out of retries. Requests are handled by send.py, pull.py, consumers.py, admin.py and transactions.py (half
messages, END_TRANSACTION and the check-back).
"""
from __future__ import annotations

import functools
import logging
import os
import random
import re
from typing import TYPE_CHECKING, Any

from fastmq._native import store_codec
from fastmq._native.store_codec import MessageBatch
from fastmq.broker.config import ListenerConfig
from fastmq.broker.errors import CoreError, TopicError
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.periodic import PeriodicWork
from fastmq.broker.rocketmq.acl import AccessChecker, AclConfig
from fastmq.broker.rocketmq.clients import ClientTable
from fastmq.broker.rocketmq.consumers import notify_ids_changed
from fastmq.broker.rocketmq.handlers import handler_table
from fastmq.broker.rocketmq.hold import PullHold
from fastmq.broker.rocketmq.locks import QueueLocks
from fastmq.broker.rocketmq.namesrv import (
    DELETE_TOPIC_IN_NAMESRV,
    REGISTER_BROKER,
    UNREGISTER_BROKER,
    NamesrvFrontEnd,
    json_body,
)
from fastmq.broker.rocketmq.remoting import Handler, RemotingListener, RequestError
from fastmq.broker.rocketmq.routes import QueueData, Registration
from fastmq.broker.rocketmq.schedule import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    ScheduleService,
    parse_delay_levels,
)
from fastmq.broker.rocketmq.settings import RocketMQSettings
from fastmq.broker.rocketmq.transactions import Transactions
from fastmq.broker.rocketmq.system_topics import RETRY_PREFIX, SCHEDULE_TOPIC, dlq_topic, retry_topic
from fastmq.broker.topics import STORE_RULES
from fastmq.errors import ConfigurationError
from fastmq.io import ServerConnection
from fastmq.rocketmq.protocol import ResponseCode
from fastmq.rocketmq.remoting import RemotingClient
from fastmq.store import PutMessageResult, StoredMessage, TopicConfig
from fastmq.store.config import PERM_INHERIT, PERM_READ, PERM_WRITE
from fastmq.store.message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, pack_host

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
ACL_FILE_CHECK_INTERVAL_S = 1.0
UNREGISTER_TIMEOUT_S = 2.0
IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")


def registration_request(registration: Registration, topics: Any) -> tuple[dict[str, Any], bytes]:
    """REGISTER_BROKER's fields and RegisterBrokerBody for a namesrv of another process."""
    fields = {"brokerName": registration.broker_name, "brokerAddr": registration.broker_addr,
              "clusterName": registration.cluster, "haServerAddr": registration.ha_server_addr,
              "brokerId": registration.broker_id, "compressed": "false"}
    table = {name: config.to_json() for name, config in list(topics.topic_config_table.items())
             if name in registration.topics}
    return fields, json_body({"topicConfigSerializeWrapper": {"topicConfigTable": table,
                                                              "dataVersion": registration.data_version},
                              "filterServerList": []})


def file_version(path: str) -> tuple[int, int] | None:
    """(modification time in ns, size) of a file, None when it cannot be read."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _answered(what: str, address: str, response: Any, error: BaseException | None) -> None:
    if error is not None or response.code != ResponseCode.SUCCESS:
        log.warning("%s at the namesrv %s failed: %s", what, address,
                    error or f"code {response.code}: {response.remark}")


class RocketMQFrontEnd(FrontEnd):
    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.settings = RocketMQSettings.from_options(broker.config.front_end_options.get("rocketmq", {}))
        self.clients = ClientTable()
        self.locks = QueueLocks()
        self.hold = PullHold(broker.loop)
        self.schedule = ScheduleService(broker.loop, broker.store,
                                        parse_delay_levels(self.settings.message_delay_level), broker.writer.write,
                                        self.deliver_scheduled, broker.clock)
        self.remoting_listeners: list[RemotingListener] = []
        self.transactions = Transactions(self)
        self.acl: AccessChecker | None = None       # the check of every request, when ACL is on
        self._acl_file_version: tuple[int, int] | None = None     # (mtime ns, size) of the account file read
        if self.settings.acl_file:
            self._acl_file_version = file_version(self.settings.acl_file)
            self.acl = AccessChecker(AclConfig.load(self.settings.acl_file))
        elif self.settings.acl_enable:
            if not broker.config.users:
                raise ConfigurationError("the rocketmq option acl_enable needs the broker's users (access key = "
                                         "user name, secret key = password) or an account file (acl_file)")
            self.acl = AccessChecker(AclConfig.of_users(broker.config.users))
        self._periodic = PeriodicWork(broker.loop)
        self._registrar: RemotingClient | None = None  # to the namesrvs of namesrv_addr
        self._closed = False
        broker.store.add_arrival_listener(self.hold.on_arrival)
        broker.store.add_arrival_listener(self.schedule.on_arrival)
        broker.topics.deletion_listeners.append(
            lambda topic: broker.loop.call_soon_threadsafe(self._topic_deleted, topic))
        self.clients.change_listeners.append(lambda group, ids: notify_ids_changed(self, group, ids))
        self.clients.change_listeners.append(self._members_changed)
        self._members: dict[str, set[str]] = {}      # group -> client ids, as the core's statistics know them

    def start(self) -> None:
        if self.broker.config.auto_create_topics:
            self.broker.loop.run_in_loop(self._ensure_default_topic, timeout=30)
        self.broker.loop.run_in_loop(self.schedule.start, timeout=60)
        self.broker.loop.run_in_loop(self.transactions.start, timeout=60)
        handlers: dict[int, Handler] = handler_table(self)
        for listener in self.listeners:
            self.remoting_listeners.append(RemotingListener(self.broker, listener, handlers, self._connection_lost))
            self.addresses.append(self.remoting_listeners[-1].address)
        host, _, port = self.address.rpartition(":")
        if IPV4.fullmatch(host):
            # STOREHOST of new records and the offset message ids are this broker's address, as in RocketMQ:
            # clients look a message up by id (VIEW_MESSAGE_BY_ID) at the address the id holds.
            self.broker.store.commit_log.store_host = pack_host((host, int(port)))
        self.broker.loop.run_in_loop(self._start_periodic, timeout=30)

    @property
    def address(self) -> str:
        """host:port this broker tells the namesrv (its first rocketmq listener's advertised address)."""
        return self.remoting_listeners[0].advertised

    # -- periodic work ----------------------------------------------------------------------------------------

    def _start_periodic(self) -> None:
        self.register()
        self._periodic.every("register", self.settings.register_interval_ms / 1000.0, self.register)
        self._periodic.every("scan_clients", CLIENT_SCAN_INTERVAL_S, self._scan_clients)
        self._periodic.every("check_transactions", self.settings.transaction_check_interval_ms / 1000.0,
                             self.transactions.check)
        if self.settings.acl_file:
            self._periodic.every("acl_file", ACL_FILE_CHECK_INTERVAL_S, self._reload_acl_file)

    def _reload_acl_file(self) -> None:
        """Read the account file again once it changed, as Apache's AclFileWatchService does; a file that does
        not load leaves the accounts as they were."""
        assert self.acl is not None
        version = file_version(self.settings.acl_file)
        if version == self._acl_file_version:
            return
        self._acl_file_version = version
        try:
            self.acl.config = AclConfig.load(self.settings.acl_file)
        except ConfigurationError as exc:
            log.error("the RocketMQ ACL file changed but does not load, the accounts stay as they were: %s", exc)
            return
        log.info("RocketMQ ACL accounts read again from %s", self.settings.acl_file)

    def _scan_clients(self) -> None:
        for connection in self.clients.scan_expired():
            log.info("client connection %s sent no heartbeat for 2 minutes: closed", connection)
            connection.close()

    def _members_changed(self, group: str, ids: list[str]) -> None:
        """Tell the core's statistics which client ids consume for a group (pulls are counted under it)."""
        before = self._members.pop(group, set())
        now = set(ids)
        if now:
            self._members[group] = now
        for client_id in now - before:
            self.broker.stats.member_changed(group, client_id, True)
        for client_id in before - now:
            self.broker.stats.member_changed(group, client_id, False)

    def _connection_lost(self, conn: ServerConnection) -> None:
        self.hold.connection_lost(conn)
        self.clients.connection_closed(conn)

    # -- the namesrv ------------------------------------------------------------------------------------------

    def registration(self) -> Registration:
        s = self.settings
        table = self.broker.store.topic_config_manager.topic_config_table
        topics = {name: QueueData(s.broker_name, config.read_queue_nums, config.write_queue_nums, config.perm,
                                  config.topic_sys_flag)
                  for name, config in list(table.items()) if name != SCHEDULE_TOPIC}
        return Registration(s.cluster_name, s.broker_name, self.address, s.broker_id, topics,
                            self.broker.store.topic_config_manager.data_version.to_json())

    def register(self) -> None:
        """Tell the namesrvs what this broker serves (loop thread): those of this broker in-process, the others
        with REGISTER_BROKER (answers are not waited for: a failure is logged and the next heartbeat retries)."""
        if self._closed or not self.remoting_listeners:
            return
        registration = self.registration()
        for front in self.broker.front_ends:
            if isinstance(front, NamesrvFrontEnd):     # its tables exist before its listeners open
                front.routes.register(registration)
        if self.settings.namesrv_addr:
            fields, body = registration_request(registration, self.broker.store.topic_config_manager)
            self._tell_namesrvs("registering", REGISTER_BROKER, fields, body)

    def _tell_namesrvs(self, what: str, code: int, fields: dict[str, Any], body: bytes | None = None) -> None:
        if self._registrar is None:
            self._registrar = RemotingClient(name="fastmq-broker-registration")
        for address in self.settings.namesrv_addr:
            self._registrar.invoke_frame(address, *self._registrar.encode(code, fields, body),
                                         functools.partial(_answered, what, address))

    def _topic_deleted(self, topic: str) -> None:
        """A topic deleted here (through any protocol) leaves the namesrvs' routes, which registrations only add
        to (routes.py): this broker's entry in-process, the cluster's with DELETE_TOPIC_IN_NAMESRV elsewhere (as
        `mqadmin deleteTopic -c` does after deleting at the brokers)."""
        if self._closed or not self.remoting_listeners:
            return
        for front in self.broker.front_ends:
            if isinstance(front, NamesrvFrontEnd):
                front.routes.remove_topic_of(topic, self.settings.broker_name)
        if self.settings.namesrv_addr:
            self._tell_namesrvs(f"deleting topic {topic!r}", DELETE_TOPIC_IN_NAMESRV,
                                {"topic": topic, "clusterName": self.settings.cluster_name})
        self.register()

    # -- topics -----------------------------------------------------------------------------------------------

    def topic_config(self, topic: str) -> TopicConfig | None:
        return self.broker.store.topic_config_manager.select_topic_config(topic)

    def create_topic(self, name: str, queues: int, perm: int = PERM_READ | PERM_WRITE,
                     topic_sys_flag: int = 0) -> TopicConfig:
        """Create a topic (or return the existing one) and tell the namesrv."""
        try:
            self.broker.topics.create(name, queues, only=STORE_RULES)
        except TopicError as exc:
            if exc.error is not CoreError.TOPIC_EXISTS:
                raise RequestError(str(exc)) from None
        config = self.topic_config(name)
        if config is not None and (config.perm != perm or config.topic_sys_flag != topic_sys_flag):
            config = TopicConfig(name, config.read_queue_nums, config.write_queue_nums, perm,
                                 config.topic_filter_type, topic_sys_flag, config.order)
            self.broker.store.topic_config_manager.update_topic_config(config)
        log.info("created topic %s with %d queue(s), perm %d", name, queues, perm)
        self.broker.loop.call_soon_threadsafe(self.register)
        created = self.topic_config(name)
        if created is None:
            raise TopicError(CoreError.NOT_AVAILABLE, f"topic {name} was deleted while it was being created: retry")
        return created

    def _ensure_default_topic(self) -> None:
        if self.topic_config(self.settings.default_topic) is None:
            queues = self.settings.default_topic_queue_nums
            self.create_topic(self.settings.default_topic, queues, PERM_READ | PERM_WRITE | PERM_INHERIT)

    def topic_for_send(self, topic: str, default_topic: str | None, default_queue_nums: int) -> TopicConfig:
        """The topic a message is sent to, created from the template when it is new and that is allowed."""
        config = self.topic_config(topic)
        if config is not None:
            return config
        if topic.startswith(RETRY_PREFIX):
            return self.create_topic(topic, self.settings.retry_queue_nums)
        template = self.topic_config(default_topic) if default_topic else None
        if not self.broker.config.auto_create_topics or template is None or not template.perm & PERM_INHERIT:
            raise RequestError(f"topic[{topic}] not exist, apply first please!", ResponseCode.TOPIC_NOT_EXIST)
        return self.create_topic(topic, max(1, min(default_queue_nums, template.write_queue_nums)))

    def ensure_retry_topic(self, group: str) -> TopicConfig:
        return self.topic_config(retry_topic(group)) or self.create_topic(retry_topic(group),
                                                                          self.settings.retry_queue_nums)

    def ensure_system_topic(self, topic: str) -> TopicConfig:
        """A topic of the broker's own (one queue)."""
        return self.topic_config(topic) or self.create_topic(topic, 1)

    def ensure_dlq_topic(self, group: str) -> TopicConfig:
        """One queue, readable and writable as Apache RocketMQ 5 makes it (4.x made it write-only)."""
        return self.topic_config(dlq_topic(group)) or self.create_topic(dlq_topic(group), 1)

    # -- storing ----------------------------------------------------------------------------------------------

    def put(self, topic: str, queue_id: int, items: list[tuple[Any, dict[str, str], int]], born_timestamp: int,
            born_host: bytes | None, sys_flag: int = 0, reconsume_times: int = 0,
            delay_level: int = 0) -> PutMessageResult:
        """Append messages (body, properties, flag) to one queue, at consecutive offsets. A single message with
        a delay level goes through SCHEDULE_TOPIC_XXXX first."""
        if delay_level > 0 and len(items) == 1:
            level = min(delay_level, self.schedule.max_level)
            body, properties, flag = items[0]
            properties = dict(properties, **{PROPERTY_DELAY: str(level), PROPERTY_REAL_TOPIC: topic,
                                             PROPERTY_REAL_QUEUE_ID: str(queue_id)})
            items = [(body, properties, flag)]
            topic, queue_id = SCHEDULE_TOPIC, level - 1
        store = self.broker.store
        batch = store.commit_log.new_batch(topic, queue_id, sys_flag, reconsume_times)
        try:
            for body, properties, flag in items:
                tags = properties.get(PROPERTY_TAGS)
                batch.add(body, store_codec.encode_properties(properties),
                          store_codec.tags_hash_code(tags) if tags else 0, born_timestamp, flag,
                          properties.get(PROPERTY_KEYS), properties.get(PROPERTY_UNIQ_KEY), born_host)
        except (TypeError, ValueError) as exc:
            raise RequestError(f"message refused: {exc}", ResponseCode.MESSAGE_ILLEGAL) from None
        return self.append(batch)

    def append(self, batch: MessageBatch) -> PutMessageResult:
        """Store a filled batch and count it."""
        result = self.broker.store.append_batch(batch)
        self.broker.stats.put(batch.topic, batch.count, result.size)
        return result

    def deliver_scheduled(self, message: StoredMessage, topic: str, queue_id: int) -> None:
        # The message keeps its DELAY property, as Apache RocketMQ 5 delivers it.
        properties = message.properties
        config = self.topic_config(topic)
        if config is not None and config.write_queue_nums:
            queue_id %= config.write_queue_nums
        self.put(topic, queue_id, [(message.body, properties, message.flag)], message.born_timestamp,
                 message.born_host_bytes, message.sys_flag, message.reconsume_times)

    @staticmethod
    def delay_level(properties: dict[str, str]) -> int:
        """The DELAY level a producer asked for (0: none)."""
        level = properties.get(PROPERTY_DELAY, "")
        return int(level) if level.isdigit() else 0

    def random_queue(self, config: TopicConfig) -> int:
        return random.randrange(max(1, config.write_queue_nums))

    # -- FrontEnd ---------------------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {"rocketmq": dict(self.clients.snapshot(), held_pulls=self.hold.held)}

    def close(self) -> None:
        self._closed = True
        self._periodic.stop()
        for listener in self.remoting_listeners:
            listener.close()
        self.hold.close()
        self.schedule.close()
        if self._registrar is not None:
            self._unregister_remotely(self._registrar)

    def _unregister_remotely(self, registrar: RemotingClient) -> None:
        s = self.settings
        fields = {"brokerName": s.broker_name, "brokerAddr": self.address, "clusterName": s.cluster_name,
                  "brokerId": s.broker_id}
        futures = [registrar.invoke(address, UNREGISTER_BROKER, fields) for address in s.namesrv_addr]
        for address, future in zip(s.namesrv_addr, futures):
            try:
                future.result(UNREGISTER_TIMEOUT_S)
            except Exception as exc:      # the namesrv drops us after two silent minutes anyway
                log.warning("unregistering from the namesrv at %s failed: %s", address, exc)
        registrar.close()
