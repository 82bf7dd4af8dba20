"""format("fastmq") against Spark's own Kafka connector, same broker, same SparkSession, one run (local[2]).

Reads 2M records of 100 bytes from 4 partitions into count() and sum(length(value)), and writes 1M records,
with fastmq's source and with spark-sql-kafka-0-10 (fetched from Maven Central with mvn into the user's cache,
at $SPARK_KAFKA_VERSION, else the installed pyspark's version, else 4.2.0: the newest on Central when
written). Also: the same read yielding tuples instead of Arrow batches (why the source yields Arrow), the
source's reader alone without Spark (fetch + columnar decode + Arrow build in this process), and the raw
columnar decode of the same record sets (already fetched), for how close Spark's overhead lets a read come to
the decoder. Every action runs once to warm up, then RUNS rounds take fastmq and the connector in turn (the
first queries of a JVM run while its JIT compiles Spark, and the load on a shared machine drifts: both fall on
each alike); rates are medians of the rounds. Every read is checked to return all the records. Every line also
gives CPU time per record: the CPU of this process and all its children (Spark's JVM by thread: task threads,
JIT compilers, GC, other; its Python workers; the broker) over the runs, divided by the records; on a shared
machine that figure is steadier than the wall clock, and rows per CPU-second is the rate per fully used core.

Run: python benches/bench_spark.py            (BENCH_SPARK_RECORDS=200000 for a short run)
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from benches.process_cpu import process_tree_cpu

RECORDS = int(os.environ.get("BENCH_SPARK_RECORDS", 2_000_000))
WRITES = RECORDS // 2
PARTITIONS = 4
RUNS = 5
VALUE = b"x" * 100
CONNECTOR = "spark-sql-kafka-0-10_2.13"
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>fastmq.bench</groupId><artifactId>spark-kafka-jars</artifactId><version>1</version>
<dependencies><dependency><groupId>org.apache.spark</groupId><artifactId>{artifact}</artifactId>
<version>{version}</version></dependency></dependencies></project>"""


def connector_jars() -> list[str]:
    """The connector and the three jars it needs beyond pyspark's own, cached per version."""
    import pyspark

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fastmq-bench-spark-kafka"
    versions = [v for v in (os.environ.get("SPARK_KAFKA_VERSION"), pyspark.__version__, "4.2.0") if v]
    for version in dict.fromkeys(versions):
        target = cache / version
        if not any(target.glob(f"{CONNECTOR}-*.jar")):
            target.mkdir(parents=True, exist_ok=True)
            (target / "pom.xml").write_text(POM.format(artifact=CONNECTOR, version=version))
            done = subprocess.run(
                ["mvn", "-q", "-f", str(target / "pom.xml"), "dependency:copy-dependencies", "-DincludeScope=runtime",
                 f"-DoutputDirectory={target}", "-DincludeArtifactIds=" + ",".join(
                     [CONNECTOR, "spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2"])],
                capture_output=True, text=True)
            if done.returncode:
                print(f"connector {version}: not fetched ({done.stdout[-300:]})")
                continue
        jars = sorted(str(p) for p in target.glob("*.jar"))
        if jars:
            print(f"Spark's Kafka connector {version}: {', '.join(Path(j).name for j in jars)}")
            return jars
    raise RuntimeError("Spark's Kafka connector could not be fetched with mvn (Java 17 and Maven needed)")


def fetched_record_sets(options, ranges) -> list:
    """The record sets of fetches covering `ranges`, as the source's reader fetches them."""
    from fastmq.spark.partition_reader import PartitionReader, walk_batches

    found = []
    for offsets in ranges:
        reader = PartitionReader(options, offsets)
        offset = offsets.start
        while offset < offsets.end:
            records = reader._result(reader._fetch(offset)).records
            next_offset, _ = walk_batches(records, None)
            found.append(bytes(records))
            offset = next_offset
    return found


def _kind(command: str) -> str:
    if "java" in command.split(" ", 1)[0]:
        return "jvm"
    if "pyspark" in command:
        return "python workers"
    return "broker" if "fastmq broker" in command else "bench"


def _jvm_thread_kind(name: str) -> str:
    """Spark's JVM threads by what they do: running tasks, compiling (JIT), collecting garbage, the rest."""
    if name.startswith("Executor task"):
        return "tasks"
    if "CompilerThre" in name:
        return "JIT"
    return "GC" if "GC" in name or name.startswith("G1") else "other"


def cpu_snapshot() -> dict[tuple[int, str], tuple[str, float]]:
    """{(pid, "" or a JVM thread id): (kind, CPU seconds)} of this process tree: processes by kind, Spark's JVM
    by thread ("jvm tasks", "jvm JIT", ...), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[tuple[int, str], tuple[str, float]] = {}
    for pid, (command, cpu) in process_tree_cpu(os.getpid()).items():
        kind = _kind(command)
        if kind != "jvm":
            found[(pid, "")] = (kind, cpu)
            continue
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            found[(pid, task.name)] = (f"jvm {_jvm_thread_kind(name)}", (int(fields[11]) + int(fields[12])) / tick)
    return found


def cpu_by_kind(since: dict[tuple[int, str], tuple[str, float]]) -> Counter:
    """CPU seconds used since the snapshot `since` (cpu_snapshot), by kind. A process or thread that ended
    meanwhile is not counted (Spark ends idle Python workers and pool threads), one started is in full."""
    used: Counter = Counter()
    for key, (kind, cpu) in cpu_snapshot().items():
        used[kind] += cpu - since.get(key, (kind, 0.0))[1]
    return used


class Measured:
    """Runs of one action: the median rate, and CPU seconds per record by kind over all runs."""

    def __init__(self, action: Callable[[], Any], rows: int, check: Any = None) -> None:
        self.action, self.rows, self.check = action, rows, check
        self.walls: list[float] = []
        self.cpu: Counter = Counter()

    def run(self) -> None:
        before = cpu_snapshot()
        started = time.perf_counter()
        result = self.action()
        self.walls.append(time.perf_counter() - started)
        self.cpu.update(cpu_by_kind(before))
        if self.check is not None and result != self.check:
            raise RuntimeError(f"a run gave {result}, not {self.check}: records lost under the bench (the store "
                               "deletes files when the disk is nearly full), or a wrong read")

    @property
    def rate(self) -> float:
        return self.rows / statistics.median(self.walls)

    def cpu_per_record(self, kind: str | None = None) -> float:
        used = self.cpu[kind] if kind else sum(self.cpu.values())
        return used / (self.rows * len(self.walls))

    def describe(self) -> str:
        parts = ", ".join(f"{kind} {self.cpu_per_record(kind) * 1e9:.0f}" for kind in sorted(self.cpu)
                          if self.cpu_per_record(kind) * 1e9 >= 0.5)
        return (f"{self.rate / 1e6:.2f}M rows/s, CPU {self.cpu_per_record() * 1e9:.0f} ns/record ({parts}), "
                f"{1 / self.cpu_per_record() / 1e6:.2f}M rows per CPU-second")


def measure(actions: dict[str, Callable[[], Any]], rows: int, check: Any = None, runs: int = RUNS) \
        -> dict[str, Measured]:
    """Each action once to warm up (the first queries of a JVM run while its JIT compiles Spark), then `runs`
    rounds that take the actions in turn, so that load on the machine and the JIT's progress fall on all alike."""
    measured = {name: Measured(action, rows, check) for name, action in actions.items()}
    for action in actions.values():
        action()
    for _ in range(runs):
        for m in measured.values():
            m.run()
    return measured


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import fastmq.spark
    from fastmq.broker import BrokerProcess
    from fastmq.kafka import Admin, Producer
    from fastmq.kafka.admin import NewTopic
    from fastmq.spark.source import KafkaBatchReader, KafkaDataSource
    from fastmq.spark.offsets import resolve, subscribed_partitions
    from fastmq.spark.options import parse_options
    from fastmq.kafka.columnar import read_columns
    from fastmq.spark.partition_reader import OffsetRange, PartitionReader

    class TupleReader(KafkaBatchReader):
        """The same read, handing Spark one tuple per record (the alternative to Arrow batches)."""

        def read(self, partition):
            for batch in super().read(partition):
                yield from zip(*(column.to_pylist() for column in batch.columns))

    class TupleSource(KafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return "fastmq-tuples"

        def reader(self, schema):
            return TupleReader(parse_options(self.options), schema)

    jars = connector_jars()
    # One CommitLog file holds all the bench's data: the store deletes its older files when the disk is over
    # 85% full (it was, on the shared machine, and reads came back short), never the one being written.
    broker = BrokerProcess(args=["--commit-log-file-size", str(2 << 30)]).start()
    try:
        servers = broker.bootstrap_servers
        with Admin(servers) as admin:
            admin.create_topics([NewTopic("bench-read", PARTITIONS, 1), NewTopic("bench-write-fastmq", PARTITIONS, 1),
                                 NewTopic("bench-write-kafka", PARTITIONS, 1)])
            admin.wait_for_topics(["bench-read", "bench-write-fastmq", "bench-write-kafka"], timeout=30)
        with Producer(servers, linger_ms=10, batch_size=262144) as producer:
            per = RECORDS // PARTITIONS
            for p in range(PARTITIONS):
                for start in range(0, per, 100_000):
                    producer.send_many("bench-read", [VALUE] * min(100_000, per - start), partition=p)
            producer.flush(300)
        rows = per * PARTITIONS

        options = parse_options({"kafka.bootstrap.servers": servers, "subscribe": "bench-read"})
        tps = subscribed_partitions(options)
        start, end = resolve(options, tps, ending=False), resolve(options, tps, ending=True)

        ranges = [OffsetRange(tp.topic, tp.partition, start[tp], end[tp]) for tp in tps]

        def reader_alone() -> None:
            for offsets in ranges:
                for _ in PartitionReader(options, offsets):
                    pass

        record_sets = fetched_record_sets(options, ranges)

        def raw_decode() -> None:
            for records in record_sets:
                read_columns(records)

        alone, raw = measure({"alone": reader_alone, "raw": raw_decode}, rows).values()
        print(f"reader without Spark (fetch + columnar decode + Arrow, 1 process): {alone.describe()}")
        print(f"raw columnar decode of the fetched record sets (1 process): {raw.describe()}")

        spark = (SparkSession.builder.master("local[2]").appName("bench-spark")
                 .config("spark.ui.enabled", "false").config("spark.jars", ",".join(jars)).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        fastmq.spark.register(spark)
        spark.dataSource.register(TupleSource)

        def load(fmt: str):
            return (spark.read.format(fmt).option("kafka.bootstrap.servers", servers)
                    .option("subscribe", "bench-read").load())

        def count(fmt: str) -> Callable[[], int]:
            return lambda: load(fmt).count()

        def total_length(fmt: str) -> Callable[[], int]:
            return lambda: load(fmt).selectExpr("sum(length(value))").collect()[0][0]

        reads = {("count", fmt): m for fmt, m in measure({f: count(f) for f in ("fastmq", "kafka")}, rows,
                                                           check=rows).items()}
        reads.update({("sum", fmt): m for fmt, m in measure({f: total_length(f) for f in ("fastmq", "kafka")},
                                                             rows, check=rows * len(VALUE)).items()})
        # Tuples take ten times as long: one run each, for the reason the source yields Arrow.
        reads.update({("count", "tuples"): measure({"t": count("fastmq-tuples")}, rows, rows, runs=1)["t"],
                      ("sum", "tuples"): measure({"t": total_length("fastmq-tuples")}, rows, rows * len(VALUE),
                                                 runs=1)["t"]})
        for what in ("count", "sum"):
            ours, theirs, tuples = reads[(what, "fastmq")], reads[(what, "kafka")], reads[(what, "tuples")]
            print(f"read {rows} x 100 B, {PARTITIONS} partitions, {what}: ratio {ours.rate / theirs.rate:.2f}x "
                  f"(target 1.5x), CPU per record ratio {theirs.cpu_per_record() / ours.cpu_per_record():.2f}x\n"
                  f"  fastmq:          {ours.describe()}\n  Kafka connector: {theirs.describe()}\n"
                  f"  fastmq, tuples:  {tuples.describe()}\n"
                  f"  per core: fastmq {1 / ours.cpu_per_record() / 1e6:.2f}M rows per CPU-second, the raw "
                  f"columnar decode {1 / raw.cpu_per_record() / 1e6:.2f}M "
                  f"({raw.cpu_per_record() / ours.cpu_per_record():.1%} of it)")

        source = spark.range(0, WRITES, numPartitions=PARTITIONS).selectExpr(
            "CAST(id AS STRING) AS key", "CAST(repeat('x', 100) AS BINARY) AS value").cache()
        source.count()

        def write(fmt: str) -> None:
            source.write.format(fmt).option("kafka.bootstrap.servers", servers) \
                .option("topic", f"bench-write-{'fastmq' if fmt == 'fastmq' else 'kafka'}").mode("append").save()

        ours, theirs = measure({"fastmq": lambda: write("fastmq"), "kafka": lambda: write("kafka")}, WRITES).values()
        print(f"write {WRITES} x 100 B: ratio {ours.rate / theirs.rate:.2f}x (target 1.0x), CPU per record ratio "
              f"{theirs.cpu_per_record() / ours.cpu_per_record():.2f}x\n  fastmq:          {ours.describe()}\n"
              f"  Kafka connector: {theirs.describe()}")
        spark.stop()
    finally:
        broker.close()


if __name__ == "__main__":
    main()
