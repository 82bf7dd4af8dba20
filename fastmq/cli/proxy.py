"""`fastmq proxy`: the HTTP proxy (fastmq.proxy) in front of a Kafka cluster, or of an embedded broker it starts
when no --bootstrap-servers is given; consumer state in the Redis of --redis."""
from __future__ import annotations

import argparse
import sys

from fastmq.cli.failure import CommandError, ExitCode

READY_PREFIX = "fastmq proxy listening on "


def _config(args: argparse.Namespace):
    from fastmq.proxy.config import ConfigError, ProxyConfig

    try:
        config = ProxyConfig.load(args.config) if args.config else ProxyConfig()
    except ConfigError as exc:
        raise CommandError(str(exc), ExitCode.USAGE) from None
    for name in ("redis_url", "namespace", "bootstrap_servers", "admin_token"):
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    return config


def run_process(config, host: str, port: int, log_level: str) -> None:
    """One proxy process (the target of each spawned process with --processes)."""
    from fastmq.proxy.kafka_backend import KafkaBackend
    from fastmq.proxy.server import serve, setup_logging

    setup_logging(log_level)
    if not serve(config, KafkaBackend(config.bootstrap_servers, linger_ms=config.producer_linger_ms), host, port,
                 log_level=log_level):
        raise CommandError("the proxy did not start (see the log above: Redis or the broker did not answer)",
                           ExitCode.FAILED)


def run_proxy(args: argparse.Namespace) -> int:
    from fastmq.proxy.server import serve_processes

    config = _config(args)
    host, _, port_text = args.listen.rpartition(":")
    if not host or not port_text.isdigit():
        raise CommandError(f"--listen wants HOST:PORT, not {args.listen!r}", ExitCode.USAGE)
    if args.processes < 1:
        raise CommandError("--processes must be at least 1", ExitCode.USAGE)
    broker = None
    if config.bootstrap_servers is None:
        from fastmq.broker import EmbeddedBroker
        broker = EmbeddedBroker(args.data_dir).start()
        config.bootstrap_servers = broker.bootstrap_servers
        print(f"embedded broker on {broker.bootstrap_servers}", file=sys.stderr, flush=True)
    try:
        print(f"{READY_PREFIX}http://{host}:{port_text} ({args.processes} process(es))", file=sys.stderr,
              flush=True)
        if args.processes == 1 and broker is None:
            run_process(config, host, int(port_text), args.log_level)
            return 0
        code = serve_processes(args.processes, run_process, (config, host, int(port_text), args.log_level))
        return ExitCode.FAILED if code else 0
    finally:
        if broker is not None:
            broker.close()


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    proxy = commands.add_parser("proxy", help="run the HTTP proxy: produce and consume over HTTP, state in Redis")
    proxy.add_argument("--config", metavar="FILE", help="TOML settings and registered producers/consumers "
                                                        "(see fastmq.proxy.config)")
    proxy.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT", help="default 127.0.0.1:8080")
    proxy.add_argument("--processes", type=int, default=1, metavar="N",
                       help="proxy processes sharing the port (SO_REUSEPORT); default 1")
    proxy.add_argument("--redis", dest="redis_url", metavar="URL", help="default redis://127.0.0.1:6379/0")
    proxy.add_argument("--namespace", help="prefix of every Redis key (default fastmq:proxy)")
    proxy.add_argument("-b", "--bootstrap-servers", help="the Kafka cluster; without it an embedded broker runs")
    proxy.add_argument("--data-dir", help="the embedded broker's directory (default: a temporary one)")
    proxy.add_argument("--admin-token", help="the admin API's token (prefer the config file: argv is visible)")
    proxy.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    proxy.set_defaults(func=run_proxy)
