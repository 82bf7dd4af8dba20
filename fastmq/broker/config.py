"""BrokerConfig: what the embedded broker listens on (each listener names its protocol), how it stores, and its
Kafka-facing defaults.

Defaults suit one machine with nothing else installed: loopback, topics created on first use, CommitLog files of
128 MiB taking disk as records arrive (at most 1 MiB reserved ahead of them), no key index
(5 million slots are reserved per index file), a group's first rebalance after 100 ms instead of Kafka's 3 s,
acks=0/1 records fsynced every 10 s (acks=all: fsynced before the answer).
"""
from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path
from typing import Any

from fastmq.broker.frontends import DEFAULT_PROTOCOL, known_protocols
from fastmq.errors import ConfigurationError
from fastmq.io.server import DEFAULT_MAX_CONNECTIONS
from fastmq.io.tls import create_server_context
from fastmq.store import MessageStoreConfig

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclasses.dataclass
class ListenerConfig:
    """One listening socket, the protocol it speaks and how it is secured (Kafka's listeners /
    advertised.listeners entry, for a kafka listener)."""

    host: str = "127.0.0.1"
    port: int = 0                              # 0: a free port, known once the broker started
    security_protocol: str = "PLAINTEXT"
    advertised_host: str | None = None         # what Metadata tells clients (default: host)
    advertised_port: int | None = None         # default: the bound port
    ssl_certfile: str | None = None            # SSL / SASL_SSL: the server's certificate chain
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_cafile: str | None = None              # CA for client certificates
    ssl_client_auth: str = "none"              # Kafka's ssl.client.auth: none, requested, required
    protocol: str = DEFAULT_PROTOCOL           # the front end serving it (fastmq.broker.frontends)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    @property
    def url(self) -> str:
        """protocol://host:port (the port as configured: 0 until the broker bound one)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol}://{host}:{self.port}"

    def server_ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of an SSL / SASL_SSL listener (None for a plaintext one)."""
        if not self.uses_tls:
            return None
        return create_server_context(ssl_certfile=self.ssl_certfile, ssl_keyfile=self.ssl_keyfile,
                                     ssl_password=self.ssl_password, ssl_cafile=self.ssl_cafile,
                                     ssl_client_auth=self.ssl_client_auth)

    def advertised(self, bound: tuple[str, int]) -> tuple[str, int]:
        """What clients are told to connect to, given the bound (host, port)."""
        return self.advertised_host or bound[0], self.advertised_port or bound[1]

    @classmethod
    def parse(cls, text: str) -> ListenerConfig:
        """"host:port", "SCHEME://host:port" or "PROTOCOL+SECURITY://host:port". SCHEME is a protocol
        (kafka://) or a security protocol (SASL_SSL://, Kafka's listener notation, for a kafka listener)."""
        protocol, security = DEFAULT_PROTOCOL, "PLAINTEXT"
        if "://" in text:
            scheme, text = text.split("://", 1)
            name, plus, secured = scheme.partition("+")
            if plus:
                protocol, security = name.lower(), secured.upper()
            elif scheme.lower() in known_protocols():
                protocol = scheme.lower()
            elif scheme.upper() in SECURITY_PROTOCOLS:
                security = scheme.upper()
            else:
                raise ConfigurationError(f"a listener's scheme is a protocol ({', '.join(known_protocols())}), a "
                                         f"security protocol ({', '.join(SECURITY_PROTOCOLS)}) or both joined by "
                                         f"'+', not {scheme!r}")
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigurationError(f"a listener is host:port or SCHEME://host:port, not {text!r}")
        return cls(host=host.strip("[]") or "127.0.0.1", port=int(port), security_protocol=security,
                   protocol=protocol)


# Kafka's broker property names (server.properties) of BrokerConfig fields, for `fastmq broker --override`.
KAFKA_PROPERTIES = {
    "auto.create.topics.enable": "auto_create_topics",
    "num.partitions": "num_partitions",
    "message.max.bytes": "max_message_bytes",
    "socket.request.max.bytes": "max_request_size",
    "fetch.max.bytes": "fetch_max_bytes",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.max.size": "group_max_size",
    "transaction.max.timeout.ms": "transaction_max_timeout_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
}


def kafka_property(name: str, text: str) -> tuple[str, bool | int]:
    """(BrokerConfig field, value) of a Kafka broker property given as text ("true", "false" or an integer)."""
    field_name = KAFKA_PROPERTIES.get(name)
    if field_name is None:
        raise ConfigurationError(f"unknown broker property {name!r}; known: {', '.join(sorted(KAFKA_PROPERTIES))}")
    if field_name == "auto_create_topics":
        if text.lower() not in ("true", "false"):
            raise ConfigurationError(f"{name} is true or false, not {text!r}")
        return field_name, text.lower() == "true"
    try:
        return field_name, int(text)
    except ValueError:
        raise ConfigurationError(f"{name} is an integer, not {text!r}") from None


@dataclasses.dataclass
class BrokerConfig:
    data_dir: str | Path
    listeners: list[ListenerConfig] = dataclasses.field(default_factory=lambda: [ListenerConfig()])
    node_id: int = 0
    # Topics
    auto_create_topics: bool = True            # auto.create.topics.enable: Metadata requests create topics
    num_partitions: int = 1                    # Kafka's num.partitions for auto-created topics
    max_message_bytes: int = 1048588           # Kafka's default max.message.bytes (a batch's size limit)
    index_keys: bool = False                   # put record keys into the store's index (query by key)
    # Groups (Kafka's group.* settings)
    group_initial_rebalance_delay_ms: int = 100
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 1000
    # Producer state
    producer_state_snapshot_interval_ms: int = 10000
    producer_id_expiration_ms: int = 86400000
    # Transactions (Kafka's transaction.max.timeout.ms, transaction.abort.timed.out.transaction.cleanup.interval.ms,
    # transactional.id.expiration.ms)
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_check_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    # Connections
    max_request_size: int = 104857600          # socket.request.max.bytes
    fetch_max_bytes: int = 57671680            # fetch.max.bytes: the most a Fetch response holds, whatever it asks
    fetch_max_sessions: int = 1000             # max.incremental.fetch.session.cache.slots (KIP-227)
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # per listener; checked against RLIMIT_NOFILE at start
    connections_max_idle_ms: int | None = 600000
    max_pending_replies: int = 64              # requests in flight per connection before reading pauses
    # Security: users for SASL (name -> password) and the mechanisms offered
    users: dict[str, str] = dataclasses.field(default_factory=dict)
    sasl_mechanisms: tuple[str, ...] = SASL_MECHANISMS
    scram_iterations: int = 4096
    # Statistics written to {data_dir}/stats.json for `fastmq broker-stats` (0: never)
    stats_interval_ms: int = 5000
    # The store (None: MessageStoreConfig with the sizes and interval above)
    commit_log_file_size: int = 128 << 20
    # How often records acknowledged with acks=0/1 are fsynced; acks=all always waits for its own fsync. Kafka
    # leaves such records to the OS by default (Linux writes them back within ~30 s); RocketMQ's ASYNC_FLUSH
    # fsyncs every 500 ms. Every 10 s bounds what a machine crash takes, and what recovery must replay (the
    # flush advances the checkpoint), without a large fsync competing with clients every second.
    flush_interval_ms: int = 10_000
    # Store files mapped at once, each holding two descriptors; the least recently used beyond it are unmapped
    # and mapped again when read (None: a quarter of RLIMIT_NOFILE, at most 4096).
    max_open_mapped_files: int | None = None
    # Disk use, in percent of the store's file system, above which expired CommitLog files are deleted at once,
    # files are deleted whether expired or not (each one logged as a warning), and writes are refused (RocketMQ's
    # diskMaxUsedSpaceRatio, diskSpaceCleanForciblyRatio, diskSpaceWarningLevelRatio).
    disk_ratios: tuple[int, int, int] = (75, 85, 90)
    store: MessageStoreConfig | None = None
    # Settings of one front end beyond these, by protocol (each front end validates its own, e.g. "rocketmq")
    front_end_options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def validate(self) -> None:
        if not self.listeners:
            raise ConfigurationError("the broker needs at least one listener")
        for listener in self.listeners:
            if listener.protocol not in known_protocols():
                raise ConfigurationError(f"listener {listener.url}: the protocols served are "
                                         f"{', '.join(known_protocols())}")
            if listener.security_protocol not in SECURITY_PROTOCOLS:
                raise ConfigurationError(f"security_protocol must be one of {SECURITY_PROTOCOLS}, "
                                         f"not {listener.security_protocol!r}")
            if listener.uses_tls and not listener.ssl_certfile:
                raise ConfigurationError(f"a {listener.security_protocol} listener needs ssl_certfile")
            if listener.uses_sasl and not self.users:
                raise ConfigurationError(f"a {listener.security_protocol} listener needs users to authenticate")
        for mechanism in self.sasl_mechanisms:
            if mechanism not in SASL_MECHANISMS:
                raise ConfigurationError(f"SASL mechanisms are {SASL_MECHANISMS}, not {mechanism!r}")
        if self.num_partitions < 1:
            raise ConfigurationError("num_partitions must be at least 1")
        if self.max_message_bytes < 1024:
            raise ConfigurationError("max_message_bytes must be at least 1024")
        if not 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ConfigurationError("group session timeouts need 0 < min <= max")
        if self.max_connections < 1:
            raise ConfigurationError("max_connections must be at least 1")
        if self.fetch_max_sessions < 0:
            raise ConfigurationError("fetch_max_sessions must be >= 0")
        if self.flush_interval_ms <= 0:
            raise ConfigurationError("flush_interval_ms must be positive")
        used, forced, full = self.disk_ratios
        if not 0 < used <= forced <= full <= 100:
            raise ConfigurationError(f"disk_ratios {used},{forced},{full}: they must rise, within 1..100 "
                                     f"(expire early, delete whether expired, refuse writes)")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ConfigurationError("group_initial_rebalance_delay_ms must be >= 0")
        if min(self.transaction_max_timeout_ms, self.transaction_abort_check_interval_ms,
               self.transactional_id_expiration_ms) <= 0:
            raise ConfigurationError("the transaction timeouts and intervals must be positive")

    def store_config(self) -> MessageStoreConfig:
        """The store's configuration: the one given, else defaults sized for this broker."""
        if self.store is not None:
            return self.store
        bounds: dict[str, Any] = ({} if self.max_open_mapped_files is None
                                  else {"max_open_mapped_files": self.max_open_mapped_files})
        return MessageStoreConfig(
            **bounds,
            mapped_file_size_commit_log=self.commit_log_file_size,
            flush_interval_commit_log_ms=self.flush_interval_ms,
            flush_commit_log_thorough_interval_ms=max(10_000, self.flush_interval_ms),
            # The store's 4 MiB suits local appends at disk speed; records from the network come slower.
            commit_log_reserve_ahead=1 << 20,
            message_index_enable=self.index_keys,
            disk_max_used_space_ratio=self.disk_ratios[0],
            disk_space_clean_forcibly_ratio=self.disk_ratios[1],
            disk_space_warning_level_ratio=self.disk_ratios[2],
            # One record must hold the largest batch's largest record.
            max_message_size=max(4 << 20, self.max_message_bytes),
        )
