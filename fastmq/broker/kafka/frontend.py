"""The Kafka front end of a broker: what Kafka needs on top of the core, and its listeners.

On the core's topics, offsets, groups and producer state it keeps, in Kafka's terms: the partition logs (Kafka
batches on the store, log start offsets, the time index), the transaction coordinator writing Kafka's markers,
incremental fetch sessions and the Fetch hold; at start-up it replays the producer batch markers kafka_store
wrote into the core's producer state. Every `kafka` listener of the broker serves through it (front.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastmq.broker.kafka._native import kafka_store
from fastmq.broker.config import ListenerConfig
from fastmq.broker.frontends import FrontEnd
from fastmq.broker.kafka.fetch import FetchHold
from fastmq.broker.kafka.fetch_sessions import FetchSessionCache
from fastmq.broker.kafka.front import KafkaListener, handler_table
from fastmq.broker.kafka.log import PartitionLogs
from fastmq.broker.kafka.topic_rules import kafka_topic_rules
from fastmq.broker.transactions import TransactionCoordinator, TransactionSettings

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker


class KafkaFrontEnd(FrontEnd):
    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        super().__init__(broker, listeners)
        config = broker.config
        self.kafka_listeners: list[KafkaListener] = []
        broker.topics.add_rules(kafka_topic_rules(config.max_message_bytes))
        broker.producers.replay(kafka_store.producer_markers)
        self.logs = PartitionLogs(broker.store, broker.producers, broker.stats, broker.writer, config.index_keys)
        self.transactions = TransactionCoordinator(
            broker.loop, self.logs, broker.offsets, broker.writer, broker.producers.allocate_producer_id,
            broker.topics.has_partition, broker.store.root / "config",
            TransactionSettings(config.transaction_max_timeout_ms, config.transaction_abort_check_interval_ms,
                                config.transactional_id_expiration_ms), broker.clock)
        self.fetch_sessions = FetchSessionCache(config.fetch_max_sessions)
        self.fetch_hold = FetchHold(broker.loop)
        broker.store.add_arrival_listener(self.fetch_hold.on_arrival)
        for forget in (self.logs.forget, self.transactions.forget_topic):
            broker.topics.deletion_listeners.append(forget)

    def start(self) -> None:
        self.broker.loop.run_in_loop(self.transactions.start, timeout=60)
        handlers = handler_table()
        for listener in self.listeners:
            self.kafka_listeners.append(KafkaListener(self, listener, handlers))
            self.addresses.append(self.kafka_listeners[-1].address)

    def upkeep(self) -> None:
        self.transactions.trim(self.logs.log_start_offset)

    def stats(self) -> dict[str, Any]:
        logs = self.logs
        return {"partitions": {
            topic.name: [{"partition": p, "log_start_offset": logs.log_start_offset(topic.name, p),
                          "high_watermark": logs.high_watermark(topic.name, p),
                          "last_stable_offset": logs.last_stable_offset(topic.name, p)}
                         for p in range(topic.partitions)] for topic in self.broker.topics.all()}}

    def close(self) -> None:
        for listener in self.kafka_listeners:
            listener.close()
        self.fetch_hold.close()
        self.transactions.close()
