"""Side-by-side benchmark reporting.

Every benchmark sets `benchmark.group` (one comparison, e.g. "kafka-batch-build-1000x100B") and
`benchmark.extra_info["impl"]` (who is measured: "fastmq", "aiokafka", ...); optional extra_info["items"] and
extra_info["bytes"] (processed per round) turn times into rates; extra_info keys ending in "_ms" (latency
percentiles) or "_ns" (CPU time per record) are printed beside them with their unit. At the end of the run one
table per group prints each implementation's median time (robust against the pauses of a shared machine), rates, and fastmq's speed
ratio against every other entry.
"""
from __future__ import annotations

import pytest


def _rate(value: float, unit: str) -> str:
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.1f} {unit}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.benchmarks:
        return
    groups: dict[str, list] = {}
    for bench in session.benchmarks:
        if bench.stats.rounds:          # a benchmark whose test failed measured nothing
            groups.setdefault(bench.group or bench.name, []).append(bench)
    write = terminalreporter.write_line
    write("")
    write("fastmq side-by-side, medians ('fastmq xR': fastmq is R times as fast as that row)")
    for group, benches in groups.items():
        write(f"-- {group}")
        entries = []
        for bench in benches:
            info = bench.extra_info
            median = bench.stats.median
            entries.append((info.get("impl", bench.name), median, info))
        # Speeds, not times, are compared: entries may process different amounts. Both rows must be measured in
        # the same unit (items where both count items, else bytes), or the ratio would mix items/s with B/s.
        def ratio(ours: tuple[float, dict], theirs: tuple[float, dict]) -> float:
            for unit in ("items", "bytes"):
                if ours[1].get(unit) and theirs[1].get(unit):
                    return (ours[1][unit] / ours[0]) / (theirs[1][unit] / theirs[0])
            return theirs[0] / ours[0]

        def speed(median: float, info: dict) -> float:
            return (info.get("bytes") or info.get("items") or 1) / median

        fastmq_entries = [(impl, (median, info)) for impl, median, info in entries if impl.startswith("fastmq")]
        for impl, median, info in sorted(entries, key=lambda e: -speed(e[1], e[2])):
            cols = [f"{impl:<28}", f"{median * 1e6:12.1f} us"]
            if info.get("items"):
                cols.append(_rate(info["items"] / median, "items/s"))
            if info.get("bytes"):
                cols.append(_rate(info["bytes"] / median, "B/s"))
            # Other measurements a benchmark records: p50_ms=26.1 prints "p50 26.1 ms", cpu_ns=900 "cpu 900 ns".
            cols += [f"{key[:-3]} {value} {key[-2:]}" for key, value in info.items() if key.endswith(("_ms", "_ns"))]
            if not impl.startswith("fastmq"):
                cols += [f"{name} x{ratio(ours, (median, info)):.2f}" for name, ours in fastmq_entries]
            write("   " + "  ".join(cols))


@pytest.fixture
def compare(benchmark):
    """benchmark, pre-labelled: compare(group, impl, items=..., bytes=...) returns the fixture."""
    def label(group: str, impl: str, items: int | None = None, nbytes: int | None = None):
        benchmark.group = group
        benchmark.extra_info["impl"] = impl
        if items:
            benchmark.extra_info["items"] = items
        if nbytes:
            benchmark.extra_info["bytes"] = nbytes
        return benchmark
    return label
