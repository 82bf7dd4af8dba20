"""CPU time of a process tree, read from /proc (Linux): for benches whose work runs in child processes (a
proxy, Spark's JVM and its Python workers, an embedded broker), where the bench process's own CPU time says
nothing."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterator


def process_tree_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """{pid: (command line, user + system CPU seconds)} of a process and all its descendants alive now."""
    parents: dict[int, int] = {}
    found: dict[int, tuple[str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        found[int(entry.name)] = (command, (int(fields[11]) + int(fields[12])) / tick)
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent and child not in tree]
        tree.update(children)
        frontier += children
    return {p: found[p] for p in tree if p in found}


# HotSpot's compiler threads, by the names /proc gives them (a thread's name is cut to 15 characters there).
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def threads_cpu_seconds(pid: int, names: tuple[str, ...]) -> float:
    """User + system CPU time of the process's threads whose name starts with one of names: a JVM broker's
    compiler threads (JIT_THREADS), say, whose work belongs to no client."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith(names):
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:         # a thread that ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def broker_pid(broker) -> int:
    """The process of a Kafka broker from the test kit: Tansu's server, or Apache Kafka's first node."""
    return broker.server.pid if hasattr(broker, "server") else broker.nodes[0].process.pid


def warm_until_compiled(pid: int | None, warm_round: Callable[[], object], quiet: float = 0.05,
                        rounds: int = 8) -> None:
    """Runs warm_round until the broker `pid`'s compiler threads take under `quiet` of its process tree's CPU in a
    round, at most `rounds` times, and prints each round's share. A broker with no compiler threads (not a JVM)
    gets one round; so does one in this process (pid None). A fresh JVM broker compiles the paths the
    clients' requests run over many rounds (Apache Kafka's C2 compilers still took 250-530 ns of broker CPU a
    100 B record after one round of 300k from each client, 740-1,260 ns a 1 KiB record after 500 MB from each),
    and whichever client is measured first would pay for it. Their share levels off at 4-6% (1 KiB, rounds of 1 GB
    and 200k small requests: 45%, 10%, 4%, 6%), hence 5%."""
    if pid is None:
        warm_round()
        return
    shares = []
    for _ in range(rounds):
        cpu, jit = tree_cpu_seconds(pid), threads_cpu_seconds(pid, JIT_THREADS)
        warm_round()
        shares.append((threads_cpu_seconds(pid, JIT_THREADS) - jit) / max(tree_cpu_seconds(pid) - cpu, 1e-9))
        if shares[-1] < quiet:
            break
    print(f"\nwarm-up: {len(shares)} rounds; compilers' share of the broker's CPU in each: "
          + ", ".join(f"{share:.0%}" for share in shares))


@contextlib.contextmanager
def broker_cpu(info: dict, pid: int, count: int) -> Iterator[None]:
    """Puts the CPU time per record of the broker process `pid` (and its children) over the block in info (a row's
    extra_info): broker_cpu_ns; when the broker bounds the rate, a client whose requests cost it less is the faster
    one (Apache Kafka, 1 KiB: 2.7-3.6 ns of its CPU a byte for fastmq's and confluent-kafka's requests alike), and
    the part of it that a JVM broker's compiler threads took (broker_jit_ns), which belongs to no client."""
    started, jit = tree_cpu_seconds(pid), threads_cpu_seconds(pid, JIT_THREADS)
    yield
    info["broker_cpu_ns"] = round((tree_cpu_seconds(pid) - started) / count * 1e9)
    info["broker_jit_ns"] = round((threads_cpu_seconds(pid, JIT_THREADS) - jit) / count * 1e9)


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its descendants."""
    return sum(cpu for _, cpu in process_tree_cpu(pid).values())


def run_delay_seconds(pid: int) -> float:
    """Time the process's threads spent runnable but waiting for a CPU (the second field of each thread's
    /proc/PID/task/TID/schedstat): on a loaded machine, how much of a server's latency is the scheduler's."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):      # a thread that ended meanwhile
            continue
    return total / 1e9
