"""fastmq.broker: an embedded single-node broker on the fastmq store, with a Kafka front end.

    from fastmq.broker import EmbeddedBroker
    with EmbeddedBroker() as broker:                # temporary directory, free port on 127.0.0.1
        run_anything_kafka(broker.bootstrap_servers)

`fastmq broker --data-dir DIR --listen 127.0.0.1:9092` runs one as a server. The core (topics, offsets, groups,
producer state, statistics) knows no wire format; fastmq.broker.kafka is the first front end on it.
"""
from fastmq.broker.broker import Broker, EmbeddedBroker, read_stats
from fastmq.broker.config import BrokerConfig, ListenerConfig
from fastmq.broker.process import BrokerProcess

__all__ = ["Broker", "BrokerConfig", "BrokerProcess", "EmbeddedBroker", "ListenerConfig", "read_stats"]
