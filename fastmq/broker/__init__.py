"""fastmq.broker: an embedded single-node broker on the fastmq store, with a Kafka front end.

    from fastmq.broker import EmbeddedBroker
    with EmbeddedBroker() as broker:                # temporary directory, free port on 127.0.0.1
        run_anything_kafka(broker.bootstrap_servers)

`fastmq broker --data-dir DIR --listen kafka://127.0.0.1:9092` runs one as a server. The core (topics, offsets,
groups, producer state, statistics) knows no wire format; each listener names the protocol it speaks, and the
front end of that protocol (fastmq.broker.kafka is the first; see fastmq.broker.frontends) serves it.
"""
from fastmq.broker.broker import Broker, EmbeddedBroker, read_stats
from fastmq.broker.config import BrokerConfig, ListenerConfig
from fastmq.broker.process import BrokerProcess

__all__ = ["Broker", "BrokerConfig", "BrokerProcess", "EmbeddedBroker", "ListenerConfig", "read_stats"]
