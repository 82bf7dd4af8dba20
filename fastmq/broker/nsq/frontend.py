"""The NSQ front end of a broker: nsqd's TCP protocol on every `nsq` listener, over the core's topics and the store.

It owns the channels (fastmq.broker.nsq.channels) of every topic, wakes them when the store gets messages (from
NSQ or from any other front end: a topic written through Kafka reads through NSQ), and scans their in-flight
messages for timeouts every 100 ms, as nsqd's queue scan does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.nsq.channels import Channel
from fastmq.broker.nsq.nsqd import NSQDListener
from fastmq.broker.topics import Topic
from fastmq.store.message import Message

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker

SCAN_INTERVAL = 0.1


class NSQFrontEnd(FrontEnd):
    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        self.nsqd_listeners: list[NSQDListener] = []
        self.channels: dict[str, dict[str, Channel]] = {}
        self._scan_timer: Any = None
        broker.store.add_arrival_listener(self._arrived)
        broker.topics.deletion_listeners.append(self._forget)

    def start(self) -> None:
        for listener in self.listeners:
            self.nsqd_listeners.append(NSQDListener(self, listener))
            self.addresses.append(self.nsqd_listeners[-1].address)
        self._scan_timer = self.broker.loop.call_later(SCAN_INTERVAL, self._scan)

    def close(self) -> None:
        if self._scan_timer is not None:
            self._scan_timer.cancel()
        for listener in self.nsqd_listeners:
            listener.close()
        self.broker.store.remove_arrival_listener(self._arrived)

    def stats(self) -> dict[str, Any]:
        return {"nsq_channels": {topic: {name: {"depth": channel.depth(), "in_flight": len(channel.in_flight)}
                                         for name, channel in channels.items()}
                                 for topic, channels in self.channels.items()}}

    # ---- topics and channels (loop thread) -----------------------------------------------------------

    def topic(self, name: str) -> Topic:
        return self.broker.topics.get_or_create(name)

    def channel(self, topic_name: str, name: str) -> Channel:
        topic = self.topic(topic_name)
        channels = self.channels.setdefault(topic_name, {})
        channel = channels.get(name)
        if channel is None:
            store = self.broker.store
            # nsqd gives the first channel of a topic what the topic kept; later channels start at its end.
            position = store.get_min_offset if not channels else store.get_max_offset
            channel = channels[name] = Channel(topic_name, name, store, topic.partitions,
                                               [position(topic_name, p) for p in range(topic.partitions)])
        channel.grow(topic.partitions)
        return channel

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
            loop = self.broker.loop
            if loop.in_loop_thread():
                self._dispatch(topic)
            else:
                loop.call_soon_threadsafe(self._dispatch, topic)

    def _dispatch(self, topic: str) -> None:
        for channel in self.channels.get(topic, {}).values():
            channel.dispatch()

    def _scan(self) -> None:
        for channels in self.channels.values():
            for channel in channels.values():
                channel.expire()
                channel.dispatch()
        self._scan_timer = self.broker.loop.call_later(SCAN_INTERVAL, self._scan)

    def _forget(self, topic: str) -> None:
        self.channels.pop(topic, None)
