"""format("fastmq-store"): a message-store directory (CommitLog + ConsumeQueue, fastmq.store) read in parallel
without a broker, for offline analysis of a broker's data.

    spark.read.format("fastmq-store").option("subscribe", "events").load("/var/lib/fastmq")

The rows are format("fastmq")'s (Spark's Kafka connector's schema). A topic is a store topic, a partition a
queue, an offset the queue's logical offset, as fastmq's embedded broker keeps Kafka partitions. Each Spark
partition is an offset range of one queue (split further by minPartitions / maxRecordsPerPartition); an
executor opens the store read-only, turns the queue's CommitLog messages into Kafka record batches as the
broker's Fetch does (kafka_store.build_batches) and decodes them with the columnar reader.

Options: path (the store directory, or load(path)); subscribe (topics, comma-separated; default every topic in
the store) or subscribePattern; minPartitions, maxRecordsPerPartition, includeHeaders; kafka.isolation.level,
as in format("fastmq"): read_uncommitted (the default) or read_committed.

timestampType is the Kafka read's: 1 (LogAppendTime) in a topic created with message.timestamp.type
LogAppendTime (the topic configs the broker keeps in the store's config/kafkaTopics.json), else 0.

read_committed hides the records of aborted transactions, reading the transaction markers the store keeps
(control records): a transactional batch of a producer is shown when the next marker of that producer in the
queue is a commit, and hidden when it is an abort. The marker may lie past the end of the range read: the
reader looks ahead in the queue for it. A transaction that has no marker at all (the broker stopped while it
was open) is hidden too, as nothing committed it; unlike a broker's read_committed fetch, which stops at the
first open transaction (the last stable offset), the records after it are read, since in a store on disk no
transaction will end any more.
"""
from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from fastmq.broker.kafka._native import kafka_store
from fastmq.broker.kafka.topic_rules import TIMESTAMP_TYPE
from fastmq.broker.topics import TopicExtrasFile
from fastmq.spark.options import OptionError
from fastmq.spark.partition_reader import (
    CONTROL_BIT, TRANSACTIONAL_BIT, OffsetRange, batch_headers, records_to_spark, walk_batches,
)
from fastmq.spark.schema import ConstantColumns, column_names, spark_ddl
from fastmq.spark.source import split_ranges
from fastmq.store import MessageStore, MessageStoreConfig

STORE_OPTIONS = frozenset({"path", "subscribe", "subscribepattern", "minpartitions", "maxrecordsperpartition",
                           "includeheaders", "kafka.isolation.level"})
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
    read_committed: bool = False


def parse_store_options(options: Any) -> StoreOptions:
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - STORE_OPTIONS)
    if unknown:
        raise OptionError(f"unknown option(s) {unknown} for format 'fastmq-store'; its options are "
                          f"{sorted(STORE_OPTIONS)} (it reads a store directory: no other kafka.* options)")
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
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, not {isolation!r}")
    topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip()) if "subscribe" in opts else None
    return StoreOptions(path, topics, opts.get("subscribepattern"), numbers.get("minpartitions"),
                        numbers.get("maxrecordsperpartition"), headers == "true", isolation == "read_committed")


_stores: dict[str, MessageStore] = {}
_stores_lock = threading.Lock()


def open_store(path: str) -> MessageStore:
    """The store at `path`, read-only, one per process (Spark reuses its Python workers)."""
    with _stores_lock:
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = MessageStore(path, MessageStoreConfig(read_only=True))
        return store


ABORT, COMMIT = 0, 1      # a control record's type, in its key: [version i16][type i16]
RECORDS_AT = 61           # the first record of a v2 batch, after the batch header


def control_type(view: memoryview, batch_position: int) -> int:
    """The type of the control record of the control batch at batch_position: its key's second int16.
    record: length varint, attributes int8, timestamp delta varint, offset delta varint, key length varint, key."""
    try:
        pos = _skip_varint(view, batch_position + RECORDS_AT) + 1
        pos = _skip_varint(view, _skip_varint(view, pos))
        pos = _skip_varint(view, pos)
    except IndexError:
        pos = len(view)
    if pos + 4 > len(view):
        raise ValueError(f"the control batch at {batch_position} is truncated")
    return int.from_bytes(view[pos + 2:pos + 4], "big")


def _skip_varint(view: memoryview, pos: int) -> int:
    while view[pos] & 0x80:
        pos += 1
    return pos + 1


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
        appended = log_append_time_topics(options.path)
        return [InputPartition((r, r.topic in appended)) for r in split_ranges(
            ranges, options.min_partitions, options.max_records_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        offsets, log_append_time = partition.value
        store = open_store(self.options.path)
        constants = ConstantColumns()
        fates = TransactionFates(store, offsets.topic, offsets.partition) if self.options.read_committed else None
        offset = offsets.start
        while offset < offsets.end:
            batches, next_offset = store_batches(store, offsets.topic, offsets.partition, offset, offsets.end,
                                                 log_append_time)
            _, walked = walk_batches(batches, fates)
            batch = records_to_spark(batches, walked, offset, offsets.end, offsets.topic, offsets.partition,
                                     self.options.include_headers, constants)
            offset = next_offset
            if batch is not None and batch.num_rows:
                yield batch


def log_append_time_topics(path: str) -> set[str]:
    """The topics created with message.timestamp.type LogAppendTime, from the broker's topic configs."""
    extras = TopicExtrasFile(Path(path) / "config")      # load() only reads
    extras.load()
    return {name for name, entry in extras.entries.items()
            if dict(entry.get("configs") or {}).get(TIMESTAMP_TYPE) == "LogAppendTime"}


def store_batches(store: MessageStore, topic: str, queue: int, offset: int, end: int, log_append_time: bool) \
        -> tuple[bytes, int]:
    """The records of a queue from `offset` (up to UNITS_PER_READ of them, before `end`) as Kafka record
    batches, as the broker's Fetch builds them; and the offset after them."""
    units = store.scan_queue(topic, queue, offset, min(UNITS_PER_READ, end - offset), max_bytes=MAX_READ_BYTES)
    if not len(units):
        raise OSError(f"{topic}-{queue}: the store has no record at offset {offset} (reading up to {end})")
    records, count = store.read_records(units)
    batches, taken, next_offset = kafka_store.build_batches(records, count, 1 << 62, True, log_append_time)
    if not taken:
        raise OSError(f"{topic}-{queue}: the records at offset {offset} do not make a record batch")
    return batches, next_offset


class TransactionFates:
    """read_committed over a store queue (see the module docstring): is_aborted() says whether a batch belongs
    to a transaction that was not committed, from its producer's next marker, scanning ahead in the queue (only
    as far as a marker is needed) and remembering the markers seen."""

    def __init__(self, store: MessageStore, topic: str, queue: int) -> None:
        self.store, self.topic, self.queue = store, topic, queue
        self.end = store.get_max_offset(topic, queue)
        self.scanned = store.get_min_offset(topic, queue)       # markers before this are in self.markers
        # producer id -> offsets of its markers seen, in order, and whether each is a commit
        self.markers: dict[int, tuple[list[int], list[bool]]] = {}

    def is_aborted(self, last_offset: int, producer_id: int, attributes: int) -> bool:
        if attributes & CONTROL_BIT or not attributes & TRANSACTIONAL_BIT:
            return False
        while True:
            offsets, commits = self.markers.get(producer_id, ((), ()))
            index = bisect.bisect_right(offsets, last_offset)
            if index < len(offsets):
                return not commits[index]
            if self.scanned >= self.end:
                return True                     # no marker after it: never committed
            self._scan(max(self.scanned, last_offset + 1))

    def _scan(self, offset: int) -> None:
        batches, next_offset = store_batches(self.store, self.topic, self.queue, offset, self.end, False)
        view = memoryview(batches)
        for pos, base, _, attributes, producer_id in batch_headers(batches):
            if attributes & CONTROL_BIT:
                offsets, commits = self.markers.setdefault(producer_id, ([], []))
                offsets.append(base)
                commits.append(control_type(view, pos) == COMMIT)
        self.scanned = next_offset
