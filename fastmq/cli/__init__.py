"""The `fastmq` command: one module per subcommand, each adding its parser through register().

    fastmq bench [TARGET]     benchmarks: `codec`, `produce`, ... (no target: the main job)
    fastmq produce ...        produce lines from stdin or files (like kcat -P)
    fastmq consume ...        write records to stdout (like kcat -C)
    fastmq broker ...         run the embedded broker; fastmq broker-stats: what a running one counts
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module defines register(commands, bench_targets); one names the bench target that `fastmq bench`
# without a target runs (DEFAULT_BENCH: the main job).
COMMAND_MODULES = ("fastmq.cli.codec", "fastmq.cli.produce", "fastmq.cli.consume", "fastmq.cli.broker",
                   "fastmq.cli.embedded")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fastmq", description="fastmq: message-queue clients, broker and tools")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = commands.add_parser("bench", help="run a benchmark (without a target: the main job)")
    targets = bench.add_subparsers(dest="target", metavar="TARGET")
    default_bench = None
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(commands, targets)
        default_bench = getattr(module, "DEFAULT_BENCH", default_bench)
    parser.set_defaults(default_bench=default_bench, bench_targets=set(targets.choices))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] == "bench":
        targets = parser.get_default("bench_targets")
        if len(argv) == 1 or (argv[1] not in targets and argv[1] not in ("-h", "--help")):
            argv.insert(1, parser.get_default("default_bench"))   # `fastmq bench [options]`: the main job
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:         # `fastmq consume | head`: the reader went away
        return 0

