"""Where a command connects: `-b [SCHEME://]HOST:PORT[,...]` and `--protocol`, and the admin back end that serves
that protocol.

The protocol comes from the address's scheme (kafka://host:port) or from --protocol (default kafka). The
administrative verbs (metadata, topics, groups) call a back end chosen by protocol through BACKENDS: adding a
protocol adds one module there, with the methods of fastmq.cli.kafka_admin.KafkaAdmin.
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any

from fastmq.cli.failure import CommandError, ExitCode

# protocol -> "module:class" of its admin back end
BACKENDS = {"kafka": "fastmq.cli.kafka_admin:KafkaAdmin"}
DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True)
class Endpoint:
    protocol: str | None        # None: the address named none (--protocol decides)
    servers: str                # host:port[,host:port...] without the scheme


def parse_endpoint(text: str) -> Endpoint:
    """An argparse type: `[scheme://]host:port[,host:port...]`; an unknown scheme is a usage error."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return Endpoint(None, text)
    if scheme.lower() not in BACKENDS:
        raise argparse.ArgumentTypeError(f"unknown protocol {scheme!r} in {text!r}; known: {', '.join(BACKENDS)}")
    if not rest:
        raise argparse.ArgumentTypeError(f"no host:port after {scheme}://")
    return Endpoint(scheme.lower(), rest)


def parse_timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a timeout is a positive number of seconds, not {text!r}")
    return value


def add_endpoint_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("-b", "--bootstrap-servers", type=parse_endpoint, required=required,
                        metavar="[kafka://]HOST:PORT[,...]", help="the brokers to ask")
    parser.add_argument("--protocol", choices=sorted(BACKENDS), default=None,
                        help="the protocol the brokers speak (default: the address's scheme, else kafka)")
    parser.add_argument("--timeout", type=parse_timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for a broker to answer (default {DEFAULT_TIMEOUT:g} s)")


def protocol_of(args: argparse.Namespace) -> str:
    endpoint: Endpoint = args.bootstrap_servers
    if endpoint.protocol and args.protocol and endpoint.protocol != args.protocol:
        raise CommandError(f"--protocol {args.protocol} contradicts the address {endpoint.protocol}://", ExitCode.USAGE)
    return endpoint.protocol or args.protocol or "kafka"


def servers_of(args: argparse.Namespace) -> str:
    """The host:port list of -b, for the protocol's own client (rejects an address of another protocol)."""
    protocol = protocol_of(args)
    if protocol != "kafka":
        raise CommandError(f"this command speaks kafka, not {protocol}", ExitCode.USAGE)
    return args.bootstrap_servers.servers


def open_admin(args: argparse.Namespace, client_options: dict[str, Any]) -> Any:
    """The admin back end of the endpoint's protocol, connected (or CommandError: nothing answered)."""
    module_name, _, class_name = BACKENDS[protocol_of(args)].partition(":")
    backend = getattr(importlib.import_module(module_name), class_name)
    return backend(args.bootstrap_servers.servers, args.timeout, client_options)


def prepare_topics(args: argparse.Namespace, topics: list[str], client_options: dict[str, Any], *,
                   create: bool) -> None:
    """Check that the broker answers and that the topics exist before any record moves; with `create`, a
    missing topic is asked for as a producer would (brokers that create topics on first use create it), and
    the command says so. CommandError otherwise: the command would wait for nothing."""
    import sys

    servers = args.bootstrap_servers.servers
    with open_admin(args, client_options) as admin:
        for topic in topics:
            if admin.topic_exists(topic):
                continue
            if create and admin.create_on_first_use(topic):
                print(f"fastmq: created topic {topic} (the broker creates topics on first use: "
                      "auto.create.topics.enable)", file=sys.stderr)
                continue
            advice = (f"the broker does not create topics on first use (auto.create.topics.enable=false); "
                      f"create it with `fastmq topics create {topic} -b {servers}`" if create
                      else f"`fastmq topics list -b {servers}` lists the topics")
            raise CommandError(f"no such topic: {topic!r} at {servers}: {advice}", ExitCode.NOT_FOUND)
