"""peer.js: a small program driving npm ali-ons 3.12.0 (pinned in package.json), a pure JavaScript RocketMQ
remoting client. install() puts its node_modules into the server cache once per package.json; run() executes
its scenarios in one node process."""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.rocketmq import peer_results
from tests.support.servers import ServerUnavailable, cache_root

HERE = Path(__file__).parent
PACKAGE = HERE / "package.json"
PROGRAM = HERE / "peer.js"


def install() -> Path:
    """The folder holding package.json's node_modules (npm runs only when package.json changed)."""
    digest = hashlib.sha256(PACKAGE.read_bytes()).hexdigest()[:16]
    folder = cache_root() / f"rocketmq-js-{digest}"
    if (folder / "node_modules" / "ali-ons").is_dir():
        return folder
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise ServerUnavailable("node and npm are needed for the ali-ons peer (apt-get install nodejs npm)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "node_modules" / "ali-ons").is_dir():
            staging = Path(tempfile.mkdtemp(prefix="npm-", dir=folder.parent))
            shutil.copy(PACKAGE, staging / "package.json")
            done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--omit=dev"], cwd=staging,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=300)
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise ServerUnavailable("npm install ali-ons@3.12.0 failed (the npm registry must be reachable):\n"
                                        + done.stdout.decode(errors="replace"))
            staging.rename(folder)
    return folder


def run(namesrv: str, name: str, timeout: float = 150.0) -> tuple[dict[str, dict[str, str]], str]:
    """Run every scenario against namesrv; returns ({scenario: {key: value}} of the RESULT lines, the whole
    output). A failed scenario is absent and its FAIL line is in the output. Topics and groups start with name."""
    modules = install()
    # peer.js lives in the repository, its node_modules in the cache: NODE_PATH joins them
    environment = {**os.environ, "NODE_PATH": str(modules / "node_modules")}
    done = subprocess.run(["node", str(PROGRAM), namesrv, name], cwd=modules, env=environment,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    output = done.stdout.decode("utf-8", "replace")
    return peer_results(output), output
