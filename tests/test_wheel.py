"""The distributions: `python -m build --sdist` makes an sdist from a copy of the source tree; a fresh venv that has
nothing but Python's own pip builds the wheel from that sdist in an isolated build (pip fetches the build-system
requirements of pyproject.toml, gcc compiles), as a user with only Python and a compiler would; auditwheel repairs
the wheel into a manylinux one, which, installed in a fresh venv where no compiler can run, imports its compiled
modules from site-packages, answers `fastmq --version` and moves a record through the embedded broker. One build
(tests/support/distributions.py, started with the session) serves every test here."""
from __future__ import annotations

import json
import os
import sys
import sysconfig
import tarfile
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import early
from tests.support.distributions import run

ROOT = Path(__file__).resolve().parent.parent
# auditwheel gives the wheel the oldest glibc policy its symbols allow (here glibc 2.17, although this machine has
# 2.36): the extensions link only libc and libpthread. The test names it, so that a newer symbol creeping in shows
# up here rather than on a user's older Linux.
MANYLINUX_TAG = "manylinux_2_17_x86_64"
# The first test to ask for the build waits for it: compiling every extension takes minutes on a loaded machine.
pytestmark = pytest.mark.timeout(1800)

SMOKE = textwrap.dedent("""
    import sys
    import fastmq
    import fastmq.kafka._native.records as records
    from fastmq.broker import EmbeddedBroker
    from fastmq.kafka import Consumer, Producer, TopicPartition
    from fastmq.kafka.record import MemoryRecords, MemoryRecordsBuilder

    assert fastmq.__file__.startswith(sys.argv[1]), fastmq.__file__
    assert records.__file__.endswith(".so"), records.__file__
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1, key=b"k", value=b"v", headers=[])
    builder.close()
    batch = MemoryRecords(builder.buffer()).next_batch()
    assert [(r.key, r.value) for r in batch] == [(b"k", b"v")]
    with EmbeddedBroker() as broker:
        with Producer(broker.bootstrap_servers) as producer:
            producer.send("wheel", b"hello", partition=0).get(30)
        with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
            consumer.assign([TopicPartition("wheel", 0)])
            consumer.seek_to_beginning()
            assert [r.value for r in consumer.consume(10, 10.0)] == [b"hello"]
    print("OK")
""")


def build_distributions(directory: Path) -> early.JobCommand:
    return [sys.executable, "-m", "tests.support.distributions", str(directory)], ROOT, None


# Compiling every extension is minutes of CPU: the build starts with the session, beside the tests that wait on
# servers, and the first test here waits for what is left of it.
BUILD = early.register("distributions", "tests/test_wheel.py", build_distributions, timeout=1800)


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path             # as built: tagged linux_x86_64
    repaired: Path          # after auditwheel repair: tagged manylinux


@pytest.fixture(scope="session")
def built() -> Built:
    outcome = BUILD.outcome()
    assert outcome.returncode == 0, f"{outcome.stdout[-3000:]}{outcome.stderr[-5000:]}"
    work = BUILD.directory
    sdist, = (work / "dist").glob("fastmq-*.tar.gz")
    wheel, = (work / "dist").glob("fastmq-*.whl")
    repaired, = (work / "repaired").glob("fastmq-*.whl")
    return Built(sdist, wheel, repaired)


def test_sdist_carries_the_sources_setup_py_compiles(built):
    with tarfile.open(built.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    sources = {str(path.relative_to(ROOT)) for path in ROOT.glob("fastmq/**/_native/*.pyx")}
    assert sources and sources <= names, sorted(sources - names)
    assert {"setup.py", "pyproject.toml", "csrc/crc32c.c", "csrc/crc32c.h"} <= names
    assert not any(name.endswith(".so") for name in names)


def test_repaired_wheel_is_manylinux(built):
    assert built.wheel.name.endswith("linux_x86_64.whl"), built.wheel.name
    assert MANYLINUX_TAG in built.repaired.name, built.repaired.name


def test_wheel_installs_and_runs_without_a_compiler(built, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    python = venv / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                    timeout=60).stdout.strip())
    # Runtime dependencies come from this environment's site-packages, appended after the venv's own (a plain
    # path line: the editable install's finder there is not loaded, so only the wheel can provide fastmq).
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # No PYTHONPATH either: a source tree on it (as in `PYTHONPATH=$PWD pytest`) would be imported instead.
    inherited = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    no_compiler = {**inherited, "CC": "/bin/false", "CXX": "/bin/false", "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(built.repaired)],
        env=no_compiler, timeout=300)
    result = run([str(python), "-c", SMOKE, str(site)], env=no_compiler, cwd=tmp_path, timeout=300)
    assert result.stdout.strip().endswith("OK")

    version = built.repaired.name.split("-")[1]
    assert run([str(venv / "bin" / "fastmq"), "--version"], env=no_compiler, cwd=tmp_path,
               timeout=60).stdout.strip() == f"fastmq {version}"
    assert run([str(python), "-m", "fastmq", "--version"], env=no_compiler, cwd=tmp_path,
               timeout=60).stdout.strip() == f"fastmq {version}"


EXTRAS = sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def test_the_documented_extras_are_declared():
    assert {"arrow", "bench", "proxy", "spark", "test"} <= set(EXTRAS)


@pytest.mark.parametrize("extra", EXTRAS)
def test_each_extra_resolves_alone(built, extra):
    # A resolver check without the network: pip resolves the wheel with this one extra against what the test
    # environment has installed (the `test` extra installs them all) and reports what it would install.
    result = run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet", "--report", "-",
                  f"fastmq[{extra}] @ {built.repaired.as_uri()}"], timeout=300)
    report = json.loads(result.stdout)
    # Nothing but fastmq itself is missing; where this fastmq is installed already (an editable install of the
    # checkout, as `pip install -e ".[test]"` makes), pip has nothing to install at all.
    names = [item["metadata"]["name"] for item in report["install"]]
    assert names in ([], ["fastmq"]), report["install"]
    if names:
        assert extra in report["install"][0]["requested_extras"]
