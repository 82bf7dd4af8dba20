"""The options of format("fastmq"): Spark's Kafka connector's names and meanings, checked when the query is
analysed.

A job written for format("kafka") runs by changing the format name only. Options arrive as Spark gives them
to a Python data source: a case-insensitive map of strings. Everything is checked here, on the driver, before
any task starts; an unknown or contradictory option raises OptionError saying what to write instead.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from fastmq.kafka.client import CLIENT_OPTIONS

_log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1           # Spark's (and Kafka's ListOffsets') markers in offset JSON


class OptionError(ValueError):
    """An option of format("fastmq") that cannot be used; the message says what to write instead."""


# Spark's own source options, lower-cased as Spark hands them over. Spark's Kafka connector accepts exactly
# these (plus kafka.*); anything else is a typo that the JVM connector would silently ignore, refused here.
SOURCE_OPTIONS = frozenset(name.lower() for name in (
    "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "includeHeaders", "failOnDataLoss", "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "topic", "path",
    "checkpointLocation",           # a streaming write's options carry its query's checkpoint
))

# kafka.* options Spark's connector refuses, with what to write instead.
REFUSED_KAFKA = {
    "auto.offset.reset": "use the option startingOffsets (earliest or latest)",
    "key.deserializer": "keys are always binary: cast them in a query (CAST(key AS STRING))",
    "value.deserializer": "values are always binary: cast them in a query (CAST(value AS STRING))",
    "key.serializer": "write a binary or string key column",
    "value.serializer": "write a binary or string value column",
    "enable.auto.commit": "offsets are tracked in the query's checkpoint, not committed to the group",
    "interceptor.classes": "interceptors are Java classes; none can run in fastmq",
}

# Java client names (as Spark passes them after kafka.) -> fastmq's (kafka-python's) names, where they differ
# by more than dots for underscores.
JAVA_NAMES = {
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
    "fetch.max.bytes": "fetch_max_bytes",
    "isolation.level": "isolation_level",
    "ssl.truststore.location": "ssl_cafile",          # PEM files (fastmq has no JKS)
    "ssl.keystore.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "compression.type": "compression_type",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "acks": "acks",
}
# Client options that only a reader or only a writer takes (passed on by the side that knows them).
READ_ONLY = frozenset({"max_partition_fetch_bytes", "fetch_max_bytes", "isolation_level"})
WRITE_ONLY = frozenset({"compression_type", "linger_ms", "batch_size", "acks"})
IGNORED_KAFKA = frozenset({"group.id", "ssl.truststore.type", "ssl.keystore.type", "sasl.jaas.config",
                           "ssl.endpoint.identification.algorithm", "ssl.truststore.password",
                           "ssl.keystore.password"})
_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


@dataclass(frozen=True)
class KafkaOptions:
    """The checked options of one read or write (picklable: it travels to the executors)."""

    bootstrap_servers: str
    client: tuple[tuple[str, Any], ...]            # ClientConfig options (kafka-python names)
    reader: tuple[tuple[str, Any], ...] = ()       # read-only client options (fetch sizes, isolation level)
    writer: tuple[tuple[str, Any], ...] = ()       # producer options
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: Any = None                           # "earliest" | "latest" | {topic: {partition: offset}}
    ending: Any = None
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: dict[Any, Any] | None = field(default=None, hash=False)
    ending_by_timestamp: dict[Any, Any] | None = field(default=None, hash=False)
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    topic: str | None = None                       # the sink's default topic

    @property
    def read_committed(self) -> bool:
        return dict(self.reader).get("isolation_level") == "read_committed"

    def client_config(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers, **dict(self.client)}


def parse_options(options: Mapping[str, str], *, streaming: bool = False, writing: bool = False) -> KafkaOptions:
    """Check Spark's options (a case-insensitive map of strings) for a batch or streaming read or a write."""
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(k for k in opts if not k.startswith("kafka.") and k not in SOURCE_OPTIONS)
    if unknown:
        raise OptionError(f"unknown option(s) {unknown} for format 'fastmq': the options are Spark's Kafka "
                          f"connector's ({', '.join(sorted(SOURCE_OPTIONS - {'path'}))}) and kafka.* for the client")
    servers = opts.get("kafka.bootstrap.servers")
    if not servers:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified: "
                          ".option('kafka.bootstrap.servers', 'host:9092')")
    client, reader, writer = _kafka_options(opts)
    values: dict[str, Any] = {"bootstrap_servers": servers, "client": client, "reader": reader, "writer": writer}
    if writing:
        for name in ("subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets"):
            if name in opts:
                _log.warning("option %r is for reading; a write ignores it", name)
        values["topic"] = opts.get("topic")
        return KafkaOptions(**values)
    if "topic" in opts:
        raise OptionError("option 'topic' is for writing: read a topic with .option('subscribe', 'topic')")
    values.update(_subscription(opts))
    values.update(_offsets(opts, streaming))
    values["include_headers"] = _bool(opts, "includeheaders", False)
    values["fail_on_data_loss"] = _bool(opts, "failondataloss", True)
    values["min_partitions"] = _positive(opts, "minpartitions")
    values["max_records_per_partition"] = _positive(opts, "maxrecordsperpartition")
    values["poll_timeout_ms"] = _positive(opts, "kafkaconsumer.polltimeoutms") or 120_000
    rate = {name: _positive(opts, name) for name in ("maxoffsetspertrigger", "minoffsetspertrigger")}
    if streaming:
        values["max_offsets_per_trigger"] = rate["maxoffsetspertrigger"]
        values["min_offsets_per_trigger"] = rate["minoffsetspertrigger"]
        if "maxtriggerdelay" in opts:
            values["max_trigger_delay_ms"] = _duration_ms(opts["maxtriggerdelay"])
        low, high = rate["minoffsetspertrigger"], rate["maxoffsetspertrigger"]
        if low is not None and high is not None and low > high:
            raise OptionError(f"minOffsetsPerTrigger ({low}) must not exceed maxOffsetsPerTrigger ({high})")
    else:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                _log.warning("option %s is for streaming queries; a batch query ignores it", name)
    return KafkaOptions(**values)


def _kafka_options(opts: dict[str, str]) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
    client: dict[str, Any] = {"allow_auto_create_topics": False}
    reader: dict[str, Any] = {}
    writer: dict[str, Any] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka."):]
        if name in REFUSED_KAFKA:
            raise OptionError(f"option {key!r} is not supported: {REFUSED_KAFKA[name]}")
        if name == "group.id":
            _log.warning("kafka.group.id is ignored: fastmq reads partitions directly, without a group")
            continue
        if name == "sasl.jaas.config":
            found = dict(_JAAS.findall(value))
            if "username" in found:
                client["sasl_plain_username"] = found["username"]
                client["sasl_plain_password"] = found.get("password", "")
            continue
        if name == "ssl.endpoint.identification.algorithm":
            client["ssl_check_hostname"] = bool(value)
            continue
        if name in IGNORED_KAFKA:
            continue
        target = JAVA_NAMES.get(name, name.replace(".", "_"))
        if target in READ_ONLY:
            reader[target] = _typed(value)
        elif target in WRITE_ONLY:
            writer[target] = _typed(value)
        elif target in CLIENT_OPTIONS and target not in ("bootstrap_servers", "ssl_context", "socket_options"):
            client[target] = _typed(value)
        else:
            raise OptionError(f"option {key!r} is not a client option fastmq knows; the kafka.* options it takes "
                              f"are {sorted(set(JAVA_NAMES) | {n.replace('_', '.') for n in CLIENT_OPTIONS})}")
    level = reader.get("isolation_level", "read_uncommitted")
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, not {level!r}")
    return tuple(sorted(client.items())), tuple(sorted(reader.items())), tuple(sorted(writer.items()))


def _typed(value: str) -> Any:
    """Spark hands every option over as a string; numbers become numbers for the client."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _subscription(opts: dict[str, str]) -> dict[str, Any]:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(given) != 1:
        raise OptionError("exactly one of the options 'subscribe' (topics, comma-separated), 'subscribePattern' "
                          "(a regex) and 'assign' (JSON {\"topic\": [0, 1]}) must be given, "
                          f"not {len(given)} ({', '.join(given) or 'none'})")
    name = given[0]
    if name == "subscribe":
        topics = tuple(t.strip() for t in opts[name].split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic: .option('subscribe', 'topicA,topicB')")
        return {"subscribe": topics}
    if name == "subscribepattern":
        try:
            re.compile(opts[name])
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a regular expression: {exc}") from None
        return {"subscribe_pattern": opts[name]}
    assigned = _json(opts, name, "{\"topicA\": [0, 1]}")
    if not isinstance(assigned, dict) or not all(
            isinstance(p, list) and all(isinstance(i, int) for i in p) for p in assigned.values()):
        raise OptionError("option 'assign' must be JSON like {\"topicA\": [0, 1], \"topicB\": [2]}")
    return {"assign": tuple(sorted((t, p) for t, parts in assigned.items() for p in parts))}


def _offsets(opts: dict[str, str], streaming: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    starting = _offset_spec(opts, "startingoffsets", "latest" if streaming else "earliest")
    if starting == "latest" and not streaming:
        raise OptionError("startingOffsets 'latest' is for streaming queries: a batch read starts at 'earliest' "
                          "or at offsets given as JSON")
    if isinstance(starting, dict) and not streaming and any(o == LATEST for p in starting.values()
                                                            for o in p.values()):
        raise OptionError("startingOffsets may not use -1 (latest) in a batch query: use -2 (earliest) or an "
                          "offset")
    values["starting"] = starting
    if streaming:
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if name in opts:
                raise OptionError(f"option {name!r} is for batch queries: a streaming query has no end "
                                  "(use trigger(availableNow=True) to stop at what is there now)")
    else:
        ending = _offset_spec(opts, "endingoffsets", "latest")
        if ending == "earliest" or (isinstance(ending, dict) and any(
                o == EARLIEST for p in ending.values() for o in p.values())):
            raise OptionError("endingOffsets may not be 'earliest' (-2): use 'latest' or offsets as JSON")
        values["ending"] = ending
        if isinstance(starting, dict) and isinstance(ending, dict) and _partitions_of(starting) != \
                _partitions_of(ending):
            raise OptionError("startingOffsets and endingOffsets must name the same partitions")
        values["ending_timestamp"] = _timestamp(opts, "endingtimestamp")
        values["ending_by_timestamp"] = _timestamps_json(opts, "endingoffsetsbytimestamp")
    values["starting_timestamp"] = _timestamp(opts, "startingtimestamp")
    values["starting_by_timestamp"] = _timestamps_json(opts, "startingoffsetsbytimestamp")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', not {strategy!r}")
    values["timestamp_strategy"] = strategy
    return values


def _partitions_of(spec: dict[Any, Any]) -> set[tuple[str, int]]:
    return {(topic, int(p)) for topic, parts in spec.items() for p in parts}


def _offset_spec(opts: dict[str, str], name: str, default: str) -> Any:
    raw = opts.get(name, default).strip()
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    spec = _json(opts, name, "{\"topicA\": {\"0\": 23, \"1\": -2}}")
    if not isinstance(spec, dict) or not all(
            isinstance(p, dict) and all(k.lstrip("-").isdigit() and isinstance(v, int) and v >= -2
                                        for k, v in p.items()) for p in spec.values()):
        raise OptionError(f"option {name!r} must be earliest, latest or JSON like {{\"topicA\": {{\"0\": 23, "
                          "\"1\": -2}} (-2 earliest, -1 latest)")
    return {topic: {int(k): v for k, v in parts.items()} for topic, parts in spec.items()}


def _timestamps_json(opts: dict[str, str], name: str) -> dict[Any, Any] | None:
    if name not in opts:
        return None
    spec = _json(opts, name, "{\"topicA\": {\"0\": 1700000000000}}")
    if not isinstance(spec, dict) or not all(
            isinstance(p, dict) and all(k.isdigit() and isinstance(v, int) for k, v in p.items())
            for p in spec.values()):
        raise OptionError(f"option {name!r} must be JSON like {{\"topicA\": {{\"0\": 1700000000000}}}} "
                          "(epoch milliseconds per partition)")
    return {topic: {int(k): v for k, v in parts.items()} for topic, parts in spec.items()}


def _json(opts: dict[str, str], name: str, example: str) -> Any:
    try:
        return json.loads(opts[name])
    except ValueError:
        raise OptionError(f"option {name!r} is not JSON: write it like {example}") from None


def _timestamp(opts: dict[str, str], name: str) -> int | None:
    if name not in opts:
        return None
    try:
        value = int(opts[name])
    except ValueError:
        value = -1
    if value < 0:
        raise OptionError(f"option {name!r} must be epoch milliseconds (a non-negative integer), not {opts[name]!r}")
    return value


def _positive(opts: dict[str, str], name: str) -> int | None:
    if name not in opts:
        return None
    try:
        value = int(opts[name])
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(f"option {name!r} must be a positive integer, not {opts[name]!r}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    if raw.lower() not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {raw!r}")
    return raw.lower() == "true"


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(raw: str) -> int:
    """Spark's duration strings for maxTriggerDelay: '15m', '30s', '500ms' (a bare number is ms)."""
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    if not found or (found.group(2) and found.group(2) not in _UNITS_MS):
        raise OptionError(f"maxTriggerDelay must be a duration like 15m, 30s or 500ms, not {raw!r}")
    return int(found.group(1)) * _UNITS_MS.get(found.group(2) or "ms", 1)
