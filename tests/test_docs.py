"""The docs site (mkdocs.yml, docs/): it builds with warnings as errors, and every Python sample in it runs against
one embedded broker that speaks all four protocols (the documented addresses are replaced by its own; the samples
that start Spark run in tests/spark/test_doc_samples.py); the shell samples are the install and broker-start
commands, whose broker flags must exist."""
from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig
from tests.support.code_blocks import (
    DOCS,
    doc_pages,
    doc_samples,
    fastmq_command_dir,
    fenced_blocks,
    run_block,
    uses_spark,
)
from tests.support.names import resolve

ROOT = Path(__file__).resolve().parent.parent
# The addresses the pages use, by the protocol of the listener that replaces them.
DOCUMENTED = {"kafka": "127.0.0.1:9092", "namesrv": "127.0.0.1:9876", "rocketmq": "127.0.0.1:10911",
              "tubemq-master": "127.0.0.1:8715", "tubemq-broker": "127.0.0.1:8123", "nsq": "127.0.0.1:4150",
              "nsq-http": "127.0.0.1:4151", "nsqlookupd-http": "127.0.0.1:4161"}
SHELL_LINE = re.compile(r"^(pip install \S+|fastmq broker --data-dir DIR( --[a-z-]+ 127\.0\.0\.1:\d+)+)$")


def samples(language: str) -> list[pytest.param]:
    return [pytest.param(code, id=name) for name, code in doc_samples(language) if not uses_spark(code)]


def test_site_builds_with_warnings_as_errors(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-5000:]
    built = {str(path.relative_to(tmp_path)) for path in tmp_path.rglob("index.html")}
    assert {"quickstart/kafka/index.html", "proxy/index.html", "configuration/index.html"} <= built, sorted(built)


def test_every_block_is_python_or_a_setup_command():
    languages = {lang for page in doc_pages() for lang, _ in fenced_blocks(page.read_text())}
    assert languages <= {"python", "sh"}, languages
    assert samples("python")


@pytest.mark.parametrize("code", samples("sh"))
def test_shell_sample_is_an_install_or_a_documented_broker_start(code):
    broker_help = subprocess.run([sys.executable, "-m", "fastmq", "broker", "--help"], capture_output=True,
                                 text=True, timeout=60, cwd=ROOT).stdout
    for line in code.strip().splitlines():
        assert SHELL_LINE.match(line), line
        for flag in re.findall(r"--[a-z-]+", line):
            assert flag in broker_help, flag


@pytest.fixture(scope="module")
def broker():
    listeners = [ListenerConfig(protocol=protocol) for protocol in DOCUMENTED]
    with EmbeddedBroker(listeners=listeners) as embedded:
        yield embedded


@pytest.fixture(scope="module")
def addresses(broker) -> dict[str, str]:
    return {documented: broker.address(protocol) for protocol, documented in DOCUMENTED.items()}


@pytest.fixture(scope="module")
def command_dir(tmp_path_factory) -> Path:
    return fastmq_command_dir(tmp_path_factory.mktemp("bin"))


@pytest.mark.parametrize("code", samples("python"))
def test_python_sample_runs(code, addresses, command_dir, tmp_path):
    run_block("python", code, addresses, command_dir, tmp_path)


def test_spark_page_lists_every_source_option():
    from fastmq.spark.options import SOURCE_OPTIONS

    listed = {name.lower() for name in re.findall(r"^\| `([\w.]+)` \|", (DOCS / "spark.md").read_text(), re.M)
              if not name.startswith("kafka.") or name == "kafka.bootstrap.servers"}
    assert listed == set(SOURCE_OPTIONS), (sorted(set(SOURCE_OPTIONS) - listed), sorted(listed - set(SOURCE_OPTIONS)))


# ---- the API reference covers what the README and the quickstarts use ------------------------------------------

API_ENTRY = re.compile(r"^::: ([\w.]+)\n((?:    .*\n)*)", re.MULTILINE)
USER_PAGES = [ROOT / "README.md", *sorted((DOCS / "quickstart").glob("*.md"))]


def _documented() -> tuple[set[int], set[str]]:
    """(ids of the classes, functions and modules the API pages render, names of the constants they render)."""
    objects: set[int] = set()
    constants: set[str] = set()
    for page in sorted((DOCS / "api").glob("*.md")):
        for dotted, options in API_ENTRY.findall(page.read_text()):
            value = resolve(dotted)
            if inspect.ismodule(value):
                listed = re.search(r"members: \[([^\]]*)\]", options)
                names = [n.strip() for n in listed.group(1).split(",")] if listed else [
                    n for n in vars(value) if not n.startswith("_")]
                objects.update(id(getattr(value, name)) for name in names)
            if inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value):
                objects.add(id(value))
            else:
                constants.add(dotted.rsplit(".", 1)[1])
    return objects, constants


def _used_names() -> dict[str, str]:
    """dotted name -> the page, for every fastmq name that a Python block of the README or a quickstart imports or
    reaches as fastmq.<package>.<name>."""
    used: dict[str, str] = {}
    for page in USER_PAGES:
        for language, code in fenced_blocks(page.read_text()):
            if language != "python":
                continue
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fastmq"):
                    used.update({f"{node.module}.{alias.name}": page.name for alias in node.names})
                elif isinstance(node, ast.Attribute) and ast.unparse(node).startswith("fastmq."):
                    used[ast.unparse(node)] = page.name
    return used


def test_the_api_reference_covers_every_name_the_readme_and_the_quickstarts_use():
    objects, constants = _documented()
    used = _used_names()
    assert len(used) >= 15, sorted(used)            # the parsing found the samples' imports
    missing = []
    for dotted, page in sorted(used.items()):
        value = resolve(dotted)
        if inspect.ismodule(value):
            continue                                # a package reached on the way to a name
        known = id(value) in objects if inspect.isclass(value) or inspect.isroutine(value) else (
            dotted.rsplit(".", 1)[1] in constants)
        if not known:
            missing.append(f"{dotted} ({page})")
    assert not missing, f"names the README or a quickstart uses that no docs/api page renders: {missing}"
