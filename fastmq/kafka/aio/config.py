"""aiokafka's connection settings -> fastmq's ClientConfig options, shared by producer, consumer and admin."""
from __future__ import annotations

import asyncio
from typing import Any, Mapping

from fastmq.kafka import errors as kerrors

# aiokafka's request timeout default (fastmq's own is Kafka's 30 s).
REQUEST_TIMEOUT_MS = 40000


# The connection settings of aiokafka's constructors that ClientConfig takes under the same name.
_CONNECTION = ("bootstrap_servers", "request_timeout_ms", "retry_backoff_ms", "metadata_max_age_ms",
               "connections_max_idle_ms", "security_protocol", "ssl_context")


def client_options(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The ClientConfig options among the arguments of an aiokafka constructor (its locals()). api_version and
    the Kerberos names have no effect (fastmq negotiates versions; choosing GSSAPI fails in validation)."""
    if arguments.get("sasl_oauth_token_provider") is not None:
        raise kerrors.KafkaConfigurationError("sasl_oauth_token_provider: OAUTHBEARER is not supported by fastmq")
    options = {name: arguments[name] for name in _CONNECTION}
    if arguments["client_id"] is not None:
        options["client_id"] = arguments["client_id"]
    if arguments["security_protocol"].startswith("SASL"):
        for name in ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password"):
            options[name] = arguments[name]
    return options

def bound_loop(loop: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop:
    """The loop a client works on: the one given (aiokafka's deprecated loop=) or the running one."""
    if loop is not None:
        return loop
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("create fastmq.kafka.aio clients inside a running event loop (in a coroutine)") from None

