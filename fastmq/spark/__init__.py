"""fastmq on Spark: PySpark data sources for Kafka topics (format "fastmq") and message-store directories
(format "fastmq-store"), a pure-pip drop-in for Spark's Kafka connector.

    import fastmq.spark
    fastmq.spark.register(spark)
    df = (spark.readStream.format("fastmq").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Options and schema are Spark's Kafka connector's (fastmq/spark/options.py); reads decode record batches
straight into Arrow (fastmq/spark/partition_reader.py); writes go through fastmq's producer (sink.py).
Needs the extra: pip install "fastmq[spark]" (pyspark[sql] >= 4.2, pyarrow). Spark's Python workers run the
interpreter named by PYSPARK_PYTHON: point it at the one that has fastmq installed.
"""
from __future__ import annotations

from typing import Any

try:
    import pyarrow  # noqa: F401
    import pyspark.sql.datasource  # noqa: F401
    from pyspark.sql.streaming.datasource import ReadMaxRows  # noqa: F401  (pyspark >= 4.2: read limits)
except ImportError as exc:          # pragma: no cover - exercised by tests/spark/test_register.py in a subprocess
    raise ImportError(f"fastmq.spark needs pyspark[sql] >= 4.2 and pyarrow: pip install 'fastmq[spark]' ({exc})") \
        from exc

from fastmq.spark.options import OptionError
from fastmq.spark.partition_reader import DataLossError
from fastmq.spark.source import KafkaDataSource
from fastmq.spark.store_source import StoreDataSource

__all__ = ["DataLossError", "KafkaDataSource", "OptionError", "StoreDataSource", "register"]


def register(spark: Any) -> None:
    """Register the formats "fastmq" and "fastmq-store" on a SparkSession."""
    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(StoreDataSource)
