"""Side-by-side benchmark reporting.

Every benchmark sets `benchmark.group` (one comparison, e.g. "kafka-batch-build-1000x100B") and
`benchmark.extra_info["impl"]` (who is measured: "fastmq", "aiokafka", ...); optional extra_info["items"] and
extra_info["bytes"] (processed per round) turn times into rates; extra_info keys ending in "_ms" (latency
percentiles) or "_ns" (CPU time per record) are printed beside them with their unit; a benchmark with items run
through pedantic() gets this process's CPU time per item (cpu_ns) by itself. At the end of the run one
table per group prints each implementation's median time (robust against the pauses of a shared machine), rates,
and fastmq's speed ratio against every other entry. `--side-by-side-json PATH` also saves them as the JSON that
`fastmq bench report` reads (fastmq/cli/bench_report.py describes it); each entry's protocol is its module's
PROTOCOL, else the protocol its file is named after (bench_nsq.py: "nsq"), else the file's name after "bench_".
A bench that times itself (a peer in another process reports its own time) records its median through the
`self_timed` fixture instead, and joins the same tables and JSON.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fastmq.cli.bench_report import describe_machine, is_ours, speed, speed_ratio
from fastmq.cli.progress import format_rate

PROTOCOLS = ("kafka", "rocketmq", "tubemq", "nsq", "spark", "proxy")


def pytest_addoption(parser):
    parser.addoption("--side-by-side-json", metavar="PATH", help="save the side-by-side results for `fastmq bench "
                     "report`")


def side_by_side_results(session) -> list[dict]:
    """One entry per measured benchmark, in the form of fastmq/cli/bench_report.py."""
    results = []
    for bench in session.benchmarks:
        if not bench.stats.rounds:      # a benchmark whose test failed measured nothing
            continue
        info = bench.extra_info
        results.append({
            "protocol": info.get("protocol", "kafka"), "group": bench.group or bench.name,
            "impl": info.get("impl", bench.name), "median_s": bench.stats.median,
            "items": info.get("items"), "bytes": info.get("bytes"),
            # Other measurements a benchmark records: latency percentiles (_ms), CPU time per record (_ns).
            "extra": {key: value for key, value in info.items() if key.endswith(("_ms", "_ns"))},
        })
    return results


SELF_TIMED = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    session = getattr(config, "_benchmarksession", None)
    results = (side_by_side_results(session) if session is not None else []) + config.stash.get(SELF_TIMED, [])
    if not results:
        return
    path = config.getoption("--side-by-side-json")
    if path:
        Path(path).write_text(json.dumps({"machine": describe_machine(), "results": results}, indent=1))
    groups: dict[str, list[dict]] = {}
    for result in results:
        groups.setdefault(result["group"], []).append(result)
    write = terminalreporter.write_line
    write("")
    write("fastmq side-by-side, medians ('fastmq xR': fastmq is R times as fast as that row)")
    for group, entries in groups.items():
        write(f"-- {group}")
        ours = [entry for entry in entries if is_ours(entry)]
        for entry in sorted(entries, key=speed, reverse=True):
            median = entry["median_s"]
            cols = [f"{entry['impl']:<28}", f"{median * 1e6:12.1f} us"]
            if entry["items"]:
                cols.append(f"{format_rate(entry['items'] / median)} items/s")
            if entry["bytes"]:
                cols.append(f"{format_rate(entry['bytes'] / median)} B/s")
            # p50_ms=26.1 prints "p50 26.1 ms", cpu_ns=900 "cpu 900 ns".
            cols += [f"{key[:-3]} {value} {key[-2:]}" for key, value in entry["extra"].items()]
            if not is_ours(entry):
                cols += [f"{mine['impl']} x{speed_ratio(mine, entry):.2f}" for mine in ours]
            write("   " + "  ".join(cols))


def module_protocol(module) -> str:
    declared = getattr(module, "PROTOCOL", None)
    if declared:
        return declared
    stem = Path(module.__file__).stem.removeprefix("bench_")
    return next((protocol for protocol in PROTOCOLS if protocol in stem), stem)


class CPUPerItem:
    """The benchmark fixture, whose pedantic() also records this process's CPU time (every thread's: a client's
    own I/O threads included) per item over all its rounds, in extra_info["cpu_ns"]."""

    def __init__(self, benchmark, items: int) -> None:
        self._benchmark = benchmark
        self._items = items

    def __getattr__(self, name: str):
        return getattr(self._benchmark, name)

    def pedantic(self, target, *args, rounds: int = 1, iterations: int = 1, warmup_rounds: int = 0, **options):
        started = time.process_time()
        try:
            return self._benchmark.pedantic(target, *args, rounds=rounds, iterations=iterations,
                                            warmup_rounds=warmup_rounds, **options)
        finally:
            runs = (rounds + warmup_rounds) * iterations
            self._benchmark.extra_info["cpu_ns"] = round(
                (time.process_time() - started) * 1e9 / (runs * self._items))


@pytest.fixture
def self_timed(request):
    """record(group, impl, median_s, items=..., nbytes=..., **extra) for a bench that measures its own rounds."""
    def record(group: str, impl: str, median_s: float, items: int | None = None, nbytes: int | None = None,
               **extra: float) -> None:
        request.config.stash.setdefault(SELF_TIMED, []).append({
            "protocol": module_protocol(request.module), "group": group, "impl": impl, "median_s": median_s,
            "items": items, "bytes": nbytes, "extra": extra})
    return record


@pytest.fixture
def compare(benchmark, request):
    """benchmark, pre-labelled: compare(group, impl, items=..., bytes=...) returns the fixture."""
    def label(group: str, impl: str, items: int | None = None, nbytes: int | None = None):
        benchmark.group = group
        benchmark.extra_info["impl"] = impl
        benchmark.extra_info["protocol"] = module_protocol(request.module)
        if nbytes:
            benchmark.extra_info["bytes"] = nbytes
        if items:
            benchmark.extra_info["items"] = items
            return CPUPerItem(benchmark, items)
        return benchmark
    return label


@pytest.fixture(scope="module", params=["tansu", "apache-kafka"])
def kafka_broker(request, tmp_path_factory):
    """One Kafka broker for a module's benches, each in turn: Tansu, and Apache Kafka (one KRaft node);
    .name says which (put it in the benchmark's group: the brokers' figures are not comparable)."""
    from benches.apache_broker import bench_cluster
    from tests.support.tansu import start_tansu

    if request.param == "tansu":
        broker = start_tansu()
        broker.name = "Tansu"
        yield broker
        broker.stop()
        return
    with bench_cluster(tmp_path_factory.mktemp("bench-apache-kafka")) as cluster:
        cluster.name = "Apache Kafka"
        yield cluster
