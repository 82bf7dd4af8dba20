"""Front ends: the protocols the broker speaks, and the registry the core finds them in by name.

A front end is one protocol's side of the broker: its listening sockets, its requests, and whatever per-broker
state that protocol needs on top of the core (Kafka's partition logs, fetch sessions and transactions, for
instance). The core (topics, offsets, groups, producer state, statistics) knows no protocol, and never imports a
front end: a listener names its protocol (ListenerConfig.protocol, `kafka://127.0.0.1:9092` on the command
line), and the core asks front_end_class(name) for the class, which imports the front end's package on first use.

A new protocol plugs in by adding a subpackage fastmq/broker/<name>/ whose __init__ calls
register("<name>", ItsFrontEnd), and one line in FRONT_END_PACKAGES below.
"""
from __future__ import annotations

import abc
import importlib
from typing import TYPE_CHECKING, Any

from fastmq.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.broker.broker import Broker
    from fastmq.broker.config import ListenerConfig

# Protocol name -> the package that registers its front end when imported (imported only when a listener asks).
FRONT_END_PACKAGES: dict[str, str] = {
    "kafka": "fastmq.broker.kafka",
    "tubemq-master": "fastmq.broker.tubemq", "tubemq-broker": "fastmq.broker.tubemq",
    "rocketmq": "fastmq.broker.rocketmq", "namesrv": "fastmq.broker.rocketmq",
    **dict.fromkeys(("nsq", "nsq-http", "nsqlookupd-http"), "fastmq.broker.nsq"),
}
DEFAULT_PROTOCOL = "kafka"


class FrontEnd(abc.ABC):
    """One protocol served by a broker, on every listener that names it.

    The broker creates one per protocol in use, in this order, each step on the thread named:
    - __init__(broker, listeners) on the starting thread, before the I/O loop runs: build the protocol's state
      on the broker's core services (broker.store, .topics, .offsets, .groups, .stats, .connections, .writer,
      .loop); open no socket yet. Register for what the core announces (broker.topics.deletion_listeners,
      broker.store.add_arrival_listener) here.
    - start() on the starting thread, with the I/O loop running: finish recovery (on the loop, through
      broker.loop.run_in_loop), then open the listeners. `addresses` holds the bound (host, port) of each
      listener afterwards, in the order given.
    - upkeep() on the I/O thread, every few seconds (producer state snapshots and the like).
    - stats() on the I/O thread: what the protocol adds to the broker's statistics snapshot.
    - close() on the I/O thread, once: stop listening, answer what waits, write what must survive. It must
      cope with a start() that failed half-way (the broker closes what it created).
    """

    def __init__(self, broker: Broker, listeners: list[ListenerConfig]) -> None:
        self.broker = broker
        self.listeners = listeners
        self.addresses: list[tuple[str, int]] = []

    @abc.abstractmethod
    def start(self) -> None: ...

    def upkeep(self) -> None:
        """Periodic work (nothing by default)."""

    def stats(self) -> dict[str, Any]:
        """Entries added to the statistics snapshot (none by default)."""
        return {}

    @abc.abstractmethod
    def close(self) -> None: ...


_registered: dict[str, type[FrontEnd]] = {}


def register(protocol: str, front_end: type[FrontEnd]) -> None:
    """Called by a front end's package when imported."""
    _registered[protocol] = front_end


def known_protocols() -> tuple[str, ...]:
    return tuple(sorted(set(FRONT_END_PACKAGES) | set(_registered)))


def front_end_class(protocol: str) -> type[FrontEnd]:
    """The front end serving a protocol, its package imported on first use."""
    if protocol not in _registered:
        package = FRONT_END_PACKAGES.get(protocol)
        if package is None:
            raise ConfigurationError(f"no front end speaks {protocol!r}; known: {', '.join(known_protocols())}")
        importlib.import_module(package)
        if protocol not in _registered:
            raise ConfigurationError(f"{package} did not register a front end for {protocol!r}")
    return _registered[protocol]
