"""`fastmq bench report`: the side-by-side benches as a Markdown table and a PNG chart, fastmq against each peer.

The benches in benches/ (run with `pytest benches/ --benchmark-only --side-by-side-json PATH`) save one JSON
document:

    {"machine": {"cpu": "...", "cores": 2, "python": "3.11.2", "kernel": "6.1.0", "system": "Linux"},
     "results": [{"protocol": "kafka", "group": "kafka batch build 1000 x 100 B", "impl": "fastmq",
                  "median_s": 0.0001, "items": 1000, "bytes": 100000, "extra": {"p50_ms": 1.2}}, ...]}

A group is one comparison (the same work done by each implementation); an implementation whose name starts with
"fastmq" is ours, every other is a peer. The report reads such documents (every results*.json of the output
directory, or the files given: benches that need their own servers are run apart and saved apart), or runs the
benches to make one, and writes report.md and report.png into the output directory. The chart opens with a summary,
one bar per protocol and peer (the geometric mean of fastmq's ratios over their comparisons), then one panel per
protocol: one bar per (comparison, peer), how many times as fast as the peer fastmq is, on a log scale around 1x.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from fastmq.cli.failure import CommandError
from fastmq.cli.progress import format_rate

Result = dict   # one entry of "results" (see the module docstring)
PROTOCOL_ORDER = {name: index for index, name in enumerate(("kafka", "rocketmq", "tubemq", "nsq"))}


def describe_machine() -> dict:
    """CPU model, cores, Python and kernel of the machine the benches run on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "kernel": platform.release(), "system": platform.system()}


def is_ours(result: Result) -> bool:
    return result["impl"].startswith("fastmq")


def speed(result: Result) -> float:
    """Work per second: bytes, else items, else runs."""
    return (result.get("bytes") or result.get("items") or 1) / result["median_s"]


def speed_ratio(ours: Result, theirs: Result) -> float:
    """How many times as fast as `theirs` `ours` is. Speeds, not times, are compared (entries may process different
    amounts), in one unit that both count: items where both count items, else bytes, else runs."""
    for unit in ("items", "bytes"):
        if ours.get(unit) and theirs.get(unit):
            return (ours[unit] / ours["median_s"]) / (theirs[unit] / theirs["median_s"])
    return theirs["median_s"] / ours["median_s"]


def by_protocol(results: Sequence[Result]) -> dict[str, dict[str, list[Result]]]:
    """protocol -> group -> results: the four protocols first (others after them, as they came), whatever order
    the saved runs had; groups in the order the benches ran."""
    grouped: dict[str, dict[str, list[Result]]] = {}
    for result in sorted(results, key=lambda result: PROTOCOL_ORDER.get(result["protocol"], len(PROTOCOL_ORDER))):
        grouped.setdefault(result["protocol"], {}).setdefault(result["group"], []).append(result)
    return grouped


def comparisons(results: Sequence[Result]) -> list[tuple[str, str, str, float]]:
    """(protocol, group, peer, ratio of fastmq's best entry to the peer) for every peer of every group."""
    rows = []
    for protocol, groups in by_protocol(results).items():
        for group, entries in groups.items():
            ours = [entry for entry in entries if is_ours(entry)]
            if not ours:
                continue
            best = max(ours, key=speed)
            rows += [(protocol, group, peer["impl"], speed_ratio(best, peer)) for peer in entries if not is_ours(peer)]
    return rows


def summary(rows: Sequence[tuple[str, str, str, float]]) -> list[tuple[str, str, str, float]]:
    """(protocol, "N comparisons", peer, geometric mean of the ratios) per protocol and peer: the mean that treats
    2x faster and 2x slower as cancelling out."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for protocol, _, peer, ratio in rows:
        ratios.setdefault((protocol, peer), []).append(ratio)
    return [(protocol, f"{len(values)} comparison{'s' if len(values) > 1 else ''}", peer,
             math.exp(sum(math.log(value) for value in values) / len(values)))
            for (protocol, peer), values in ratios.items()]


def duration(seconds: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def machine_line(machine: dict) -> str:
    return (f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, Python {machine.get('python', '?')}, "
            f"{machine.get('system', 'Linux')} {machine.get('kernel', '?')}")


def markdown(document: dict) -> str:
    """One table per protocol: every entry's median and rates, and for each peer how many times as fast fastmq is."""
    lines = ["# fastmq side by side", "", f"Machine: {machine_line(document['machine'])}.", "",
             "Medians of pytest-benchmark rounds. \"fastmq ×\": how many times as fast as that row fastmq's best "
             "entry in the same comparison is (above 1: fastmq is faster). \"also measured\": what a bench "
             "recorded besides (cpu_ns, cpu_per_record_ns: the client process's CPU time per record; p50_ms: "
             "latency).", ""]
    for protocol, groups in by_protocol(document["results"]).items():
        lines += [f"## {protocol}", "", "| comparison | implementation | median | items/s | bytes/s | fastmq × "
                  "| also measured |", "|---|---|---:|---:|---:|---:|---|"]
        for group, entries in groups.items():
            ours = [entry for entry in entries if is_ours(entry)]
            best = max(ours, key=speed) if ours else None
            for entry in sorted(entries, key=speed, reverse=True):
                items = format_rate(entry["items"] / entry["median_s"]) if entry.get("items") else ""
                nbytes = f"{format_rate(entry['bytes'] / entry['median_s'])}B" if entry.get("bytes") else ""
                ratio = f"{speed_ratio(best, entry):.2f}" if best is not None and not is_ours(entry) else ""
                measured = ", ".join(f"{key} {value:g}" for key, value in entry.get("extra", {}).items())
                lines.append(f"| {group} | {entry['impl']} | {duration(entry['median_s'])} | {items} | "
                             f"{nbytes} | {ratio} | {measured} |")
        lines.append("")
    return "\n".join(lines)


def chart(document: dict, path: Path) -> None:
    """A PNG: per protocol, one horizontal bar per (comparison, peer) on a log scale; green where fastmq is faster."""
    try:
        import matplotlib
    except ImportError as exc:
        raise CommandError("the chart needs matplotlib: pip install 'fastmq[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = comparisons(document["results"])
    if not rows:
        raise CommandError("no comparison to draw: the results have no group with both fastmq and a peer")
    panels: dict[str, list[tuple[str, str, str, float]]] = {"all protocols (geometric mean per peer)": [
        (protocol, f"{protocol}: {peer}", count, ratio) for protocol, count, peer, ratio in summary(rows)]}
    for row in rows:
        panels.setdefault(row[0], []).append(row)
    heights = [len(panel) + 1.0 for panel in panels.values()]
    height = 1.2 + 0.36 * sum(heights)
    figure, axes = plt.subplots(len(panels), 1, figsize=(11, height), squeeze=False,
                                gridspec_kw={"height_ratios": heights})
    low = min(min(row[3] for row in rows), 0.5)
    high = max(max(row[3] for row in rows), 2.0)
    for index, (axis, (protocol, panel)) in enumerate(zip(axes[:, 0], panels.items())):
        first = index == 0
        panel = panel[::-1]                 # matplotlib draws the first bar at the bottom
        ratios = [row[3] for row in panel]
        colors = [("#1b5e20" if first else "#2e7d32") if ratio >= 1 else ("#8e0000" if first else "#c62828")
                  for ratio in ratios]
        positions = range(len(panel))
        # Bars grow from 1x: right where fastmq is faster, left where it is slower.
        axis.barh(positions, [ratio - 1 for ratio in ratios], left=1, color=colors, height=0.7)
        labels = [f"{row[1]}  ({row[2]})" if first else f"{row[1]}  vs {row[2]}" for row in panel]
        axis.set_yticks(list(positions), labels, fontsize=9 if first else 8)
        axis.set_ylim(-0.6, len(panel) - 0.4)
        axis.set_xscale("log")
        axis.set_xlim(low / 2.2, high * 2.2)
        axis.axvline(1.0, color="black", linewidth=1)
        for position, ratio in zip(positions, ratios):
            label = f"{ratio:.0f}×" if ratio >= 100 else f"{ratio:.2f}×"
            axis.text(ratio * 1.06 if ratio >= 1 else ratio / 1.06, position, label, va="center", fontsize=8,
                      ha="left" if ratio >= 1 else "right")
        axis.set_title(protocol, loc="left", fontsize=11, fontweight="bold")
        axis.grid(axis="x", which="both", alpha=0.25)
        axis.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}×"))
    axes[-1, 0].set_xlabel("how many times as fast as the peer fastmq is (log scale; right of 1×: fastmq faster)")
    figure.suptitle(f"fastmq against each peer\n{machine_line(document['machine'])}", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.55 / height))        # leaves the two title lines their room
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run_benches(benches: Path, output: Path, selection: Sequence[str]) -> None:
    """Run the side-by-side benches (all of benches/, or the given files) and save their JSON at `output`."""
    if not benches.is_dir():
        raise CommandError(f"no benches at {benches}: run from a source checkout or pass --benches DIR")
    targets = [str(benches / name) for name in selection] or [str(benches)]
    command = [sys.executable, "-m", "pytest", *targets, "--benchmark-only", "-q", "-p", "no:cacheprovider",
               f"--side-by-side-json={output.resolve()}"]
    if subprocess.run(command, cwd=benches.parent).returncode != 0 or not output.is_file():
        raise CommandError(f"the benches failed ({' '.join(command)})")


def load(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read bench results {path}: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("results"), list) or not all(
            isinstance(r, dict) and {"protocol", "group", "impl", "median_s"} <= r.keys() and r["median_s"] > 0
            for r in document["results"]):
        raise CommandError(f"{path} is not a side-by-side bench result (benches/conftest.py --side-by-side-json)")
    document.setdefault("machine", {})
    return document


def merge(paths: Sequence[Path]) -> dict:
    """One document of several saved runs; where their machines differ (a kernel, a CPU), each field names every
    value, so that the chart says what it compares."""
    documents = [load(path) for path in paths]
    machine: dict = {}
    for document in documents:
        for key, value in document["machine"].items():
            values = machine.setdefault(key, [])
            if value not in values:
                values.append(value)
    return {"machine": {key: " / ".join(map(str, values)) for key, values in machine.items()},
            "results": [result for document in documents for result in document["results"]]}


def report(args: argparse.Namespace) -> int:
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    if args.run:
        target = Path(args.results[0]) if args.results else output / "results.json"
        run_benches(Path(args.benches), target, args.bench_files)
    paths = [Path(path) for path in args.results] if args.results else sorted(output.glob("results*.json"))
    missing = [path for path in paths if not path.is_file()]
    if not paths or missing:
        raise CommandError(f"no saved results at {missing[0] if missing else output / 'results*.json'}: pass --run "
                           "to run the benches, or --results FILE")
    document = merge(paths)
    (output / "report.md").write_text(markdown(document))
    chart(document, output / "report.png")
    print(f"wrote {output / 'report.md'} and {output / 'report.png'}")
    return 0


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    parser = bench_targets.add_parser("report", help="Markdown table and PNG chart of the side-by-side benches")
    parser.add_argument("--run", action="store_true", help="run the benches first (else read saved results)")
    parser.add_argument("--results", action="append", help="a saved run of the benches (JSON; repeat for several; "
                        "default: every OUTPUT/results*.json; --run writes the first, default OUTPUT/results.json)")
    parser.add_argument("--output", default="docs/bench", help="directory for report.md and report.png")
    parser.add_argument("--benches", default="benches", help="the benches directory of a source checkout")
    parser.add_argument("bench_files", nargs="*", help="with --run: only these files of the benches directory")
    parser.set_defaults(func=report)
