"""`fastmq consume` (records to stdout, like kcat -C) and `fastmq bench consume`."""
from __future__ import annotations

import argparse
import re
import sys
import threading
import time
import uuid
from typing import Any, BinaryIO

from fastmq.cli.endpoint import add_endpoint_options, prepare_topics, servers_of
from fastmq.cli.failure import CommandError, ExitCode
from fastmq.cli.produce import latency_cells, parse_client_options, produce_records
from fastmq.cli.progress import ProgressBar, format_rate, print_table

_TOKEN = re.compile(rb"%[tpokKsSThR%]|\\[nt\\]")
_NUMERIC_OFFSET = re.compile(r"-?[0-9]+|s@[0-9]+")


def add_consumer_options(parser: argparse.ArgumentParser) -> None:
    add_endpoint_options(parser)
    parser.add_argument("-X", dest="options", action="append", default=[], metavar="name=value",
                        help="any fastmq.kafka.Consumer option, e.g. -X isolation_level=read_committed (repeatable)")


def consumer_options(args: argparse.Namespace) -> dict[str, Any]:
    return parse_client_options(args.options)


# ---- fastmq consume ----------------------------------------------------------------------------------------

class Formatter:
    """kcat's -f tokens: %t topic, %p partition, %o offset, %k key, %K key length, %s value, %S value length,
    %T timestamp (ms), %h headers (k=v,...), %R the value length as a big-endian int32 (binary framing),
    %% a percent sign; the escapes \\n, \\t and \\\\."""

    def __init__(self, pattern: str) -> None:
        self.parts: list[bytes | str] = []
        data = pattern.encode()
        last = 0
        escapes = {b"\\n": b"\n", b"\\t": b"\t", b"\\\\": b"\\", b"%%": b"%"}
        for match in [*_TOKEN.finditer(data), None]:
            start = len(data) if match is None else match.start()
            literal = data[last:start]
            if b"%" in literal:                 # a % that starts no known token
                unknown = literal[literal.index(b"%"):][:2].decode(errors="replace")
                raise ValueError(f"unknown format token {unknown!r} in {pattern!r}; known: %t %p %o %k %K %s %S "
                                 "%T %h %R %%")
            if literal:
                self.parts.append(literal)
            if match is not None:
                token = match.group()
                self.parts.append(escapes.get(token, token.decode()))
                last = match.end()

    def format(self, record: Any) -> bytes:
        out = []
        for part in self.parts:
            if isinstance(part, bytes):
                out.append(part)
            elif part == "%s":
                out.append(record.value or b"")
            elif part == "%k":
                out.append(record.key or b"")
            elif part == "%t":
                out.append(record.topic.encode())
            elif part == "%p":
                out.append(b"%d" % record.partition)
            elif part == "%o":
                out.append(b"%d" % record.offset)
            elif part == "%T":
                out.append(b"%d" % record.timestamp)
            elif part == "%S":
                out.append(b"%d" % record.serialized_value_size)
            elif part == "%K":
                out.append(b"%d" % record.serialized_key_size)
            elif part == "%R":
                out.append(max(record.serialized_value_size, 0).to_bytes(4, "big"))
            elif part == "%h":
                out.append(b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in record.headers))
        return b"".join(out)


def parse_offset(spec: str) -> str:
    """An argparse type for kcat's -o: beginning, end, stored, N (absolute), -N (N before the end), s@MS (the
    first record at or after a time in ms)."""
    if spec in ("beginning", "end", "stored") or _NUMERIC_OFFSET.fullmatch(spec):
        return spec
    raise argparse.ArgumentTypeError(f"wants beginning, end, stored, N, -N or s@MS, not {spec!r}")


def parse_format(pattern: str) -> Formatter:
    """An argparse type for -f."""
    try:
        return Formatter(pattern)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _start_offsets(consumer: Any, partitions: list, spec: str) -> None:
    if spec == "beginning":
        consumer.seek_to_beginning(*partitions)
    elif spec == "end":
        consumer.seek_to_end(*partitions)
    elif spec == "stored":
        return
    elif spec.startswith("s@"):
        found = consumer.offsets_for_times({tp: int(spec[2:]) for tp in partitions})
        ends = consumer.end_offsets(partitions)
        for tp in partitions:
            consumer.seek(tp, found[tp].offset if found[tp] is not None else ends[tp])
    elif int(spec) >= 0:
        for tp in partitions:
            consumer.seek(tp, int(spec))
    else:
        ends = consumer.end_offsets(partitions)
        starts = consumer.beginning_offsets(partitions)
        for tp in partitions:
            consumer.seek(tp, max(starts[tp], ends[tp] + int(spec)))


def run_consume(args: argparse.Namespace, out: BinaryIO | None = None) -> int:
    from fastmq.kafka import Consumer
    from fastmq.kafka.structs import TopicPartition

    out = out if out is not None else sys.stdout.buffer

    formatter = args.format
    options = consumer_options(args)
    options.setdefault("auto_offset_reset", "earliest" if args.offset == "beginning" else "latest")
    options.setdefault("allow_auto_create_topics", False)      # a misspelled topic is an error, not a new topic
    if args.group is None:
        options.setdefault("enable_auto_commit", False)
    consumer = Consumer(bootstrap_servers=servers_of(args), group_id=args.group, **options)   # checks the options
    count = 0
    try:
        prepare_topics(args, args.topics, options, create=False)
        if args.group is not None and args.partition is None:
            consumer.subscribe(args.topics)
        else:
            partitions = []
            for topic in args.topics:
                numbers = [args.partition] if args.partition is not None else sorted(consumer.partitions_for_topic(topic))
                partitions += [TopicPartition(topic, p) for p in numbers]
            if not partitions:
                raise CommandError(f"no partitions found for {args.topics}", ExitCode.NOT_FOUND)
            consumer.assign(partitions)
            _start_offsets(consumer, partitions, args.offset)
        idle_since = time.monotonic()
        while args.count is None or count < args.count:
            records = consumer.poll(0.5, None if args.count is None else min(10000, args.count - count))
            for chunk in records.values():
                for record in chunk:
                    out.write(formatter.format(record))
                    count += 1
            out.flush()
            if records:
                idle_since = time.monotonic()
            elif args.exit_at_end and consumer.at_end() and time.monotonic() - idle_since > 0.5:
                break
    finally:
        consumer.close()
    if args.verbose:
        print(f"consumed {count} records", file=sys.stderr)
    return 0


# ---- fastmq bench consume -----------------------------------------------------------------------------------

def consume_records(bootstrap_servers: str, topic: str, records: int, options: dict[str, Any],
                    progress: bool = True, timeout: float = 600.0) -> float:
    """Seconds to read `records` records of `topic` from the beginning (all partitions)."""
    from fastmq.kafka import Consumer
    from fastmq.kafka.structs import TopicPartition

    options = dict(options)
    options.setdefault("max_poll_records", 10000)
    bar = ProgressBar("consume", records) if progress else None
    with Consumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest", **options) as consumer:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        count = 0
        start = time.monotonic()
        deadline = start + timeout
        while count < records and time.monotonic() < deadline:
            for chunk in consumer.poll(1.0).values():
                count += len(chunk)
            if bar is not None:
                bar.update(min(count, records))
        elapsed = time.monotonic() - start
    if bar is not None:
        bar.finish()
    if count < records:
        raise CommandError(f"only {count} of {records} records arrived within {timeout:g} s")
    return elapsed


def end_to_end_latency(bootstrap_servers: str, topic: str, rate: float, seconds: float,
                       options: dict[str, Any]) -> list[float]:
    """Seconds from send() to poll() handing the record out, for `rate` records per second over `seconds`."""
    from fastmq.kafka import Consumer, Producer
    from fastmq.kafka.structs import TopicPartition

    latencies: list[float] = []
    total = int(rate * seconds)
    options = dict({"fetch_max_wait_ms": 100, "auto_offset_reset": "earliest"}, **options)
    with Consumer(bootstrap_servers=bootstrap_servers, **options) as consumer, Producer(bootstrap_servers, linger_ms=0, acks=1,
                                                   enable_idempotence=False) as producer:
        tp = TopicPartition(topic, 0)
        producer.send(topic, b"%.9f" % time.time(), partition=0).get(60)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        first = consumer.poll(30.0)
        if not first:
            raise CommandError("the latency topic could not be read")

        def produce() -> None:
            start = time.monotonic()
            for i in range(total):
                pause = start + i / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                producer.send(topic, b"%.9f" % time.monotonic(), partition=0)
            producer.flush()

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        deadline = time.monotonic() + seconds + 30
        while len(latencies) < total and time.monotonic() < deadline:
            for chunk in consumer.poll(0.5).values():
                now = time.monotonic()
                latencies.extend(now - float(r.value) for r in chunk)
        thread.join(30)
    return latencies


def run_bench_consume(args: argparse.Namespace) -> int:
    servers = servers_of(args)
    topic = args.topic
    options = consumer_options(args)
    if topic is None:
        topic = f"fastmq-bench-{uuid.uuid4().hex[:8]}"
        print(f"loading {args.records} records of {args.value_size} B into {topic}", file=sys.stderr)
        produce_records(servers, topic, args.records, args.value_size,
                        {"acks": 1, "linger_ms": 10, "batch_size": 262144, "enable_idempotence": False}, 0,
                        progress=not args.quiet)
    seconds = consume_records(servers, topic, args.records, options, progress=not args.quiet)
    rows = [["consume", format_rate(args.records / seconds), f"{args.records * args.value_size / seconds / 1e6:.1f}",
             "", ""]]
    if args.latency_seconds > 0:
        latency_topic = f"fastmq-latency-{uuid.uuid4().hex[:8]}"
        latencies = end_to_end_latency(servers, latency_topic, args.latency_rate,
                                       args.latency_seconds, options)
        rows.append([f"end-to-end at {format_rate(args.latency_rate)}/s", format_rate(len(latencies) / args.latency_seconds),
                     ""] + latency_cells(latencies))
    print_table(["stage", "msgs/s", "MB/s", "p50 ms", "p99 ms"], rows)
    return 0


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    consume = commands.add_parser("consume", help="write records to stdout (like kcat -C)")
    add_consumer_options(consume)
    consume.add_argument("-t", "--topic", dest="topics", action="append", required=True, help="topic (repeatable)")
    consume.add_argument("-p", "--partition", type=int, default=None)
    consume.add_argument("-g", "--group", default=None, help="consume as a member of this group (commits offsets)")
    consume.add_argument("-o", "--offset", default="beginning", type=parse_offset,
                         help="where to start: beginning, end, stored, N, -N (N before the end), s@MS")
    consume.add_argument("-c", "--count", type=int, default=None, help="stop after this many records")
    consume.add_argument("-e", "--exit-at-end", action="store_true", help="stop at the end of every partition")
    consume.add_argument("-f", "--format", default=Formatter("%s\\n"), type=parse_format,
                         help="output format: %%t %%p %%o %%k %%K %%s %%S %%T %%h %%R, \\n \\t (default: %%s\\n)")
    consume.add_argument("-v", "--verbose", action="store_true")
    consume.set_defaults(func=run_consume)

    bench = bench_targets.add_parser("consume", help="consumer throughput and end-to-end latency")
    add_consumer_options(bench)
    bench.add_argument("-t", "--topic", default=None, help="an existing topic (default: a new one, loaded first)")
    bench.add_argument("--records", type=int, default=1_000_000)
    bench.add_argument("--value-size", type=int, default=100)
    bench.add_argument("--latency-rate", type=float, default=10000, help="records per second of the latency run")
    bench.add_argument("--latency-seconds", type=float, default=5, help="length of the latency run (0: none)")
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(func=run_bench_consume)
