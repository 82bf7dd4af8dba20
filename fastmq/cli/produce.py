"""`fastmq produce` (lines from stdin or files, like kcat -P) and `fastmq bench produce`."""
from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable

from fastmq.cli.failure import CommandError, ExitCode
from fastmq.cli.endpoint import add_endpoint_options, prepare_topics, servers_of
from fastmq.cli.progress import ProgressBar, format_rate, print_table

LATENCY_SAMPLE_EVERY = 997      # one acknowledgement latency sample per this many records (a prime)


def add_producer_options(parser: argparse.ArgumentParser, *, required_servers: bool) -> None:
    add_endpoint_options(parser, required=required_servers)
    parser.add_argument("-z", "--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    parser.add_argument("--acks", choices=["0", "1", "all"], default="all")
    parser.add_argument("--linger-ms", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=262144)
    parser.add_argument("-X", dest="options", action="append", default=[], metavar="name=value",
                        help="any fastmq.kafka.Producer option, e.g. -X security_protocol=SSL (repeatable)")


def parse_client_options(items: list[str]) -> dict[str, Any]:
    """-X name=value items -> client keyword arguments (dots and dashes in names become underscores)."""
    options: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"-X wants name=value, not {item!r}", ExitCode.USAGE)
        options[name.replace(".", "_").replace("-", "_")] = _parse_value(value)
    return options


def producer_options(args: argparse.Namespace) -> dict[str, Any]:
    acks = -1 if args.acks == "all" else int(args.acks)
    options: dict[str, Any] = {"acks": acks, "linger_ms": args.linger_ms, "batch_size": args.batch_size,
                               "compression_type": None if args.compression == "none" else args.compression,
                               "enable_idempotence": acks == -1}
    options.update(parse_client_options(args.options))
    return options


def _parse_value(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


# ---- fastmq produce ---------------------------------------------------------------------------------------

def _lines(sources: list[str]) -> Iterable[bytes]:
    streams: list[BinaryIO] = [sys.stdin.buffer] if not sources or sources == ["-"] else []
    for stream in streams:
        yield from stream
    for path in sources if streams == [] else []:
        with open(path, "rb") as handle:
            yield from handle


def run_produce(args: argparse.Namespace) -> int:
    from fastmq.kafka import Producer

    headers = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"-H wants name=value, not {item!r}", ExitCode.USAGE)
        headers.append((name, value.encode()))
    delimiter = args.key_delimiter.encode() if args.key_delimiter else None
    fixed_key = args.key.encode() if args.key is not None else None
    failures = []
    count = 0
    options = producer_options(args)
    with Producer(servers_of(args), **options) as producer:      # checks the options before any network wait
        prepare_topics(args, [args.topic], options, create=True)
        for line in _lines(args.files):
            value = line[:-1] if line.endswith(b"\n") else line
            key = fixed_key
            if delimiter is not None:
                key, sep, rest = value.partition(delimiter)
                if not sep:
                    key, rest = None, value
                value = rest
            future = producer.send(args.topic, value, key=key, headers=headers or None, partition=args.partition)
            future.add_errback(failures.append)
            count += 1
        producer.flush()
    if failures:
        print(f"fastmq: {len(failures)} of {count} records failed: {failures[0]}", file=sys.stderr)
        return 1
    if args.verbose:
        print(f"produced {count} records to {args.topic}", file=sys.stderr)
    return 0


# ---- fastmq bench produce ---------------------------------------------------------------------------------

@dataclass
class ProduceResult:
    records: int
    value_size: int
    send_seconds: float          # time for send() to accept every record
    total_seconds: float         # until every record is acknowledged
    latencies: list[float] = field(default_factory=list)     # seconds from send() to acknowledgement

    def rows(self) -> list[list[str]]:
        mb = self.records * self.value_size / 1e6
        rows = [["produce (send loop)", format_rate(self.records / self.send_seconds), f"{mb / self.send_seconds:.1f}",
                 "", ""],
                ["produce (acknowledged)", format_rate(self.records / self.total_seconds),
                 f"{mb / self.total_seconds:.1f}"] + latency_cells(self.latencies)]
        return rows


def latency_cells(latencies: list[float]) -> list[str]:
    if not latencies:
        return ["", ""]
    ordered = sorted(latencies)
    return [f"{ordered[len(ordered) // 2] * 1000:.1f}", f"{ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000:.1f}"]


TABLE_HEADERS = ["stage", "msgs/s", "MB/s", "p50 ms", "p99 ms"]


def produce_records(bootstrap_servers: str, topic: str, records: int, value_size: int,
                    options: dict[str, Any], partition: int | None = None, progress: bool = True) -> ProduceResult:
    """Send `records` values of `value_size` bytes and wait for all acknowledgements."""
    from fastmq.kafka import Producer

    value = b"x" * value_size
    latencies: list[float] = []
    failures: list[BaseException] = []
    bar = ProgressBar("produce", records) if progress else None
    clock = time.monotonic
    with Producer(bootstrap_servers, **options) as producer:
        producer.send(topic, b"warm-up", partition=partition).get(60)
        send = producer.send
        start = clock()
        for i in range(records):
            future = send(topic, value, partition=partition)
            if i % LATENCY_SAMPLE_EVERY == 0:
                sent_at = clock()
                future.add_both(lambda outcome, sent_at=sent_at: latencies.append(clock() - sent_at)
                                if not isinstance(outcome, BaseException) else failures.append(outcome))
                if bar is not None:
                    bar.update(i)
        sent = clock()
        producer.flush()
        done = clock()
        if bar is not None:
            bar.update(records)
            bar.finish()
        if producer.metrics()["producer-metrics"]["record-error-total"] or failures:
            raise CommandError(f"records failed during the benchmark: {failures[:1]}")
    return ProduceResult(records, value_size, sent - start, done - start, latencies)


def run_bench_produce(args: argparse.Namespace) -> int:
    topic = args.topic or f"fastmq-bench-{uuid.uuid4().hex[:8]}"
    servers = servers_of(args)
    print(f"producing {args.records} records of {args.value_size} B to {topic} at {servers}", file=sys.stderr)
    result = produce_records(servers, topic, args.records, args.value_size, producer_options(args),
                             args.partition, progress=not args.quiet)
    print_table(TABLE_HEADERS, result.rows())
    return 0


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    produce = commands.add_parser("produce", help="produce lines from stdin or files (like kcat -P)")
    add_producer_options(produce, required_servers=True)
    produce.add_argument("-t", "--topic", required=True)
    produce.add_argument("-p", "--partition", type=int, default=None)
    produce.add_argument("-k", "--key", default=None, help="the key of every record")
    produce.add_argument("-K", "--key-delimiter", default=None, help="split each line into key DELIM value")
    produce.add_argument("-H", "--header", action="append", default=[], metavar="name=value")
    produce.add_argument("-v", "--verbose", action="store_true")
    produce.add_argument("files", nargs="*", help="files to read (default: stdin)")
    produce.set_defaults(func=run_produce)

    bench = bench_targets.add_parser("produce", help="producer throughput and acknowledgement latency")
    add_producer_options(bench, required_servers=True)
    bench.add_argument("-t", "--topic", default=None, help="topic (default: a new one)")
    bench.add_argument("-p", "--partition", type=int, default=None)
    bench.add_argument("--records", type=int, default=1_000_000)
    bench.add_argument("--value-size", type=int, default=100)
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(func=run_bench_produce, acks="1", linger_ms=10.0)
