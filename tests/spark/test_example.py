"""examples/spark_pipeline.py, the README's one-command pipeline, run on the session's SparkSession."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from fastmq.broker import EmbeddedBroker
from tests.spark.conftest import run_to_end

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
# What the README shows: six closed 10-second windows of 100 events each (the open last window is not written).
EXPECTED = [
    "window 00:00:00  buy=33 click=34 view=33",
    "window 00:00:10  buy=33 click=33 view=34",
    "window 00:00:20  buy=34 click=33 view=33",
    "window 00:00:30  buy=33 click=34 view=33",
    "window 00:00:40  buy=33 click=33 view=34",
    "window 00:00:50  buy=34 click=33 view=33",
]


def test_readme_shows_what_the_pipeline_prints():
    readme = (EXAMPLE.parents[1] / "README.md").read_text()
    assert "python examples/spark_pipeline.py" in readme
    assert all(f"    {line}\n" in readme for line in EXPECTED)


def test_pipeline_prints_the_windowed_counts(spark, tmp_path):
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    pipeline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pipeline)
    with EmbeddedBroker(tmp_path / "broker") as broker:
        servers = broker.bootstrap_servers
        # pipeline.run(), with the query started again if Spark's Python process missed its start-up window.
        pipeline.create_topics(servers)
        pipeline.produce_events(servers)
        run_to_end(lambda: pipeline.start_query(spark, servers, str(tmp_path / "checkpoint")))
        assert pipeline.read_results(servers) == EXPECTED
