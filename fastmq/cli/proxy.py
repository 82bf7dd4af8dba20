"""`fastmq proxy`: the HTTP proxy (fastmq.proxy) in front of a Kafka cluster (--backend kafka, the default) or a
RocketMQ cluster (--backend rocketmq), or of an embedded broker it starts when neither --bootstrap-servers nor
--namesrv is given; consumer state in the Redis of --redis."""
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
    for name in ("redis_url", "namespace", "backend", "bootstrap_servers", "namesrv_addr", "admin_token"):
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    return config


def _backend(config):
    from fastmq.proxy.config import ROCKETMQ

    if config.backend == ROCKETMQ:
        from fastmq.proxy.rocketmq_backend import RocketMQBackend
        return RocketMQBackend(config.namesrv_addr)
    from fastmq.proxy.kafka_backend import KafkaBackend
    return KafkaBackend(config.bootstrap_servers, linger_ms=config.producer_linger_ms)


def _embedded_broker(config, data_dir: str | None):
    """An embedded broker for the backend, its address put in the config."""
    from fastmq.broker import EmbeddedBroker
    from fastmq.broker.config import ListenerConfig
    from fastmq.proxy.config import ROCKETMQ

    if config.backend == ROCKETMQ:
        broker = EmbeddedBroker(data_dir, listeners=[ListenerConfig(port=0), ListenerConfig(port=0, protocol="namesrv"),
                                                     ListenerConfig(port=0, protocol="rocketmq")]).start()
        config.namesrv_addr = broker.address("namesrv")
        print(f"embedded broker, namesrv on {config.namesrv_addr}", file=sys.stderr, flush=True)
    else:
        broker = EmbeddedBroker(data_dir).start()
        config.bootstrap_servers = broker.bootstrap_servers
        print(f"embedded broker on {broker.bootstrap_servers}", file=sys.stderr, flush=True)
    return broker


def run_process(config, host: str, port: int, log_level: str) -> None:
    """One proxy process (the target of each spawned process with --processes)."""
    from fastmq.proxy.server import serve, setup_logging

    setup_logging(log_level)
    if not serve(config, _backend(config), host, port, log_level=log_level):
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
    from fastmq.proxy.config import ROCKETMQ

    broker = None
    if (config.namesrv_addr if config.backend == ROCKETMQ else config.bootstrap_servers) is None:
        broker = _embedded_broker(config, args.data_dir)
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
    proxy.add_argument("--backend", choices=("kafka", "rocketmq"), help="the broker's protocol (default kafka)")
    proxy.add_argument("-b", "--bootstrap-servers", help="the Kafka cluster; without it an embedded broker runs")
    proxy.add_argument("--namesrv", dest="namesrv_addr",
                       help="the RocketMQ namesrv(s) of --backend rocketmq; without it an embedded broker runs")
    proxy.add_argument("--data-dir", help="the embedded broker's directory (default: a temporary one)")
    proxy.add_argument("--admin-token", help="the admin API's token (prefer the config file: argv is visible)")
    proxy.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    proxy.set_defaults(func=run_proxy)
