"""The docs site's samples that start Spark, run in this process on the Spark tests' session (their
SparkSession.builder...getOrCreate() returns it) against the session's embedded broker."""
from __future__ import annotations

import pytest

from tests.support.code_blocks import doc_samples, uses_spark

SPARK_SAMPLES = [pytest.param(code, id=name) for name, code in doc_samples("python") if uses_spark(code)]
DOCUMENTED_KAFKA = "127.0.0.1:9092"


def test_the_docs_have_a_spark_sample():
    assert SPARK_SAMPLES


@pytest.mark.parametrize("code", SPARK_SAMPLES)
def test_spark_sample_runs(code, spark, embedded_broker, capsys):
    exec(compile(code.replace(DOCUMENTED_KAFKA, embedded_broker.bootstrap_servers), "<docs sample>", "exec"), {})
    assert capsys.readouterr().out.strip(), "the sample printed nothing"
