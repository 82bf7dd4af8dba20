"""What a RocketMQ front end is told beyond the core's BrokerConfig: BrokerConfig.front_end_options["rocketmq"],
with RocketMQ's broker.conf names in snake case.

    EmbeddedBroker(listeners=[...], front_end_options={"rocketmq": {"broker_name": "broker-b",
                                                                      "message_delay_level": "1s 2s"}})
"""
from __future__ import annotations

import dataclasses
from typing import Any

from fastmq.broker.rocketmq.schedule import DEFAULT_DELAY_LEVELS, parse_delay_levels
from fastmq.errors import ConfigurationError


@dataclasses.dataclass(frozen=True)
class RocketMQSettings:
    broker_name: str = "broker-a"
    cluster_name: str = "DefaultCluster"
    broker_id: int = 0                        # 0: master (the only role this broker plays)
    default_topic: str = "TBW102"             # the template producers name for topics created on first send
    default_topic_queue_nums: int = 8         # queues of the template (a new topic takes the smaller number)
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    max_pull_hold_ms: int = 15_000            # brokerSuspendMaxTimeMillis: the longest a PULL is held
    register_interval_ms: int = 30_000        # how often the broker registers with the namesrv (a heartbeat)
    max_reconsume_times: int = 16             # before %DLQ%, when a send-back does not say
    retry_queue_nums: int = 1                 # queues of a group's %RETRY% topic
    transaction_timeout_ms: int = 6_000       # a half message undecided this long is checked back
    transaction_check_interval_ms: int = 30_000   # how often undecided half messages are looked at
    transaction_check_max: int = 15           # checks of one half message before it is dropped
    acl_enable: bool = False                  # requests must be signed by one of the broker's users (acl.py)
    acl_file: str = ""                        # or by an account of this file in plain_acl.yml's shape (ACL on)
    # Name servers of other processes to register with ("host:port", or RocketMQ's "a:9876;b:9876"); a namesrv
    # listener of this broker is always told, in-process.
    namesrv_addr: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RocketMQSettings:
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = set(options) - names
        if unknown:
            raise ConfigurationError(f"unknown rocketmq option(s) {sorted(unknown)}; known: {sorted(names)}")
        options = dict(options)
        addresses = options.get("namesrv_addr", ())
        if isinstance(addresses, str):
            addresses = [address for address in addresses.split(";") if address]
        options["namesrv_addr"] = tuple(addresses)
        for address in options["namesrv_addr"]:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigurationError(f"namesrv_addr holds host:port addresses, not {address!r}")
        settings = cls(**options)
        try:
            parse_delay_levels(settings.message_delay_level)
        except ValueError as exc:
            raise ConfigurationError(f"message_delay_level: {exc}") from None
        if settings.default_topic_queue_nums < 1 or settings.retry_queue_nums < 1:
            raise ConfigurationError("queue numbers must be at least 1")
        if min(settings.max_pull_hold_ms, settings.register_interval_ms, settings.transaction_check_interval_ms) <= 0:
            raise ConfigurationError("max_pull_hold_ms, register_interval_ms and transaction_check_interval_ms "
                                     "must be positive")
        if settings.transaction_timeout_ms < 0 or settings.transaction_check_max < 0:
            raise ConfigurationError("transaction_timeout_ms and transaction_check_max cannot be negative")
        return settings
