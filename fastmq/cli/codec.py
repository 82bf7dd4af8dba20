"""`fastmq bench codec`: the compiled record codecs (build, read, columnar, CRC-32C) on this machine."""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence


def _measure(function: Callable[[], object], min_seconds: float) -> tuple[float, int]:
    """Median seconds per call over repeated runs lasting at least min_seconds."""
    function()
    timings = []
    deadline = time.perf_counter() + min_seconds
    while time.perf_counter() < deadline or len(timings) < 5:
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    timings.sort()
    return timings[len(timings) // 2], len(timings)


def bench_codec(records: int, value_size: int, seconds: float) -> list[tuple[str, float, int, int]]:
    """Rows of (case, seconds per run, records per run, bytes per run)."""
    from fastmq._native.checksum import crc32c
    from fastmq.kafka._native.columnar import decode_columns
    from fastmq.kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    values = [os.urandom(value_size) for _ in range(records)]

    def build(codec: int = 0) -> bytearray:
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
        append = builder.append
        for offset, value in enumerate(values):
            append(offset, 1700000000000, None, value, [])
        return builder.build()

    batch = bytes(build())
    lz4_batch = bytes(build(3))

    def read(data: bytes) -> None:
        for record in DefaultRecordBatch(data):
            record.value

    blob = os.urandom(16 * 1024 * 1024)
    cases = [
        ("build batch", lambda: build(), records, len(batch)),
        ("build batch, lz4", lambda: build(3), records, len(batch)),
        ("read batch, per record", lambda: read(batch), records, len(batch)),
        ("read batch, lz4, per record", lambda: read(lz4_batch), records, len(batch)),
        ("read batch, columnar", lambda: decode_columns(batch), records, len(batch)),
        ("crc32c 16 MiB", lambda: crc32c(blob), 0, len(blob)),
    ]
    return [(name, _measure(function, seconds)[0], count, size) for name, function, count, size in cases]


def _print_table(rows: Sequence[tuple[str, float, int, int]]) -> None:
    print(f"{'case':<30}{'time':>12}{'records/s':>14}{'MB/s':>10}")
    for name, seconds, count, size in rows:
        rate = f"{count / seconds / 1e6:.2f}M" if count else "-"
        print(f"{name:<30}{seconds * 1e6:>10.1f}us{rate:>14}{size / seconds / 1e6:>10.0f}")


def run(args: argparse.Namespace) -> int:
    print(f"fastmq codec benchmark: batches of {args.records} records x {args.value_size} B")
    _print_table(bench_codec(args.records, args.value_size, args.seconds))
    return 0


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    bench = bench_targets.add_parser("codec", help="the compiled record codecs")
    bench.add_argument("--records", type=int, default=1000, help="records per batch (default 1000)")
    bench.add_argument("--value-size", type=int, default=100, help="bytes per value (default 100)")
    bench.add_argument("--seconds", type=float, default=1.0, help="time spent per case (default 1)")
    bench.set_defaults(func=run)
