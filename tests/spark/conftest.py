"""The Spark tests' shared pieces: one SparkSession (local[2]) for the whole session, topics on the embedded
broker (tests/conftest.py's embedded_broker) filled once per module."""
from __future__ import annotations

import os
import sys
import uuid
from typing import Any, Callable

import pytest

from fastmq.kafka import Admin
from fastmq.kafka.admin import NewTopic


@pytest.fixture(scope="session")
def spark():
    # local[2,2]: two threads, and a failed task is tried once more (test_write retries one).
    # Spark's Python workers run PYSPARK_PYTHON (default: python3 from PATH), not this interpreter; they
    # inherit the JVM's environment, so PYTHONPATH reaches them and they import this tree's fastmq.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), os.environ.get("PYTHONPATH")] if p)
    from pyspark.sql import SparkSession

    import fastmq.spark

    session = (SparkSession.builder.master("local[2,2]").appName("fastmq-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    fastmq.spark.register(session)
    yield session
    session.stop()


def new_topic(bootstrap_servers: str, partitions: int, prefix: str = "spark") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
        admin.wait_for_topics([name], timeout=30)
    return name


def reader(spark, bootstrap_servers: str, topic: str, **options: str):
    read = spark.read.format("fastmq").option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
    for name, value in options.items():
        read = read.option(name, value)
    return read.load()


def run_to_end(start: Callable[[], Any], timeout: float = 240, attempts: int = 3) -> Any:
    """Start a streaming query and wait until it ends (availableNow), starting it again (same checkpoint) when
    Spark failed to launch its Python source process: Spark gives a new Python process 10 s (hard-coded in
    PythonWorkerFactory) to connect back, which a machine under heavy load can miss. The query has run
    nothing then (no offsets committed), so starting it again changes nothing else. Returns the ended query."""
    for attempt in range(attempts):
        query = start()
        try:
            query.awaitTermination(timeout)
            return query
        except Exception as exc:
            if "failed to connect back" not in str(exc) or attempt == attempts - 1:
                raise
        finally:
            query.stop()
