"""Every code block of README.md runs and ends: Python blocks and shell blocks against an embedded broker (its
address replaces the README's 127.0.0.1:9092), and the main-job command exactly as written, from a fresh clone.
The other set-up command (install everything, run this suite) is the suite itself and is not run here."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from fastmq.broker import EmbeddedBroker
from tests.support import early
from tests.support.code_blocks import fastmq_command_dir, fenced_blocks, run_block

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ADDRESS = "127.0.0.1:9092"
MAIN_JOB = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/fastmq bench"
TEST_SUITE = ('(command -v redis-server >/dev/null && command -v chromium >/dev/null || (apt-get update && '
              'apt-get install -y redis-server chromium)) && python3 -m venv .venv && .venv/bin/pip install -e '
              '".[test]" && .venv/bin/pytest')


def fresh_clone_main_job(directory: Path) -> early.JobCommand:
    """The main-job command as written, in a fresh clone of the last commit, with the suite's python3 first on PATH
    and nothing of the suite's environment that would point pip at this checkout or its venv."""
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return ["bash", "-c", f'git clone -q "$0" fastmq && cd fastmq && {MAIN_JOB}', str(ROOT)], directory, env


# It compiles fastmq from source (minutes of CPU): it starts with the session and runs beside the other tests.
MAIN_JOB_FROM_A_FRESH_CLONE = early.register("readme-main-job", "tests/test_readme.py::test_main_job_from_a_fresh_clone",
                                             fresh_clone_main_job, timeout=3000)


def blocks() -> list[tuple[str, str]]:
    found = fenced_blocks(README.read_text())
    assert found, "README.md has no code blocks"
    return found


def runnable() -> list[pytest.param]:
    return [pytest.param(language, text, id=f"{language}-{index}") for index, (language, text) in enumerate(blocks())
            if text.strip() not in (MAIN_JOB, TEST_SUITE)]


def test_the_setup_commands_are_in_the_readme():
    texts = [text.strip() for _, text in blocks()]
    assert MAIN_JOB in texts and TEST_SUITE in texts
    assert {language for language, _ in blocks()} <= {"python", "sh"}


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as embedded:
        yield embedded


@pytest.fixture(scope="module")
def command_dir(tmp_path_factory) -> Path:
    return fastmq_command_dir(tmp_path_factory.mktemp("bin"))


@pytest.mark.parametrize("language, text", runnable())
def test_block_runs_and_ends(language, text, broker, command_dir, tmp_path):
    run_block(language, text, {ADDRESS: broker.bootstrap_servers}, command_dir, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_main_job_from_a_fresh_clone():
    """The README's main-job command, as written, in a fresh clone (its last commit): pip builds and installs
    fastmq into a new venv, and `fastmq bench` runs the default job through a broker process, whose working
    directory holds the unbuilt source tree."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    result = MAIN_JOB_FROM_A_FRESH_CLONE.outcome()
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    stages = [line[:30].strip() for line in result.stdout.splitlines()[2:]]
    assert stages[-4:] == ["produce (send loop)", "produce (acknowledged)", "consume (from the start)",
                           "produce + consume (end-to-end)"], result.stdout[-3000:]
