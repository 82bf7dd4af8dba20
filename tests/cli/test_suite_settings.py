"""The suite's own settings (pyproject.toml's pytest section, tests/support/shared.py), checked by running pytest
on a copy of the tree that has no ../shared beside it."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPY_IGNORES = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.c", "build")
GOLDEN_TESTS = ["tests/_native/test_frames.py", "tests/store/test_message.py", "tests/tubemq/test_rpc_envelope.py"]


@pytest.fixture(scope="module")
def lone_copy(tmp_path_factory) -> Path:
    """fastmq, tests and pyproject.toml copied into a directory with no ../shared beside it."""
    root = tmp_path_factory.mktemp("lone") / "checkout"
    for name in ("fastmq", "tests"):
        shutil.copytree(ROOT / name, root / name, ignore=COPY_IGNORES)
    shutil.copy(ROOT / "pyproject.toml", root)
    assert not (root.parent / "shared").exists()
    return root


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True, timeout=600, env={"PATH": "/usr/bin:/bin",
                                                                            "PYTHONPATH": str(root)})


def test_tests_that_need_shared_say_so_in_one_skip_line_each(lone_copy):
    result = pytest_in(lone_copy, "-q", *GOLDEN_TESTS, "-k", "golden or Golden or envelope")
    assert result.returncode == 0, result.stdout[-3000:]
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all("needs the test vectors in" in line and "clone the repository beside ../shared" in line
                         for line in skips), result.stdout[-3000:]
    assert " passed" not in result.stdout.splitlines()[-1] and "skipped" in result.stdout.splitlines()[-1]
    # The tests of those files that read nothing from ../shared still run.
    result = pytest_in(lone_copy, "-q", "tests/store/test_message.py", "-k", "not Golden")
    assert result.returncode == 0 and " passed" in result.stdout.splitlines()[-1], result.stdout[-3000:]


def test_an_exception_in_a_thread_fails_the_test(lone_copy):
    (lone_copy / "tests" / "test_thread_failure.py").write_text(textwrap.dedent("""
        import threading

        def test_a_thread_dies():
            def fail():
                raise RuntimeError("lost in a thread")
            thread = threading.Thread(target=fail)
            thread.start()
            thread.join(10)
    """))
    result = pytest_in(lone_copy, "-q", "tests/test_thread_failure.py")
    assert result.returncode == 1, result.stdout[-3000:]
    assert "PytestUnhandledThreadExceptionWarning" in result.stdout and "lost in a thread" in result.stdout
