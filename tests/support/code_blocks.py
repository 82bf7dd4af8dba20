"""The fenced code blocks of a Markdown file, and running one as a user would: in a fresh interpreter (or bash)
whose `fastmq` command and imports are this checkout's, with the documented addresses replaced by a test
broker's. Used by the README's test and the docs site's."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
LIMIT = 120         # seconds a block may take: far above what each needs, so that one that never ends fails


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block with a language."""
    return [(language, code) for language, code in BLOCK.findall(text)]


def doc_pages() -> list[Path]:
    found = sorted(DOCS.rglob("*.md"))
    assert found, "docs/ has no pages"
    return found


def doc_samples(language: str) -> list[tuple[str, str]]:
    """(id, code) of every block of a language in the docs site's pages; the id names the page and the block."""
    return [(f"{page.relative_to(DOCS).with_suffix('')}-{index}", code) for page in doc_pages()
            for index, (lang, code) in enumerate(fenced_blocks(page.read_text())) if lang == language]


def uses_spark(code: str) -> bool:
    """A sample that starts Spark: it runs on the Spark tests' session (tests/spark/test_doc_samples.py), not in a
    fresh interpreter of its own (a JVM start per sample is more than the suite can pay)."""
    return "pyspark" in code


def fastmq_command_dir(directory: Path) -> Path:
    """A directory with a `fastmq` command that runs this interpreter's fastmq (put first on PATH)."""
    command = directory / "fastmq"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fastmq "$@"\n')
    command.chmod(0o755)
    return directory


def run_block(language: str, code: str, addresses: dict[str, str], command_dir: Path,
              cwd: Path) -> subprocess.CompletedProcess:
    """Runs a python or sh block with each documented address replaced; asserts it ended well and, where it
    prints, printed something."""
    for documented, actual in addresses.items():
        code = code.replace(documented, actual)
    env = dict(os.environ, PATH=f"{command_dir}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-e", "-o", "pipefail", "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT, cwd=cwd, env=env)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    if "print(" in code or language == "sh":
        assert result.stdout.strip(), "the block printed nothing"
    return result
