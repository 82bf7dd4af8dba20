"""Types: a strict user's program over the public faces type-checks (mypy --strict, tests/typed_user_program.py),
and mypy --strict over the faces' packages ([tool.mypy] of pyproject.toml) finds no error at all. Where the checker
is wrong the code says so with `# type: ignore[code]` and a reason; the generated Kafka message classes are typed
by fastmq/kafka/protocol/messages.pyi (tests/kafka/test_messages_stub.py keeps it in step with the schemas)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(900)


def mypy(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    # mypy finds fastmq in its working directory, this checkout (the editable install's import hook is invisible to
    # it). No PYTHONPATH: mypy counts every PYTHONPATH entry as site-packages and silences the errors of each module
    # found there that is not named on its command line, which hid the errors of fastmq.store, fastmq.io, ...
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=800, env={"PATH": "/usr/bin:/bin"})


def test_a_strict_users_program_type_checks(tmp_path):
    # follow-imports=silent: the program's own errors count, fastmq's internal ones are the next test's.
    result = mypy("--strict", "--follow-imports=silent", "tests/typed_user_program.py", cache=tmp_path)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_the_public_faces_pass_mypy_strict(tmp_path):
    # A cache of its own: its result must not depend on what the first test's --follow-imports=silent run cached.
    result = mypy(cache=tmp_path)
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, (
        result.stdout[-8000:] + result.stderr[-2000:])
