"""RocketMQPeer.java: a small program driving Apache RocketMQ's Java client (tests/support/servers.py pins it),
compiled once per source version into the server cache, and run() to execute its scenarios in one JVM."""
from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.rocketmq import peer_results
from tests.support.servers import ROCKETMQ_JAVA_CLIENT, ServerUnavailable, cache_root, java_command

SOURCE = Path(__file__).with_name("RocketMQPeer.java")
MAIN_CLASS = "RocketMQPeer"


def compiled_classpath() -> str:
    """The client's jars and the compiled program (javac runs only when the source changed)."""
    client = ROCKETMQ_JAVA_CLIENT.classpath()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    classes = cache_root() / f"rocketmq-peer-{digest}"
    if not (classes / f"{MAIN_CLASS}.class").exists():
        if shutil.which("javac") is None:
            raise ServerUnavailable("javac is needed to compile tests/rocketmq_java (apt-get install openjdk-17-jdk)")
        classes.parent.mkdir(parents=True, exist_ok=True)
        with open(classes.parent / f"{classes.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (classes / f"{MAIN_CLASS}.class").exists():
                staging = Path(tempfile.mkdtemp(prefix="classes-", dir=classes.parent))
                done = subprocess.run(["javac", "-d", str(staging), "-cp", client, str(SOURCE)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
                if done.returncode != 0:
                    shutil.rmtree(staging, ignore_errors=True)
                    raise ServerUnavailable(f"javac {SOURCE.name} failed:\n{done.stdout.decode(errors='replace')}")
                staging.rename(classes)
    return f"{classes}:{client}"


def run(namesrv: str, work_dir: Path, timeout: float = 240.0, scenario: str = "",
        credentials: tuple[str, ...] | None = None) -> tuple[dict[str, dict[str, str]], str]:
    """Run every scenario (or the one named; the acl scenarios sign with credentials: access key, secret key and a
    security token or none); returns ({scenario: {key: value}} of the RESULT lines, the whole output). A scenario
    that failed is absent, its FAIL line and stack trace in the output. The client keeps its logs and the local
    offsets of broadcasting consumers in work_dir (by default they go to the home directory, and would carry
    offsets from one run to the next); topics and groups are named after work_dir's name."""
    options = [f"-Drocketmq.client.localOffsetStoreDir={work_dir / 'offsets'}",
               f"-Drocketmq.client.logRoot={work_dir / 'logs'}"]
    arguments = [scenario, *credentials] if credentials else [scenario] if scenario else []
    command = java_command(compiled_classpath(), MAIN_CLASS, namesrv, work_dir.name, *arguments, heap="256m",
                           options=options)
    done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout)
    output = done.stdout.decode("utf-8", "replace")
    return peer_results(output), output
