"""Every fastmq name the README, the docs and the docstrings show a user exists where they say it is.

Moving code between layers must not move a public name from under its users: an import line (`from fastmq.kafka
import Producer`) or a dotted name (`fastmq.kafka.compat.KafkaConsumer.poll`) in the text a user reads must resolve.
Code blocks are run by test_readme.py and test_docs.py; this test also reads prose and docstrings, which nothing runs.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.names import resolve

ROOT = Path(__file__).resolve().parent.parent

IMPORT_LINE = re.compile(r"from\s+(fastmq(?:\.\w+)*)\s+import\s+(\([^)]*\)|[\w ,]+)")
DOTTED_NAME = re.compile(r"(?<![\w./-])fastmq(?:\.\w+)+")


def user_texts() -> dict[str, str]:
    """Where a user reads fastmq's names: the README and docs pages, and the docstrings of the package."""
    texts = {path.name: path.read_text() for path in (ROOT / "README.md", ROOT / "ARCHITECTURE.md")}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        texts[str(path.relative_to(ROOT))] = path.read_text()
    for path in sorted((ROOT / "fastmq").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = [ast.get_docstring(node) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        texts[str(path.relative_to(ROOT))] = "\n".join(text for text in docstrings if text)
    return texts


def shown_names() -> dict[str, set[str]]:
    """Each dotted name (module.attribute...) shown, with the texts that show it."""
    shown: dict[str, set[str]] = {}
    for where, text in user_texts().items():
        for module, names in IMPORT_LINE.findall(text):
            for name in names.strip("()").replace("\n", " ").split(","):
                name = name.split(" as ")[0].strip()
                if name.isidentifier():
                    shown.setdefault(f"{module}.{name}", set()).add(where)
        for dotted in DOTTED_NAME.findall(text):
            shown.setdefault(dotted, set()).add(where)
    return shown


SHOWN = shown_names()


def test_the_texts_show_the_main_faces():
    # The scan itself works: the README's first imports are found (an empty scan would pass every name).
    for dotted in ("fastmq.kafka.Producer", "fastmq.broker.EmbeddedBroker", "fastmq.kafka.compat.KafkaConsumer"):
        assert dotted in SHOWN
    assert len(SHOWN) > 100


@pytest.mark.parametrize("dotted", sorted(SHOWN))
def test_a_shown_name_exists(dotted):
    try:
        resolve(dotted)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{dotted}, shown in {', '.join(sorted(SHOWN[dotted]))}, does not resolve: {exc}")
