"""The settings kafka-python's three clients (KafkaProducer, KafkaConsumer, KafkaAdminClient) share, and
how every compat class checks its keyword arguments: one place for what is common to all three.

kafka-python 3.0.12's three DEFAULT_CONFIGs agree on these 38 keys (only client_id's default differs);
each compat class adds its own keys on top.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka.client import CLIENT_OPTIONS


class Unset:
    """Marks a kafka-python default whose value is an object made per client (socket options, callbacks)."""


CONNECTION_DEFAULTS: dict[str, Any] = {
    "bootstrap_servers": "localhost",
    "client_id": None,
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 30000,
    "max_in_flight_requests_per_connection": 5,
    "connections_max_idle_ms": 9 * 60 * 1000,
    "metadata_max_age_ms": 300000,
    "receive_buffer_bytes": None,
    "send_buffer_bytes": None,
    "receive_message_max_bytes": 100_000_000,
    "socket_options": Unset,
    "client_dns_lookup": "use_all_dns_ips",
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "ssl_check_hostname": True,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_crlfile": None,
    "ssl_password": None,
    "api_version": None,
    "bootstrap_timeout_ms": 30000,
    "metric_reporters": [],
    "metrics_num_samples": 2,
    "metrics_sample_window_ms": 30000,
    "selector": None,
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "sasl_kerberos_name": None,
    "sasl_kerberos_service_name": "kafka",
    "sasl_kerberos_domain_name": None,
    "sasl_oauth_token_provider": None,
    "proxy_url": None,
    "socks5_proxy": None,
    "kafka_client": None,
}

# Settings whose feature fastmq does not have: asking for it is an error, not a silent no-op.
_UNSUPPORTED = {
    "sasl_oauth_token_provider": "SASL OAUTHBEARER", "proxy_url": "connecting through a proxy",
    "socks5_proxy": "connecting through a SOCKS5 proxy", "kafka_client": "a kafka-python client class",
}
_client_numbers = itertools.count(1)
_client_numbers_lock = threading.Lock()


def resolve(configs: dict[str, Any], defaults: dict[str, Any], *, kind: str,
            unknown_error: type[Exception]) -> dict[str, Any]:
    """The full settings of a compat client: defaults, then the caller's keywords (unknown ones raise
    unknown_error, as kafka-python raises there); a missing client_id becomes kafka-python-{kind}-N."""
    unknown = set(configs) - set(defaults)
    if unknown:
        raise unknown_error(f"Unrecognized configs: { {key: configs[key] for key in sorted(unknown)} }")
    config = {key: configs.get(key, value) for key, value in defaults.items()}
    for key, feature in _UNSUPPORTED.items():
        if config.get(key) is not None:
            raise kerrors.KafkaConfigurationError(f"{key}: {feature} is not supported by fastmq yet")
    if config.get("sasl_mechanism") == "GSSAPI":
        raise kerrors.KafkaConfigurationError("sasl_mechanism GSSAPI (Kerberos) is not supported by fastmq")
    if config.get("client_id") in (None, Unset):
        with _client_numbers_lock:
            config["client_id"] = f"kafka-python-{kind}-{next(_client_numbers)}"
    return config


def client_options(config: dict[str, Any], *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The connection settings among `config` that fastmq's KafkaClient takes (ClientConfig's fields)."""
    options = {key: value for key, value in config.items()
               if key in CLIENT_OPTIONS and key not in exclude and value is not Unset}
    if "socket_options" in options:
        options["socket_options"] = list(options["socket_options"])
    return options
