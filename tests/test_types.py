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
    # Only this checkout on the path: the installed fastmq (an editable install) must not be checked instead.
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=800, env={"PATH": "/usr/bin:/bin",
                                                                           "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_a_strict_users_program_type_checks(cache):
    # follow-imports=silent: the program's own errors count, fastmq's internal ones are the next test's.
    result = mypy("--strict", "--follow-imports=silent", "tests/typed_user_program.py", cache=cache)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_the_public_faces_pass_mypy_strict(cache):
    result = mypy(cache=cache)
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, (
        result.stdout[-8000:] + result.stderr[-2000:])
