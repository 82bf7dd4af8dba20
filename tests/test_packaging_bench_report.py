"""`fastmq bench report` from a small saved result (no bench runs here): the Markdown table, the PNG chart."""
from __future__ import annotations

import json

import pytest

from fastmq.cli import main
from fastmq.cli.bench_report import comparisons, summary

MACHINE = {"cpu": "Test CPU 9000", "cores": 2, "python": "3.11.7", "kernel": "6.1.0", "system": "Linux"}
RESULTS = [
    # fastmq's best entry (columnar) decides the ratio: 1000 items in 0.1 ms vs 1 ms and 0.05 ms.
    {"protocol": "kafka", "group": "read 1000 x 100 B", "impl": "fastmq", "median_s": 2e-4, "items": 1000,
     "bytes": 100_000, "extra": {}},
    {"protocol": "kafka", "group": "read 1000 x 100 B", "impl": "fastmq columnar", "median_s": 1e-4, "items": 1000,
     "bytes": 100_000, "extra": {}},
    {"protocol": "kafka", "group": "read 1000 x 100 B", "impl": "kafka-python", "median_s": 1e-3, "items": 1000,
     "bytes": 100_000, "extra": {}},
    {"protocol": "kafka", "group": "read 1000 x 100 B", "impl": "aiokafka", "median_s": 5e-5, "items": 1000,
     "bytes": 100_000, "extra": {}},
    # Items where both count items: the peer did a quarter of the work in half the time.
    {"protocol": "nsq", "group": "publish", "impl": "fastmq", "median_s": 1.0, "items": 4000, "bytes": None,
     "extra": {"p50_ms": 1.5}},
    {"protocol": "nsq", "group": "publish", "impl": "pynsq", "median_s": 0.5, "items": 1000, "bytes": None,
     "extra": {}},
    # No peer: in the table, not in the chart.
    {"protocol": "io", "group": "alone", "impl": "fastmq", "median_s": 1.0, "items": None, "bytes": None,
     "extra": {}},
]


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"machine": MACHINE, "results": RESULTS}))
    return path


def test_ratios_compare_fastmq_best_entry_with_each_peer():
    ratios = {(protocol, peer): round(ratio, 3) for protocol, _, peer, ratio in comparisons(RESULTS)}
    assert ratios == {("kafka", "kafka-python"): 10.0, ("kafka", "aiokafka"): 0.5, ("nsq", "pynsq"): 2.0}


def test_report_writes_a_table_and_a_chart(saved, tmp_path):
    output = tmp_path / "report"
    assert main(["bench", "report", "--results", str(saved), "--output", str(output)]) == 0
    table = (output / "report.md").read_text()
    assert "Test CPU 9000, 2 cores, Python 3.11.7, Linux 6.1.0" in table
    assert table.index("## kafka") < table.index("## nsq") < table.index("## io")
    assert "| read 1000 x 100 B | kafka-python | 1 ms | 1.00M | 100.00MB | 10.00 |" in table
    assert "| read 1000 x 100 B | aiokafka | 50 µs | 20.00M | 2.00GB | 0.50 |  |" in table
    assert "| publish | fastmq | 1 s | 4.00k |  |  | p50_ms 1.5 |" in table
    assert "| publish | pynsq | 500 ms | 2.00k |  | 2.00 |" in table

    import matplotlib.image
    image = matplotlib.image.imread(output / "report.png")
    height, width = image.shape[:2]
    assert width > 800 and height > 300


def test_summary_is_the_geometric_mean_per_protocol_and_peer():
    rows = [("kafka", "a", "kafka-python", 8.0), ("kafka", "b", "kafka-python", 0.5), ("nsq", "c", "pynsq", 3.0)]
    assert [(protocol, count, peer, round(mean, 6)) for protocol, count, peer, mean in summary(rows)] == [
        ("kafka", "2 comparisons", "kafka-python", 2.0), ("nsq", "1 comparison", "pynsq", 3.0)]


def test_saved_runs_of_the_output_directory_are_reported_together(tmp_path):
    # The protocols come in their fixed order whatever the files' order; differing machine fields name both.
    nsq, kafka = [result for result in RESULTS if result["protocol"] == "nsq"], RESULTS[:4]
    (tmp_path / "results-a.json").write_text(json.dumps({"machine": {**MACHINE, "kernel": "6.2"}, "results": nsq}))
    (tmp_path / "results.json").write_text(json.dumps({"machine": MACHINE, "results": kafka}))
    assert main(["bench", "report", "--output", str(tmp_path)]) == 0
    table = (tmp_path / "report.md").read_text()
    assert "Linux 6.2 / 6.1.0" in table
    assert table.index("## kafka") < table.index("## nsq")
    assert "| publish | pynsq | 500 ms | 2.00k |  | 2.00 |" in table


def test_report_without_results_says_what_to_do(tmp_path, capsys):
    assert main(["bench", "report", "--output", str(tmp_path)]) == 1
    assert "pass --run to run the benches, or --results FILE" in capsys.readouterr().err


def test_report_refuses_a_file_that_is_not_bench_results(tmp_path, capsys):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"benchmarks": []}))
    assert main(["bench", "report", "--results", str(path), "--output", str(tmp_path)]) == 1
    assert "is not a side-by-side bench result" in capsys.readouterr().err
