"""format("fastmq-store"): a message-store directory (CommitLog + ConsumeQueue, fastmq.store) read in parallel
without a broker, for offline analysis of a broker's data.

    spark.read.format("fastmq-store").option("subscribe", "events").load("/var/lib/fastmq")

The rows are format("fastmq")'s (Spark's Kafka connector's schema). A topic is a store topic, a partition a
queue, an offset the queue's logical offset, as fastmq's embedded broker keeps Kafka partitions. Each Spark
partition is an offset range of one queue (split further by minPartitions / maxRecordsPerPartition); an
executor opens the store read-only, turns the queue's CommitLog messages into Kafka record batches as the
broker's Fetch does (kafka_store.build_batches) and decodes them with the columnar reader.

Options: path (the store directory, or load(path)); subscribe (topics, comma-separated; default every topic in
the store) or subscribePattern; minPartitions, maxRecordsPerPartition, includeHeaders. The store is read as
it is on disk: records of aborted transactions are included (there is no read_committed without the broker's
transaction state), and timestampType is 0 (CreateTime) for every record.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from fastmq.broker.kafka._native import kafka_store
from fastmq.spark.options import OptionError
from fastmq.spark.partition_reader import OffsetRange, records_to_spark, walk_batches
from fastmq.spark.schema import ConstantColumns, column_names, spark_ddl
from fastmq.spark.source import split_ranges
from fastmq.store import MessageStore, MessageStoreConfig

STORE_OPTIONS = frozenset({"path", "subscribe", "subscribepattern", "minpartitions", "maxrecordsperpartition",
                           "includeheaders"})
UNITS_PER_READ = 20_000                     # queue units per read: about one Arrow batch of records
MAX_READ_BYTES = 16 << 20


@dataclass(frozen=True)
class StoreOptions:
    path: str
    topics: tuple[str, ...] | None
    pattern: str | None
    min_partitions: int | None
    max_records_per_partition: int | None
    include_headers: bool


def parse_store_options(options: Any) -> StoreOptions:
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - STORE_OPTIONS)
    if unknown:
        raise OptionError(f"unknown option(s) {unknown} for format 'fastmq-store'; its options are "
                          f"{sorted(STORE_OPTIONS)} (it reads a store directory: no kafka.* options)")
    path = opts.get("path")
    if not path:
        raise OptionError("format 'fastmq-store' needs the store directory: .load('/path/to/store')")
    if not (Path(path) / "commitlog").is_dir():
        raise OptionError(f"{path} is not a message-store directory (it has no commitlog directory)")
    if "subscribe" in opts and "subscribepattern" in opts:
        raise OptionError("give one of 'subscribe' and 'subscribePattern', not both")
    numbers = {}
    for name in ("minpartitions", "maxrecordsperpartition"):
        if name in opts:
            if not opts[name].isdigit() or int(opts[name]) <= 0:
                raise OptionError(f"option {name!r} must be a positive integer, not {opts[name]!r}")
            numbers[name] = int(opts[name])
    headers = opts.get("includeheaders", "false").lower()
    if headers not in ("true", "false"):
        raise OptionError(f"option 'includeHeaders' must be true or false, not {headers!r}")
    topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip()) if "subscribe" in opts else None
    return StoreOptions(path, topics, opts.get("subscribepattern"), numbers.get("minpartitions"),
                        numbers.get("maxrecordsperpartition"), headers == "true")


_stores: dict[str, MessageStore] = {}
_stores_lock = threading.Lock()


def open_store(path: str) -> MessageStore:
    """The store at `path`, read-only, one per process (Spark reuses its Python workers)."""
    with _stores_lock:
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = MessageStore(path, MessageStoreConfig(read_only=True))
        return store


class StoreDataSource(DataSource):
    """Spark's format("fastmq-store") (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "fastmq-store"

    def schema(self) -> str:
        return spark_ddl(str(self.options.get("includeHeaders", "false")).lower() == "true")

    def reader(self, schema: StructType) -> "StoreReader":
        options = parse_store_options(self.options)
        if [f.name for f in schema.fields] != column_names(options.include_headers):
            raise OptionError(f"format 'fastmq-store' has a fixed schema ({spark_ddl(options.include_headers)})")
        return StoreReader(options)


class StoreReader(DataSourceReader):
    def __init__(self, options: StoreOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        store = MessageStore(options.path, MessageStoreConfig(read_only=True))
        try:
            queues = sorted((q.topic, q.queue_id) for q in store.consume_queues())
            known = {topic for topic, _ in queues}
            if options.topics is not None:
                missing = sorted(set(options.topics) - known)
                if missing:
                    raise OptionError(f"topic(s) {missing} are not in the store at {options.path}; it holds "
                                      f"{sorted(known)}")
                queues = [q for q in queues if q[0] in options.topics]
            elif options.pattern is not None:
                pattern = re.compile(options.pattern)
                queues = [q for q in queues if pattern.fullmatch(q[0])]
            ranges = [OffsetRange(topic, queue, store.get_min_offset(topic, queue), store.get_max_offset(topic, queue))
                      for topic, queue in queues]
        finally:
            store.close()
        return [InputPartition(r) for r in split_ranges(ranges, options.min_partitions,
                                                        options.max_records_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        offsets: OffsetRange = partition.value
        store = open_store(self.options.path)
        constants = ConstantColumns()
        offset = offsets.start
        while offset < offsets.end:
            units = store.scan_queue(offsets.topic, offsets.partition, offset,
                                     min(UNITS_PER_READ, offsets.end - offset), max_bytes=MAX_READ_BYTES)
            if not len(units):
                raise OSError(f"{offsets.topic}-{offsets.partition}: the store has no record at offset {offset} "
                              f"(the range read is [{offsets.start}, {offsets.end}))")
            records, count = store.read_records(units)
            batches, taken, next_offset = kafka_store.build_batches(records, count, 1 << 62, True, False)
            if not taken:
                break
            _, walked = walk_batches(batches, None)
            batch = records_to_spark(batches, walked, offset, offsets.end, offsets.topic, offsets.partition,
                                     self.options.include_headers, constants)
            offset = next_offset
            if batch is not None and batch.num_rows:
                yield batch
