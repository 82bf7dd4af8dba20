"""The `fastmq` command: one module per subcommand, each adding its parser through register().

    fastmq bench [TARGET]     benchmarks: `codec`, `produce`, ... (no target: the main job); `report`: the
                              side-by-side benches as a Markdown table and a PNG chart
    fastmq produce ...        produce lines from stdin or files (like kcat -P)
    fastmq consume ...        write records to stdout (like kcat -C)
    fastmq metadata ...       brokers, topics, partitions, leaders (like kcat -L; `fastmq -L` too)
    fastmq topics VERB ...    list, create, describe, alter, delete (like kafka-topics.sh)
    fastmq groups VERB ...    list, describe, reset-offsets, delete (like kafka-consumer-groups.sh)
    fastmq broker ...         run the embedded broker; fastmq broker-stats: what a running one counts

Failures print one line on stderr and exit with a code of fastmq.cli.failure.ExitCode; --debug prints the
traceback instead.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from fastmq.cli.failure import EXIT_CODES_HELP, CommandError, ExitCode, from_library_error

# Each module defines register(commands, bench_targets); one names the bench target that `fastmq bench`
# without a target runs (DEFAULT_BENCH: the main job).
COMMAND_MODULES = ("fastmq.cli.codec", "fastmq.cli.produce", "fastmq.cli.consume", "fastmq.cli.admin",
                   "fastmq.cli.broker", "fastmq.cli.embedded", "fastmq.cli.proxy",
                   "fastmq.cli.bench_report")
# kcat's mode flags, accepted in the first position: `fastmq -L -b HOST:PORT` is `fastmq metadata -b HOST:PORT`.
KCAT_MODES = {"-L": "metadata", "-P": "produce", "-C": "consume"}


def fastmq_version() -> str:
    try:
        return version("fastmq")
    except PackageNotFoundError:            # a source checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fastmq", description="fastmq: message-queue clients, broker and tools",
                                     epilog=EXIT_CODES_HELP)
    parser.add_argument("--version", action="version", version=f"fastmq {fastmq_version()}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
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


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM unwinds like Ctrl-C, so that brokers this command started stop and temporary directories go.
    raise SystemExit(ExitCode.TERMINATED)


def main(argv: Sequence[str] | None = None) -> int:
    as_command = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    debug = "--debug" in argv
    if debug:
        argv.remove("--debug")
    if argv and argv[0] in KCAT_MODES:
        argv[0] = KCAT_MODES[argv[0]]
    if argv and argv[0] == "bench":
        targets = parser.get_default("bench_targets")
        if len(argv) == 1 or (argv[1] not in targets and argv[1] not in ("-h", "--help")):
            argv.insert(1, parser.get_default("default_bench"))   # `fastmq bench [options]`: the main job
    args = parser.parse_args(argv)
    if as_command and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:         # `fastmq consume | head`: the reader went away
        return 0
    except Exception as exc:
        if debug:
            raise
        failure = exc if isinstance(exc, CommandError) else from_library_error(exc)
        if failure is None:
            failure = CommandError(f"{type(exc).__name__}: {exc} (--debug shows where)")
        print(f"fastmq: {failure}", file=sys.stderr)
        return failure.exit_code
