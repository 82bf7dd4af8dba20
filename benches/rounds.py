"""Rows made of rounds: every client runs once a round, the order alternating from round to round (as listed in
even rounds, reversed in odd ones) so that no client always runs first or last on a machine whose load drifts, and
a row gives each client's median with fastmq's ratio over the others round by round."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence, TypeVar

import pytest

Client = TypeVar("Client")

# A test that times its runs itself asks for the benchmark fixture only so that --benchmark-only runs it.
UNUSED_BENCHMARK = pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")


def alternating(clients: Sequence[Client], rounds: int) -> list[tuple[int, Client]]:
    """(round, client) in the order they run."""
    return [(round_, client) for round_ in range(rounds)
            for client in (clients if round_ % 2 == 0 else clients[::-1])]


def run_ids(runs: Sequence[tuple[int, Any]]) -> list[str]:
    """Test ids for alternating()'s runs: 'client-round'."""
    return [f"{client}-{round_}" for round_, client in runs]


def timed(run: dict[str, float], count: int, function: Callable[..., Any], *args: Any) -> Any:
    """function(*args), its wall time put in run["seconds"] and this process's CPU time per record (all its
    threads) in run["cpu_ns"]; returns what it returned."""
    cpu, started = time.process_time(), time.perf_counter()
    result = function(*args)
    run["seconds"] = time.perf_counter() - started
    run["cpu_ns"] = round((time.process_time() - cpu) / count * 1e9)
    return result


def by_round(ratios: Sequence[float]) -> str:
    """'x1.10 x1.03 x0.97, median x1.03'."""
    return " ".join(f"x{ratio:.2f}" for ratio in ratios) + f", median x{statistics.median(ratios):.2f}"


def over_by_round(ours: Sequence[float], theirs: Sequence[float]) -> str:
    """by_round() of one client's rates over another's, round by round."""
    return by_round([mine / their for mine, their in zip(ours, theirs)])


def record_medians(self_timed: Callable[..., None], group: str, runs: dict[str, list[dict[str, float]]],
                   items: Callable[[str], int], item_bytes: int) -> dict[str, list[float]]:
    """Records each client's row of `group` through self_timed: the median of its runs' seconds and of each of
    their other figures (cpu_ns, ...); returns client -> its rates (items a second), round by round."""
    rates = {}
    for client, client_runs in runs.items():
        count = items(client)
        medians = {key: statistics.median(run[key] for run in client_runs) for key in client_runs[0]}
        self_timed(group, client, medians.pop("seconds"), items=count, nbytes=count * item_bytes,
                   **{key: round(value) for key, value in medians.items()})
        rates[client] = [count / run["seconds"] for run in client_runs]
    return rates
