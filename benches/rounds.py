"""Rows made of rounds: every client runs once a round, the order alternating from round to round (as listed in
even rounds, reversed in odd ones) so that no client always runs first or last on a machine whose load drifts, and
a row gives each client's median with fastmq's ratio over the others round by round."""
from __future__ import annotations

import statistics
from typing import Sequence, TypeVar

import pytest

Client = TypeVar("Client")

# A test that times its runs itself asks for the benchmark fixture only so that --benchmark-only runs it.
UNUSED_BENCHMARK = pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")


def alternating(clients: Sequence[Client], rounds: int) -> list[tuple[int, Client]]:
    """(round, client) in the order they run."""
    return [(round_, client) for round_ in range(rounds)
            for client in (clients if round_ % 2 == 0 else clients[::-1])]


def by_round(ratios: Sequence[float]) -> str:
    """'x1.10 x1.03 x0.97, median x1.03'."""
    return " ".join(f"x{ratio:.2f}" for ratio in ratios) + f", median x{statistics.median(ratios):.2f}"
