"""`fastmq bench` without a target: the main job. It needs nothing installed beyond fastmq: unless
--bootstrap-servers names a Kafka cluster, it starts the embedded broker (`fastmq broker`, in its own process
so that it does not share the client's interpreter) on a temporary directory, then
  1. produces --records values (progress bar, acknowledgement latency sampled),
  2. consumes them all back from the beginning (progress bar),
  3. runs producer and consumer together for a tenth of the records and measures end-to-end latency (record
     timestamp at send -> record in the consumer's hands),
and prints one table: msgs/s, MB/s, latency p50/p99 per stage.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from typing import Any

from fastmq.cli.consume import consume_records
from fastmq.cli.endpoint import servers_of
from fastmq.cli.failure import CommandError
from fastmq.cli.produce import ProduceResult, TABLE_HEADERS, latency_cells, produce_records
from fastmq.cli.progress import ProgressBar, format_rate, print_table

# The consume stage reads in large gulps: fetches wait little for more data, polls return many records.
CONSUMER_OPTIONS = {"fetch_max_wait_ms": 100, "max_partition_fetch_bytes": 4 << 20, "max_poll_records": 100_000}


def end_to_end(bootstrap_servers: str, topic: str, records: int, value_size: int, options: dict[str, Any],
               progress: bool = True) -> tuple[int, float, list[float]]:
    """Produce while consuming; (records, seconds, end-to-end latencies in seconds)."""
    from fastmq.kafka import Consumer, Producer, TopicPartition

    latencies: list[float] = []
    ready = threading.Event()
    failure: list[BaseException] = []
    bar = ProgressBar("end-to-end", records) if progress else None

    def consume() -> None:
        try:
            with Consumer(bootstrap_servers=bootstrap_servers, fetch_max_wait_ms=100,
                          auto_offset_reset="latest") as consumer:
                partitions = sorted(consumer.partitions_for_topic(topic, timeout=30))
                consumer.assign([TopicPartition(topic, p) for p in partitions])
                consumer.seek_to_end()
                for p in partitions:
                    consumer.position(TopicPartition(topic, p), timeout=30)
                ready.set()
                received = 0
                deadline = time.monotonic() + 300
                while received < records and time.monotonic() < deadline:
                    batch = consumer.consume(100_000, 0.5)
                    now_ms = time.time() * 1000
                    for i in range(0, len(batch), 97):      # a sample of each batch
                        latencies.append((now_ms - batch[i].timestamp) / 1000.0)
                    received += len(batch)
                    if bar is not None:
                        bar.update(min(received, records))
        except BaseException as exc:      # reported by the main thread
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=consume, name="fastmq-bench-consumer", daemon=True)
    thread.start()
    ready.wait(60)
    if failure:
        raise CommandError(f"the end-to-end consumer failed: {failure[0]}")
    value = b"e" * value_size
    start = time.monotonic()
    with Producer(bootstrap_servers, **options) as producer:
        send = producer.send
        for _ in range(records):
            send(topic, value)
        producer.flush()
    thread.join(300)
    elapsed = time.monotonic() - start
    if bar is not None:
        bar.finish()
    if failure:
        raise CommandError(f"the end-to-end consumer failed: {failure[0]}")
    return records, elapsed, latencies


def run_main_job(args: argparse.Namespace) -> int:
    from fastmq.broker import BrokerProcess
    from fastmq.cli.produce import producer_options

    servers = None if args.bootstrap_servers is None else servers_of(args)
    progress = not args.quiet
    broker = BrokerProcess(args=["--partitions", str(args.partitions)]) if servers is None else None
    try:        # from the broker's start: SIGTERM or Ctrl-C at any point stops it and removes its directory
        if broker is not None:
            servers = broker.start().bootstrap_servers
            print(f"fastmq bench: embedded broker at {servers} (temporary directory)", file=sys.stderr)
        topic = args.topic or f"fastmq-bench-{uuid.uuid4().hex[:8]}"
        options = producer_options(args)
        print(f"producing {args.records} records of {args.value_size} B to {topic}", file=sys.stderr)
        produced: ProduceResult = produce_records(servers, topic, args.records, args.value_size, options,
                                                  progress=progress)
        # produce_records sends one warm-up record before the measured ones.
        consumed = args.records + 1
        consume_seconds = consume_records(servers, topic, consumed, CONSUMER_OPTIONS, progress, timeout=300)
        rows = produced.rows()
        mb = consumed * args.value_size / 1e6
        rows.append(["consume (from the start)", format_rate(consumed / consume_seconds),
                     f"{mb / consume_seconds:.1f}", "", ""])
        e2e_records = max(1, args.records // 10)
        count, seconds, latencies = end_to_end(servers, topic, e2e_records, args.value_size, options, progress)
        rows.append(["produce + consume (end-to-end)", format_rate(count / seconds),
                     f"{count * args.value_size / 1e6 / seconds:.1f}"] + latency_cells(latencies))
        print_table(TABLE_HEADERS, rows)
    finally:
        if broker is not None:
            broker.close()
    return 0


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    from fastmq.cli.produce import add_producer_options

    bench = bench_targets.add_parser("embedded", help="the main job: produce and consume through the embedded "
                                                      "broker (or any Kafka cluster with -b)")
    add_producer_options(bench, required_servers=False)
    bench.add_argument("-t", "--topic", default=None, help="topic (default: a new one)")
    bench.add_argument("--records", type=int, default=1_000_000)
    bench.add_argument("--value-size", type=int, default=100)
    bench.add_argument("--partitions", type=int, default=1, help="partitions of the embedded broker's topics")
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    bench.set_defaults(func=run_main_job, acks="1", linger_ms=10.0)


DEFAULT_BENCH = "embedded"
