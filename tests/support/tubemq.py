"""The embedded broker as a TubeMQ master + broker for tests, and what the tests of TubeMQ share."""
from __future__ import annotations

from dataclasses import dataclass

from fastmq.broker.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig


@dataclass
class TubeMQCluster:
    embedded: EmbeddedBroker

    @property
    def master(self) -> str:
        host, port = self.embedded.addresses[0]
        return f"{host}:{port}"

    @property
    def broker_address(self) -> tuple[str, int]:
        return self.embedded.addresses[1]

    def front_end(self, role: str):
        """role: "master" or "broker"."""
        return self.embedded.broker.front_end(f"tubemq-{role}")


def start_tubemq(partitions: int = 4, *, with_kafka: bool = False, **options) -> TubeMQCluster:
    """An embedded broker with a TubeMQ master and broker listener (and a Kafka one after them, if asked)."""
    listeners = [ListenerConfig(protocol="tubemq-master"), ListenerConfig(protocol="tubemq-broker")]
    if with_kafka:
        listeners.append(ListenerConfig(protocol="kafka"))
    return TubeMQCluster(EmbeddedBroker(listeners=listeners, num_partitions=partitions, **options).start())
