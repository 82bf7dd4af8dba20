"""Types: a strict user's program over the public faces type-checks (mypy --strict, tests/typed_user_program.py),
and mypy --strict over the faces' packages ([tool.mypy] of pyproject.toml) finds no error outside the files of
tests/mypy_baseline.txt, nor more in one of those than the baseline says. The baseline only shrinks: a file
fixed (or improved) must be taken out (or lowered), so that it cannot get worse again unseen. After a merge that
adds or changes files elsewhere, `python -m tests.test_types --write-baseline` writes the counts as they are."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy_baseline.txt"
ERROR = re.compile(r"^(fastmq/\S+?\.pyi?):\d+: error: ", re.MULTILINE)
pytestmark = pytest.mark.timeout(900)


def mypy(*args: str, cache: Path) -> subprocess.CompletedProcess:
    # Only this checkout on the path: the installed fastmq (an editable install) must not be checked instead.
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=800, env={"PATH": "/usr/bin:/bin",
                                                                           "PYTHONPATH": str(ROOT)})


def baseline() -> dict[str, int]:
    counts = {}
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path, count = line.split()
            counts[path] = int(count)
    return counts


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_a_strict_users_program_type_checks(cache):
    # follow-imports=silent: the program's own errors count, fastmq's internal ones are the next test's.
    result = mypy("--strict", "--follow-imports=silent", "tests/typed_user_program.py", cache=cache)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_strict_errors_only_shrink(cache):
    result = mypy(cache=cache)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    found = Counter(ERROR.findall(result.stdout))
    known = baseline()
    worse = {path: (count, known.get(path, 0)) for path, count in found.items() if count > known.get(path, 0)}
    assert not worse, ("mypy --strict errors beyond tests/mypy_baseline.txt (found, allowed): "
                       f"{worse}\n{result.stdout[-5000:]}")
    better = {path: (found.get(path, 0), count) for path, count in known.items() if found.get(path, 0) < count}
    assert not better, f"fewer errors than tests/mypy_baseline.txt allows: lower it (found, allowed): {better}"


def write_baseline() -> None:
    """Rewrites tests/mypy_baseline.txt with today's counts (for a merge: see the module docstring)."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        found = Counter(ERROR.findall(mypy(cache=Path(cache)).stdout))
    header = [line for line in BASELINE.read_text().splitlines() if line.startswith("#")]
    BASELINE.write_text("\n".join(header + [f"{path} {count}" for path, count in sorted(found.items())]) + "\n")
    print(f"{sum(found.values())} errors in {len(found)} files")


if __name__ == "__main__" and sys.argv[1:] == ["--write-baseline"]:
    write_baseline()
