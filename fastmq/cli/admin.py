"""The administrative verbs, like Kafka's own tools, for any protocol with a back end in fastmq.cli.endpoint:

    fastmq metadata -b HOST:PORT (or fastmq -L ...)   brokers, topics, partitions and their leaders (kcat -L)
    fastmq topics list | create | describe | alter | delete     (kafka-topics.sh)
    fastmq groups list | describe | reset-offsets | delete      (kafka-consumer-groups.sh)

Every listing prints a table, or JSON with --output json. reset-offsets only shows the new offsets unless
--execute is given.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any, Callable

from fastmq.cli.endpoint import add_endpoint_options, open_admin
from fastmq.cli.failure import CommandError, ExitCode
from fastmq.cli.progress import print_table


def key_value(text: str) -> tuple[str, str]:
    """An argparse type: KEY=VALUE."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"wants KEY=VALUE, not {text!r}")
    return key, value


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    from fastmq.cli.produce import parse_client_options

    return parse_client_options(args.options)


def _common(parser: argparse.ArgumentParser, listing: bool) -> None:
    add_endpoint_options(parser)
    parser.add_argument("-X", dest="options", action="append", default=[], metavar="name=value",
                        help="a client setting, e.g. -X security_protocol=SASL_PLAINTEXT (repeatable)")
    if listing:
        parser.add_argument("--output", choices=["table", "json"], default="table", help="table (default) or json")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def emit(args: argparse.Namespace, data: Any, headers: list[str], rows: list[list[Any]]) -> None:
    if args.output == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(headers, [[_cell(c) for c in row] for row in rows])


def _partition_rows(topics: list[dict[str, Any]]) -> list[list[Any]]:
    return [[t["topic"], p["partition"], p["leader"], p["replicas"], p["isr"]]
            for t in topics for p in t["partitions"]]


PARTITION_HEADERS = ["topic", "partition", "leader", "replicas", "isr"]


def _with_admin(work: Callable[[argparse.Namespace, Any], int | None]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        with open_admin(args, client_options(args)) as admin:
            return work(args, admin) or 0
    return run


# ---- metadata --------------------------------------------------------------------------------------------------

def metadata(args: argparse.Namespace, admin: Any) -> None:
    data = admin.metadata(args.topics or None)
    if args.output == "json":
        emit(args, data, [], [])
        return
    print(f"cluster {data['cluster_id'] or '-'}, controller {data['controller']}, {len(data['brokers'])} broker(s):")
    print_table(["broker", "host", "port", "rack"],
                [[_cell(b["id"]), b["host"], _cell(b["port"]), _cell(b["rack"])] for b in data["brokers"]])
    print(f"{len(data['topics'])} topic(s):")
    emit(args, data, PARTITION_HEADERS, _partition_rows(data["topics"]))


# ---- topics ----------------------------------------------------------------------------------------------------

def topics_list(args: argparse.Namespace, admin: Any) -> None:
    names = admin.list_topics()
    if args.output == "json":
        emit(args, names, [], [])
    else:
        sys.stdout.write("".join(f"{name}\n" for name in names))


def topics_describe(args: argparse.Namespace, admin: Any) -> None:
    topics = admin.describe_topics(args.topics or None, configs=True)
    rows = _partition_rows(topics)
    for row, topic in zip(rows, (t for t in topics for _ in t["partitions"])):
        row.append(" ".join(f"{k}={v}" for k, v in topic["configs"].items()) if row[1] == 0 else "")
    emit(args, topics, PARTITION_HEADERS + ["configs"], rows)


def topics_create(args: argparse.Namespace, admin: Any) -> None:
    admin.create_topic(args.topic, args.partitions, args.replication_factor, dict(args.config))
    print(f"created topic {args.topic}", file=sys.stderr)


def topics_alter(args: argparse.Namespace, admin: Any) -> None:
    if args.partitions is None and not args.config and not args.delete_config:
        raise CommandError("nothing to alter: give --partitions, --config or --delete-config", ExitCode.USAGE)
    admin.alter_topic(args.topic, args.partitions, dict(args.config), args.delete_config)
    print(f"altered topic {args.topic}", file=sys.stderr)


def topics_delete(args: argparse.Namespace, admin: Any) -> None:
    admin.delete_topics(args.topics)
    print(f"deleted {', '.join(args.topics)}", file=sys.stderr)


# ---- groups ----------------------------------------------------------------------------------------------------

def groups_list(args: argparse.Namespace, admin: Any) -> None:
    groups = admin.list_groups()
    emit(args, groups, ["group", "type", "state"],
         [[g["group"], g["protocol_type"] or "-", g["state"]] for g in groups])


def groups_describe(args: argparse.Namespace, admin: Any) -> None:
    described = [admin.describe_group(group) for group in args.groups]
    emit(args, described, ["group", "topic", "partition", "committed", "end", "lag", "member"],
         [[d["group"], p["topic"], p["partition"], p["committed"], p["end"], p["lag"], p["member"]]
          for d in described for p in d["partitions"]])
    if args.output != "json":
        for d in described:
            print(f"group {d['group']}: {d['state']}, {d['members']} member(s)", file=sys.stderr)


def reset_target(args: argparse.Namespace) -> tuple[str, Any]:
    if args.to_datetime is not None:
        return "datetime", args.to_datetime
    if args.shift_by is not None:
        return "shift", args.shift_by
    return ("earliest" if args.to_earliest else "latest"), None


def parse_datetime(text: str) -> int:
    """An argparse type: an ISO 8601 date and time (local time unless it names a zone) -> epoch milliseconds."""
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants an ISO 8601 date and time such as 2026-01-31T12:00:00, "
                                         f"not {text!r}") from None


def groups_reset_offsets(args: argparse.Namespace, admin: Any) -> None:
    rows = admin.reset_offsets(args.group, args.topics, reset_target(args), args.execute)
    emit(args, rows, ["topic", "partition", "current", "new"],
         [[r["topic"], r["partition"], r["current"], r["new"]] for r in rows])
    if args.output != "json":
        print(f"group {args.group}: offsets reset" if args.execute
              else "dry run: nothing changed (--execute applies these offsets)", file=sys.stderr)


def groups_delete(args: argparse.Namespace, admin: Any) -> None:
    admin.delete_groups(args.groups)
    print(f"deleted {', '.join(args.groups)}", file=sys.stderr)


# ---- the parsers -----------------------------------------------------------------------------------------------

def _verb(verbs: argparse._SubParsersAction, name: str, help_text: str, work: Callable[[argparse.Namespace, Any],
          None], *, listing: bool) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text)
    _common(parser, listing)
    parser.set_defaults(func=_with_admin(work))
    return parser


def _config_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help=f"{help_text}, e.g. retention.ms=86400000 (repeatable)")


def register(commands: argparse._SubParsersAction, bench_targets: argparse._SubParsersAction) -> None:
    meta = _verb(commands, "metadata", "brokers, topics, partitions and leaders (like kcat -L; also -L)", metadata,
                 listing=True)
    meta.add_argument("-t", "--topic", dest="topics", action="append", help="only this topic (repeatable)")

    verbs = commands.add_parser("topics", help="list, create, describe, alter and delete topics").add_subparsers(
        dest="verb", required=True, metavar="VERB")
    _verb(verbs, "list", "the topics' names", topics_list, listing=True)
    verb = _verb(verbs, "describe", "partitions, leaders, replicas and non-default configs", topics_describe,
                 listing=True)
    verb.add_argument("topics", nargs="*", help="topics (default: all)")
    verb = _verb(verbs, "create", "create a topic", topics_create, listing=False)
    verb.add_argument("topic")
    verb.add_argument("--partitions", type=int, default=-1, help="default: the broker's")
    verb.add_argument("--replication-factor", type=int, default=-1, help="default: the broker's")
    _config_option(verb, "a topic setting")
    verb = _verb(verbs, "alter", "change settings or raise the partition count", topics_alter, listing=False)
    verb.add_argument("topic")
    verb.add_argument("--partitions", type=int, default=None, help="the new total partition count")
    _config_option(verb, "set a topic setting")
    verb.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                      help="return a setting to its default (repeatable)")
    verb = _verb(verbs, "delete", "delete topics and their records", topics_delete, listing=False)
    verb.add_argument("topics", nargs="+")

    verbs = commands.add_parser("groups", help="list, describe (with lag), reset offsets of, and delete groups"
                                ).add_subparsers(dest="verb", required=True, metavar="VERB")
    _verb(verbs, "list", "the consumer groups", groups_list, listing=True)
    verb = _verb(verbs, "describe", "committed offsets, end offsets and lag per partition", groups_describe,
                 listing=True)
    verb.add_argument("groups", nargs="+")
    verb = _verb(verbs, "reset-offsets", "move a group's committed offsets (a dry run without --execute)",
                 groups_reset_offsets, listing=True)
    verb.add_argument("group")
    verb.add_argument("-t", "--topic", dest="topics", action="append", default=[],
                      help="every partition of this topic (repeatable; default: the partitions the group committed)")
    target = verb.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-datetime", type=parse_datetime, metavar="ISO8601",
                        help="the first record at or after this time (local time unless a zone is given)")
    target.add_argument("--shift-by", type=int, metavar="N", help="move each committed offset by N (may be < 0)")
    verb.add_argument("--execute", action="store_true", help="commit the new offsets (default: only show them)")
    verb = _verb(verbs, "delete", "delete empty groups and their committed offsets", groups_delete, listing=False)
    verb.add_argument("groups", nargs="+")
