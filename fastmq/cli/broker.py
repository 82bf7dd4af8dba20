"""`fastmq broker` (run the embedded broker as a server) and `fastmq broker-stats` (what a running one counts)."""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sys
import threading
from typing import Any

from fastmq.cli.failure import CommandError, ExitCode
from fastmq.cli.progress import format_rate, print_table
from fastmq.io.server import DEFAULT_MAX_CONNECTIONS

# The collector of the broker's own process (an application's EmbeddedBroker leaves the application's alone). A
# Fetch over thousands of partitions makes thousands of short-lived objects: with CPython's default young
# threshold (700 allocations) one 1M-record read of a 4096-partition topic ran ~1,000 young collections, whose
# survivors started 2-3 full ones over the whole heap: 230 ms of the broker's ~760 ms of CPU for the read. At
# 20,000: 18 ms and no full collection. What is alive once the broker has started (modules, the recovered store)
# stays alive: frozen, full collections no longer walk it.
YOUNG_COLLECTION_THRESHOLD = 20_000

# The flags that add a listener of one protocol: --rocketmq HOST:PORT is --listen rocketmq://HOST:PORT.
PROTOCOL_LISTENER_FLAGS = (
    ("--rocketmq", "rocketmq", "a RocketMQ broker"),
    ("--namesrv", "namesrv", "a RocketMQ name server"),
    ("--tubemq-master", "tubemq-master", "a TubeMQ master"),
    ("--tubemq-broker", "tubemq-broker", "a TubeMQ broker"),
    ("--nsqd", "nsq", "an NSQ (nsqd TCP protocol)"),
    ("--nsqd-http", "nsq-http", "nsqd's HTTP API (/pub, /mpub, /stats, ...)"),
    ("--nsqlookupd-http", "nsqlookupd-http", "nsqlookupd's HTTP API (/lookup, ...)"),
)


def _users(args: argparse.Namespace) -> dict[str, str]:
    """The credentials file's users, then $FASTMQ_BROKER_USERS's, then --user's (each may override the last)."""
    from fastmq.broker.auth import read_users

    users = read_users(args.users_file)
    for item in args.user:
        name, sep, password = item.partition("=")
        if not sep or not name:
            raise CommandError(f"--user wants name=password, not {item!r}", ExitCode.USAGE)
        users[name] = password
    return users


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    from fastmq.broker.config import kafka_property

    settings: dict[str, Any] = {"auto_create_topics": not args.no_auto_create, "num_partitions": args.partitions,
                                "max_message_bytes": args.max_message_bytes}
    for item in args.override:
        name, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"--override wants NAME=VALUE, not {item!r}", ExitCode.USAGE)
        field_name, setting = kafka_property(name, value)
        settings[field_name] = setting
    return settings


def _disk_ratios(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3 or not all(part.strip().isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"wants three whole percentages USED,FORCED,FULL, not {text!r}")
    used, forced, full = (int(part) for part in parts)
    return used, forced, full


def broker_config(args: argparse.Namespace) -> Any:
    from fastmq.broker import BrokerConfig, ListenerConfig

    listeners = []
    texts = (args.listen or []) + [f"{scheme}://{address}" for flag, scheme, _ in PROTOCOL_LISTENER_FLAGS
                                   for address in getattr(args, flag.lstrip("-").replace("-", "_"))]
    for text in texts or ["127.0.0.1:9092"]:
        listener = ListenerConfig.parse(text)
        listener.ssl_certfile, listener.ssl_keyfile = args.ssl_certfile, args.ssl_keyfile
        listener.ssl_password, listener.ssl_cafile = args.ssl_password, args.ssl_cafile
        listener.ssl_client_auth = args.ssl_client_auth
        listeners.append(listener)
    if args.advertise:
        host, _, port = args.advertise.rpartition(":")
        listeners[0].advertised_host, listeners[0].advertised_port = host, int(port)
    return BrokerConfig(data_dir=args.data_dir, listeners=listeners, users=_users(args),
                        commit_log_file_size=args.commit_log_file_size, flush_interval_ms=args.flush_interval_ms,
                        index_keys=args.index_keys, max_connections=args.max_connections,
                        max_open_mapped_files=args.max_open_mapped_files, disk_ratios=args.disk_ratios,
                        front_end_options=_front_end_options(args), **_overrides(args))


def _front_end_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    if args.nsqd_auth_http_address:
        options["nsq"] = {"auth_http_addresses": args.nsqd_auth_http_address,
                          "auth_http_request_method": args.nsqd_auth_http_request_method}
    if args.rocketmq_acl:
        options["rocketmq"] = {"acl_enable": True}
    if args.rocketmq_acl_file:
        options["rocketmq"] = {"acl_file": args.rocketmq_acl_file}
    return options


def run_broker(args: argparse.Namespace) -> int:
    from fastmq.broker import Broker
    from fastmq.broker.process import READY_PREFIX

    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    if args.stop_with_stdin:
        threading.Thread(target=_stop_at_end_of_input, args=(stop,), name="fastmq-stdin-watch", daemon=True).start()
    broker = Broker(broker_config(args))
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    try:
        for listener, (host, port) in broker.listeners:
            print(f"{READY_PREFIX}{listener.security_protocol}://{host}:{port}", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        broker.close()
    return 0


def _stop_at_end_of_input(stop: threading.Event) -> None:
    # The owner holds the other end of the pipe: it closes when the owner exits, however it exits. A raw read
    # (not sys.stdin's buffered reader, whose lock this thread would hold at interpreter shutdown).
    while os.read(0, 4096):
        pass
    stop.set()


def _stats_rows(snapshot: dict[str, Any]) -> list[list[str]]:
    rows = []
    for topic, meters in snapshot.get("topics", {}).items():
        for kind in ("put", "get"):
            meter = meters.get(kind)
            if meter:
                rows.append([topic, kind, str(meter["messages"]), f"{meter['bytes'] / 1e6:.1f}",
                             format_rate(meter["tps_10s"]), format_rate(meter["tps_60s"])])
    for group, topics in snapshot.get("groups", {}).items():
        for topic, meter in topics.items():
            rows.append([f"{group or '(no group)'} <- {topic}", "get", str(meter["messages"]),
                         f"{meter['bytes'] / 1e6:.1f}", format_rate(meter["tps_10s"]), format_rate(meter["tps_60s"])])
    return rows


def run_stats(args: argparse.Namespace) -> int:
    from fastmq.broker import read_stats

    try:
        snapshot = read_stats(args.data_dir)
    except (OSError, ValueError) as exc:
        print(f"fastmq: no statistics in {args.data_dir} ({exc}); is a broker running there?", file=sys.stderr)
        return 1
    if args.json or args.output == "json":
        print(json.dumps(snapshot, indent=2, sort_keys=True))
        return 0
    clients = snapshot.get("clients", {})
    print(f"uptime {snapshot.get('uptime_s', 0)} s, {clients.get('connections', 0)} connection(s): "
          f"{clients.get('producers', 0)} producing, {clients.get('consumers', 0)} consuming")
    print_table(["topic / group", "kind", "messages", "MB", "TPS 10 s", "TPS 60 s"], _stats_rows(snapshot))
    for group, members in sorted(clients.get("members_by_group", {}).items()):
        print(f"group {group}: {members} member(s)")
    return 0


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    broker = commands.add_parser("broker", help="run the embedded broker (Kafka protocol) on a data directory")
    broker.add_argument("--data-dir", required=True, help="the store's directory (created if missing)")
    broker.add_argument("--listen", action="append", metavar="[SCHEME://]HOST:PORT",
                        help="a listener (repeatable); SCHEME is the protocol (kafka), a security protocol "
                             "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL: kafka) or both, e.g. kafka+SSL; "
                             "default 127.0.0.1:9092, port 0 picks a free one")
    for flag, scheme, what in PROTOCOL_LISTENER_FLAGS:
        broker.add_argument(flag, action="append", default=[], metavar="HOST:PORT",
                            help=f"{what} listener (as --listen {scheme}://HOST:PORT)")
    broker.add_argument("--advertise", metavar="HOST:PORT", help="the address Metadata gives clients")
    broker.add_argument("--rocketmq-acl", action="store_true",
                        help="RocketMQ clients must sign their requests (ACL 1.0) as one of the users of "
                             "--users-file / --user (access key = name, secret key = password)")
    broker.add_argument("--rocketmq-acl-file", metavar="PATH",
                        help="RocketMQ ACL 1.0 with the accounts, permissions and white addresses of this file "
                             "(plain_acl.yml's shape; YAML needs PyYAML, or the same as JSON)")
    broker.add_argument("--nsqd-auth-http-address", action="append", default=[], metavar="HOST:PORT",
                        help="nsqd's --auth-http-address (repeatable: asked in turn): NSQ clients must AUTH, "
                             "checked by these auth servers")
    broker.add_argument("--nsqd-auth-http-request-method", choices=["get", "post"], default="get",
                        help="nsqd's --auth-http-request-method: how the auth servers are asked (default get)")
    broker.add_argument("--partitions", type=int, default=1, help="partitions of auto-created topics (default 1)")
    broker.add_argument("--no-auto-create", action="store_true",
                        help="do not create topics on first use (as --override auto.create.topics.enable=false)")
    broker.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                        help="a Kafka broker property, e.g. auto.create.topics.enable=false or num.partitions=3 "
                             "(repeatable; see fastmq.broker.config.KAFKA_PROPERTIES)")
    broker.add_argument("--max-message-bytes", type=int, default=1048588)
    broker.add_argument("--commit-log-file-size", type=int, default=128 << 20)
    broker.add_argument("--flush-interval-ms", type=int, default=10_000,
                        help="fsync acks=0/1 records this often (default 10 s; acks=all always waits for its "
                             "fsync)")
    broker.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                        help=f"connections each listener serves at once (default {DEFAULT_MAX_CONNECTIONS}); the "
                             f"open-file limit is raised to fit, or the broker says what to change")
    broker.add_argument("--index-keys", action="store_true", help="index record keys (RocketMQ query by key)")
    broker.add_argument("--max-open-mapped-files", type=int, metavar="N",
                        help="store files kept mapped at once, two descriptors each; the least recently read "
                             "beyond N are unmapped (default: a quarter of the open-file limit, at most 4096)")
    broker.add_argument("--disk-ratios", type=_disk_ratios, default=(75, 85, 90), metavar="USED,FORCED,FULL",
                        help="disk use in percent above which expired CommitLog files go at once, files go "
                             "whether expired or not (a warning each), and writes are refused (default 75,85,90)")
    broker.add_argument("--users-file", metavar="PATH",
                        help="SASL users (PLAIN, SCRAM-SHA-256/512), one NAME=PASSWORD a line; also read from "
                             "$FASTMQ_BROKER_USERS")
    broker.add_argument("--user", action="append", default=[], metavar="NAME=PASSWORD",
                        help="a SASL user (repeatable); the password is visible to every local user through ps: "
                             "prefer --users-file or $FASTMQ_BROKER_USERS")
    broker.add_argument("--ssl-certfile")
    broker.add_argument("--ssl-keyfile")
    broker.add_argument("--ssl-password")
    broker.add_argument("--ssl-cafile")
    broker.add_argument("--ssl-client-auth", choices=["none", "requested", "required"], default="none")
    broker.add_argument("--log-level", default="warning")
    broker.add_argument("--stop-with-stdin", action="store_true",
                        help="shut down when standard input closes (ties the broker to the process that started it)")
    broker.set_defaults(func=run_broker)

    stats = commands.add_parser("broker-stats", help="statistics of the broker running on a data directory")
    stats.add_argument("--data-dir", required=True)
    stats.add_argument("--output", choices=["table", "json"], default="table", help="json: everything")
    stats.add_argument("--json", action="store_true", help="as --output json")
    stats.set_defaults(func=run_stats)
