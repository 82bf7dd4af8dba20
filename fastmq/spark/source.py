"""format("fastmq"): Kafka topics as a Spark source and sink, a drop-in for Spark's Kafka connector.

    fastmq.spark.register(spark)
    df = (spark.read.format("fastmq").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Batch reads: the partitions of the Spark read are offset ranges per topic-partition ([start, end) resolved on
the driver when the query runs), split further when minPartitions or maxRecordsPerPartition ask for more.
Streaming reads: offsets are {"topic": {"0": 123}} (the next offset to read per partition), as Spark's Kafka
source writes them in the checkpoint; admission control through maxOffsetsPerTrigger (shared among partitions
in proportion to their backlog, never more in all) and minOffsetsPerTrigger with maxTriggerDelay; partitions
added to a subscribed topic are read from their start; Trigger.AvailableNow reads up to the offsets that were
latest when the query started. Executors read with partition_reader.PartitionReader, which yields Arrow
record batches decoded by the columnar reader.
"""
from __future__ import annotations

import math
import time
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from fastmq.kafka.structs import TopicPartition
from fastmq.spark import offsets as kafka_offsets
from fastmq.spark.offsets import from_json, to_json
from fastmq.spark.options import KafkaOptions, OptionError, parse_options
from fastmq.spark.partition_reader import OffsetRange, PartitionReader, data_loss
from fastmq.spark.schema import column_names, spark_ddl


class KafkaDataSource(DataSource):
    """Spark's format("fastmq"): options and schema of Spark's Kafka connector (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "fastmq"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return spark_ddl(include)

    def reader(self, schema: StructType) -> "KafkaBatchReader":
        return KafkaBatchReader(parse_options(self.options), schema)

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        return KafkaStreamReader(parse_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from fastmq.spark.sink import KafkaBatchWriter

        if overwrite:
            raise OptionError("a Kafka topic cannot be overwritten: write with .mode('append')")
        return KafkaBatchWriter(parse_options(self.options, writing=True), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from fastmq.spark.sink import KafkaStreamWriter

        return KafkaStreamWriter(parse_options(self.options, writing=True), schema)


def _check_schema(schema: StructType, options: KafkaOptions) -> None:
    names = [f.name for f in schema.fields]
    if names != column_names(options.include_headers):
        raise OptionError(f"format 'fastmq' has a fixed schema ({spark_ddl(options.include_headers)}), not "
                          f"{schema.simpleString()}: do not give one with .schema(...); includeHeaders=true adds "
                          "the headers column")


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Drop empty ranges; split ranges into pieces of at most maxRecordsPerPartition records, then, when
    minPartitions asks for more pieces than there are, each in proportion to its size (Spark's rule)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        ranges = [piece for r in ranges for piece in _split(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions and min_partitions > len(ranges):
        total = sum(r.size for r in ranges)
        ranges = [piece for r in ranges for piece in _split(r, max(round(r.size / total * min_partitions), 1))]
    return ranges


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _ranges(options: KafkaOptions, start: dict[TopicPartition, int], end: dict[TopicPartition, int]) \
        -> list[InputPartition]:
    earliest_needed = [tp for tp in end if tp not in start]
    earliest = kafka_offsets.earliest_offsets(options, earliest_needed)   # partitions new since the start
    ranges = []
    for tp in sorted(end):
        first = start.get(tp, earliest.get(tp, 0))
        if end[tp] < first:
            data_loss(options, f"{tp}: the offsets went back from {first} to {end[tp]} (was the topic recreated?)")
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, first, end[tp]))
    return [InputPartition(r) for r in split_ranges(ranges, options.min_partitions,
                                                    options.max_records_per_partition)]


class KafkaBatchReader(DataSourceReader):
    """The batch read: ranges resolved in partitions() (driver), read in read() (executors)."""

    def __init__(self, options: KafkaOptions, schema: StructType) -> None:
        _check_schema(schema, options)
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        partitions = kafka_offsets.subscribed_partitions(options)
        start = kafka_offsets.resolve(options, partitions, ending=False)
        end = kafka_offsets.resolve(options, partitions, ending=True)
        for tp in partitions:
            if end[tp] < start[tp]:
                raise OptionError(f"{tp}: the ending offset {end[tp]} is before the starting offset {start[tp]}; "
                                  "check startingOffsets / endingOffsets (or their timestamps)")
        return _ranges(options, start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return iter(PartitionReader(self.options, partition.value))


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming read (see the module docstring). State on the reader (the availableNow target, when the
    last batch was admitted) lives in Spark's per-query source process on the driver."""

    def __init__(self, options: KafkaOptions, schema: StructType) -> None:
        _check_schema(schema, options)
        self.options = options
        self.available_now: dict[TopicPartition, int] | None = None
        self.last_trigger = time.monotonic()
        self.latest: dict[str, dict[str, int]] | None = None

    def initialOffset(self) -> dict[Any, Any]:
        partitions = kafka_offsets.subscribed_partitions(self.options)
        return to_json(kafka_offsets.resolve(self.options, partitions, ending=False))

    def prepareForTriggerAvailableNow(self) -> None:
        partitions = kafka_offsets.subscribed_partitions(self.options)
        self.available_now = kafka_offsets.latest_offsets(self.options, partitions)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[Any, Any] | None:
        return self.latest

    def latestOffset(self, start: dict[Any, Any], limit: ReadLimit) -> dict[Any, Any]:
        options = self.options
        begin = from_json(start)
        if self.available_now is not None:
            latest = dict(self.available_now)
        else:
            latest = kafka_offsets.latest_offsets(options, kafka_offsets.subscribed_partitions(options))
        self.latest = to_json(latest)
        new = [tp for tp in latest if tp not in begin]
        begin.update(kafka_offsets.earliest_offsets(options, new))
        backlog = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
        total = sum(backlog.values())
        minimum = options.min_offsets_per_trigger
        if minimum and total < minimum and self.available_now is None and \
                (time.monotonic() - self.last_trigger) * 1000 < options.max_trigger_delay_ms:
            return to_json({tp: begin[tp] for tp in latest})       # too little yet: no batch this time
        end = dict(latest)
        if isinstance(limit, ReadMaxRows):
            end = {tp: begin[tp] + n for tp, n in _share(backlog, limit.max_rows).items()}
        if end != {tp: begin[tp] for tp in latest}:
            self.last_trigger = time.monotonic()
        return to_json(end)

    def partitions(self, start: dict[Any, Any], end: dict[Any, Any]) -> Sequence[InputPartition]:
        return _ranges(self.options, from_json(start), from_json(end))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return iter(PartitionReader(self.options, partition.value))

    def commit(self, end: dict[Any, Any]) -> None:
        """Progress is recorded in the query's checkpoint: nothing to commit to Kafka."""


def _share(backlog: dict[TopicPartition, int], total: int) -> dict[TopicPartition, int]:
    """Split `total` records among partitions in proportion to their backlog, never more than a partition has
    nor more than `total` in all (Spark's connector may exceed it by rounding up small shares)."""
    available = sum(backlog.values())
    if available <= total:
        return dict(backlog)
    share = {tp: min(n, total * n // available) for tp, n in backlog.items()}
    left = total - sum(share.values())
    for tp in sorted(backlog, key=lambda tp: backlog[tp] - share[tp], reverse=True):
        if left <= 0:
            break
        extra = min(left, backlog[tp] - share[tp])
        share[tp] += extra
        left -= extra
    return share
