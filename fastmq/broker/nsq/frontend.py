"""The NSQ front end of a broker: nsqd's TCP protocol on every `nsq` listener, over the core's topics and the store.

It owns the channels (fastmq.broker.nsq.channels) of every topic, wakes them when the store gets messages (from
NSQ or from any other front end: a topic written through Kafka reads through NSQ), and scans their in-flight
messages for timeouts every 100 ms, as nsqd's queue scan does.

Channel positions survive a restart: every second (and when the front end closes) each channel's positions
(Channel.positions) are committed as the consumer offsets of a group named after the channel, marked as an NSQ
channel's (the extra value "nsq-channel"); at start every topic's marked groups come back as channels, which
resume there. A Kafka or RocketMQ group of the same name shares those offsets (a channel is a consumer group).

BrokerConfig.front_end_options["nsq"]: {"auth_http_addresses": ["HOST:PORT" or a URL, ...]} turns nsqd's AUTH on
(fastmq.broker.nsq.auth), with "auth_http_request_method": "get" (the default) or "post" as nsqd's
--auth-http-request-method; the auth servers are asked on this front end's worker threads.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Mapping

from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.nsq.auth import REQUEST_METHODS, AuthServerError, AuthState, query_auth_servers
from fastmq.broker.nsq.channels import Channel
from fastmq.broker.nsq.nsqd import NSQDListener
from fastmq.broker.offsets import CommittedOffset
from fastmq.broker.periodic import PeriodicWork
from fastmq.broker.topics import STORE_RULES, Topic, TopicConfigDef, TopicRules
from fastmq.errors import ConfigurationError
from fastmq.store.message import Message

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

SCAN_INTERVAL = 0.1
COMMIT_EVERY = 10                  # scans: channel positions are committed every second
CHANNEL_MARK = ("nsq-channel",)    # the committed offsets' extra value that says "an NSQ channel's"
ORDERED = "nsq.ordered"            # topic config: Youzan's ordered topic (SUB_ORDERED only, PUB with a partition)
EXT = "nsq.ext"                    # topic config: Youzan's ext topic (messages carry JSON ext headers: PUB_EXT,
                                   # dispatch tags and ext filters work on it alone)
AUTH_WORKERS = 4

NSQ_TOPIC_RULES = TopicRules(
    "nsq", STORE_RULES.legal_name, STORE_RULES.name_rule,      # NSQ's own name rule is checked by its commands
    {flag: TopicConfigDef("false", True, lambda value: value in ("true", "false"), fixed=True)
     for flag in (ORDERED, EXT)})


def _ignore(ok: bool) -> None:
    pass


class BadPartition(ValueError):
    """A publish to a partition its topic lacks, or to no partition of an ordered topic."""


class NSQFrontEnd(FrontEnd):
    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.nsqd_listeners: list[NSQDListener] = []
        self.channels: dict[str, dict[str, Channel]] = {}
        self._periodic = PeriodicWork(broker.loop)
        self._scans = 0
        self._committed: dict[tuple[str, str], list[int]] = {}
        options = broker.config.front_end_options.get("nsq", {})
        self.auth_addresses: list[str] = list(options.get("auth_http_addresses") or ())
        self.auth_method: str = options.get("auth_http_request_method") or "get"
        if self.auth_method not in REQUEST_METHODS:
            raise ConfigurationError(f"auth_http_request_method is get or post, not {self.auth_method!r}")
        self._auth_workers: ThreadPoolExecutor | None = None
        broker.topics.add_rules(NSQ_TOPIC_RULES)
        broker.store.add_arrival_listener(self._arrived)
        broker.topics.deletion_listeners.append(self._forget)

    def start(self) -> None:
        for listener in self.listeners:
            self.nsqd_listeners.append(NSQDListener(self, listener))
            self.addresses.append(self.nsqd_listeners[-1].address)
        self.broker.loop.run_in_loop(self._restore_channels, timeout=30)
        self._periodic.every("NSQ channel scan", SCAN_INTERVAL, self._scan)

    def close(self) -> None:
        self._periodic.stop()
        for listener in self.nsqd_listeners:
            listener.close()
        self._commit_positions()
        if self._auth_workers is not None:
            self._auth_workers.shutdown(wait=False)
        self.broker.store.remove_arrival_listener(self._arrived)

    def stats(self) -> dict[str, Any]:
        return {"nsq_channels": {topic: {name: {"depth": channel.depth(), "in_flight": len(channel.in_flight)}
                                         for name, channel in channels.items()}
                                 for topic, channels in self.channels.items()}}

    # ---- topics and channels (loop thread) -----------------------------------------------------------

    def topic(self, name: str) -> Topic:
        return self.broker.topics.get_or_create(name)

    def create_topic(self, name: str, partitions: int | None, *, ordered: bool = False, ext: bool = False) -> None:
        """Create a topic with Youzan's flags, unless it exists (then it stays as it is)."""
        if self.broker.topics.get(name) is None:
            flags = {ORDERED: ordered, EXT: ext}
            self.broker.topics.create(name, partitions, {key: "true" for key, value in flags.items() if value})

    def is_ordered(self, topic: Topic) -> bool:
        return topic.config(ORDERED) == "true"

    def is_ext(self, topic: Topic) -> bool:
        return topic.config(EXT) == "true"

    def partition_to_publish(self, topic_name: str, partition: int | None) -> int:
        """The partition a publish (TCP or HTTP) writes: the one given, which the topic must have, or else 0
        (Youzan's default), which an ordered topic refuses."""
        topic = self.topic(topic_name)
        if partition is None:
            if self.is_ordered(topic):
                raise BadPartition(f"topic {topic_name} is ordered: publish to a partition")
            return 0
        if not 0 <= partition < topic.partitions:
            raise BadPartition(f"topic {topic_name} has no partition {partition}")
        return partition

    def channel(self, topic_name: str, name: str) -> Channel:
        topic = self.topic(topic_name)
        channels = self.channels.setdefault(topic_name, {})
        channel = channels.get(name)
        if channel is None:
            store = self.broker.store
            # nsqd gives the first channel of a topic what the topic kept; later channels start at its end;
            # a channel that was committed before resumes where it was.
            position = store.get_min_offset if not channels else store.get_max_offset
            cursors = []
            for partition in range(topic.partitions):
                committed = self.broker.offsets.fetch(name, topic_name, partition)
                cursors.append(max(committed.offset, store.get_min_offset(topic_name, partition))
                               if committed is not None and committed.extra == CHANNEL_MARK
                               else position(topic_name, partition))
            channel = channels[name] = Channel(topic_name, name, store, topic.partitions, cursors)
        channel.grow(topic.partitions)
        return channel

    def delete_channel(self, topic_name: str, name: str) -> None:
        channel = self.channels.get(topic_name, {}).pop(name, None)
        if channel is not None:
            self._committed.pop((topic_name, name), None)
            self.broker.offsets.delete(name, [(topic_name, p) for p in range(channel.partitions)])

    def _restore_channels(self) -> None:
        offsets = self.broker.offsets
        for group in sorted(offsets.groups()):
            for topic_name, partitions in offsets.partitions(group).items():
                fetched = offsets.fetch(group, topic_name, partitions[0])
                if (self.broker.topics.get(topic_name) is not None and fetched is not None
                        and fetched.extra == CHANNEL_MARK):
                    self.channel(topic_name, group)

    def _commit_positions(self) -> None:
        """Commit the positions of every channel that moved since the last commit (loop thread)."""
        for topic_name, channels in self.channels.items():
            for name, channel in channels.items():
                positions = channel.positions()
                key = (topic_name, name)
                if self._committed.get(key) != positions:
                    self._committed[key] = positions
                    self.broker.offsets.commit(name, [(topic_name, partition, CommittedOffset(offset, CHANNEL_MARK))
                                                      for partition, offset in enumerate(positions)], _ignore)

    def ask_auth_server(self, secret: str, remote_ip: str, tls: bool, common_name: str,
                        answered: Callable[[AuthState | None, Exception | None], None]) -> None:
        """Ask the auth servers on a worker thread; answered(state, error) runs on the loop thread."""
        if self._auth_workers is None:
            self._auth_workers = ThreadPoolExecutor(AUTH_WORKERS, thread_name_prefix="fastmq-nsq-auth")
        loop = self.broker.loop

        def ask() -> None:
            try:
                state = query_auth_servers(self.auth_addresses, self.auth_method, secret, remote_ip, tls,
                                           common_name)
            except AuthServerError as exc:
                loop.call_soon_threadsafe(answered, None, exc)
            else:
                loop.call_soon_threadsafe(answered, state, None)

        self._auth_workers.submit(ask)

    def append(self, topic_name: str, partition: int, bodies: list[bytes],
               properties: Mapping[str, str] | None = None) -> Any:
        self.topic(topic_name)
        store = self.broker.store
        if properties is None:
            return store.put_messages(topic_name, partition, bodies)
        return store.put_messages(topic_name, partition, [Message(body, properties=properties) for body in bodies])

    def _arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        channels = self.channels.get(topic)
        if channels:
            # After the broker's loop shut down there is nobody to deliver to; the message stays in the store.
            self.broker.loop.call_or_hand_over(self._dispatch, topic)

    def _dispatch(self, topic: str) -> None:
        for channel in self.channels.get(topic, {}).values():
            channel.dispatch()

    def _scan(self) -> None:
        for channels in self.channels.values():
            for channel in channels.values():
                channel.expire()
                channel.dispatch()
        self._scans += 1
        if self._scans % COMMIT_EVERY == 0:
            self._commit_positions()

    def _forget(self, topic: str) -> None:
        self.channels.pop(topic, None)
        for key in [key for key in self._committed if key[0] == topic]:
            del self._committed[key]
