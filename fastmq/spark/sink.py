"""Writing a DataFrame to Kafka topics with fastmq's producer: format("fastmq") as a batch or streaming sink.

    df.selectExpr("CAST(id AS STRING) AS key", "payload AS value").write.format("fastmq") \\
        .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("topic", "out").mode("append").save()

Columns, as Spark's Kafka sink takes them: value (binary or string) is required; key (binary or string),
topic (string), partition (int) and headers (array<struct<key: string, value: binary>>) are optional; other
columns are ignored. The "topic" option, when set, wins over a topic column; one of the two is required.
A column of the wrong type is refused when the query is analysed.

Each Spark task writes with its own idempotent producer (retries of a request never duplicate its records),
sending whole Arrow columns through Producer.send_many where it can (no headers, no partition column), and
returns once every record is acknowledged; its commit message carries the count of records written.

The guarantee is at-least-once, as with Spark's Kafka sink: a task that fails after some of its records were
acknowledged and is retried writes those records again (duplicating at most what the failed attempt wrote),
and a streaming batch replayed after a restart is written again. Exactly-once would need a transaction per
task that the driver commits after all tasks succeed; fastmq's producer commits its own transactions, and a
transaction cannot be handed from an executor's producer to the driver, so it is not offered.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, StringType, StructType,
)

from fastmq.kafka.producer import Producer
from fastmq.spark.options import KafkaOptions, OptionError

_log = logging.getLogger(__name__)

ACK_TIMEOUT_S = 300.0


@dataclass
class WriteCount(WriterCommitMessage):
    """What one task wrote."""

    records: int


def check_columns(schema: StructType, options: KafkaOptions) -> None:
    """Spark's Kafka sink's rules for the input columns (see the module docstring)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    binary_or_string = (BinaryType, StringType)
    if "value" not in types:
        raise OptionError("the DataFrame to write needs a value column (binary or string), e.g. "
                          "selectExpr('CAST(x AS STRING) AS value')")
    for name, allowed in (("value", binary_or_string), ("key", binary_or_string), ("topic", (StringType,)),
                          ("partition", (IntegerType,))):
        if name in types and not isinstance(types[name], allowed):
            raise OptionError(f"column {name!r} is {types[name].simpleString()}; it must be "
                              f"{' or '.join(t.typeName() for t in allowed)} (cast it)")
    if "headers" in types:
        headers = types["headers"]
        if not (isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
                and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
                == [("key", StringType), ("value", BinaryType)]):
            raise OptionError(f"column 'headers' is {headers.simpleString()}; it must be "
                              "array<struct<key:string,value:binary>>")
    if options.topic is None and "topic" not in types:
        raise OptionError("no topic to write to: set .option('topic', name) or give a topic column")


class TopicWriter:
    """One task's producer and what it sent."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self.producer = Producer(options.bootstrap_servers, enable_idempotence=True,
                                 **{**dict(options.client), **dict(options.writer)})
        self.pending: list[Any] = []
        self.count = 0

    def write(self, batches: Iterator[pa.RecordBatch]) -> WriteCount:
        try:
            for batch in batches:
                self._send(batch)
                if len(self.pending) > 10_000:
                    self._wait()
            self._wait()
        finally:
            self.producer.close()
        return WriteCount(self.count)

    def _wait(self) -> None:
        self.producer.flush(ACK_TIMEOUT_S)
        for result in self.pending:
            result.get(ACK_TIMEOUT_S)
        self.pending.clear()

    def _send(self, batch: pa.RecordBatch) -> None:
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        if not batch.num_rows:
            return
        column = {name: batch.column(i) for name, i in names.items()}
        values, keys = column["value"], column.get("key")
        topics: dict[str, Any]                  # topic -> the mask of its rows (None: every row)
        if self.options.topic is not None or "topic" not in column:
            assert self.options.topic is not None   # check_columns refused a write with neither
            topics = {self.options.topic: None}
        else:
            topic_column = column["topic"]
            if topic_column.null_count:
                raise ValueError("a row has a null topic and no 'topic' option is set")
            topics = {t: pc.equal(topic_column, t) for t in pc.unique(topic_column).to_pylist()}
        if "headers" in column or "partition" in column:
            self._send_rows(batch, column, topics)
            return
        for topic, mask in topics.items():
            part_values = values if mask is None else values.filter(mask)
            part_keys = keys if keys is None or mask is None else keys.filter(mask)
            self.pending.append(self.producer.send_many(topic, part_values, keys=part_keys))
            self.count += len(part_values)

    def _send_rows(self, batch: pa.RecordBatch, column: dict[str, pa.Array], topics: dict[str, Any]) -> None:
        """Rows with headers or an explicit partition: one send() each."""
        rows = {name: array.to_pylist() for name, array in column.items()
                if name in ("value", "key", "topic", "partition", "headers")}
        topic_option = self.options.topic
        for i in range(batch.num_rows):
            headers = rows["headers"][i] if "headers" in rows else None
            self.pending.append(self.producer.send(
                topic_option if topic_option is not None else rows["topic"][i], _bytes(rows["value"][i]),
                key=_bytes(rows["key"][i]) if "key" in rows else None,
                headers=[(h["key"], h["value"]) for h in headers] if headers else None,
                partition=rows["partition"][i] if "partition" in rows else None))
            self.count += 1


def _bytes(value: Any) -> Any:
    return value.encode() if isinstance(value, str) else value


class _TaskWrites:
    """What both writers do on an executor: check the columns when built, write a task's batches."""

    def __init__(self, options: KafkaOptions, schema: StructType) -> None:
        check_columns(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCount:
        return TopicWriter(self.options).write(iterator)


class KafkaBatchWriter(_TaskWrites, DataSourceArrowWriter):
    """df.write.format("fastmq") (mode append): at-least-once, see the module docstring."""

    # The messages are the WriteCounts of write() (None for a task that failed).
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log.info("wrote %d records to Kafka in %d tasks", sum(m.records for m in messages if isinstance(m, WriteCount)),
                  len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, WriteCount)]
        _log.warning("write aborted: %d of %d tasks had written %d records (they stay in the topic: the sink is "
                     "at-least-once)", len(done), len(messages), sum(m.records for m in done))


class KafkaStreamWriter(_TaskWrites, DataSourceStreamArrowWriter):
    """writeStream.format("fastmq"): at-least-once, see the module docstring."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log.info("batch %d: wrote %d records to Kafka", batchId,
                  sum(m.records for m in messages if isinstance(m, WriteCount)))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, WriteCount)]
        _log.warning("batch %d aborted: %d records had been written (at-least-once: they stay)", batchId,
                     sum(m.records for m in done))
