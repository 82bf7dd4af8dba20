"""Progress bars and result tables for the command line (stderr bars, plain-text fallback, no dependency)."""
from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO


class ProgressBar:
    """A bar on stderr, redrawn at most ten times a second; nothing when stderr or stdout is not a terminal (logs,
    pipes and `> file` get only the results)."""

    def __init__(self, label: str, total: int, unit: str = "msg", stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(total, 1)
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        # On the default stream, stdout counts too: results piped or redirected mean a program is reading them, not
        # a person watching a bar.
        self.tty = self.stream.isatty() and (stream is not None or sys.stdout.isatty())
        self.done = 0
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._finished = False

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if self.tty and not self._finished and (now - self._drawn_at >= 0.1 or done >= self.total):
            self._drawn_at = now
            self._finished = done >= self.total
            self._draw(now, end="\n" if self._finished else "")

    def _draw(self, now: float, end: str) -> None:
        fraction = min(1.0, self.done / self.total)
        rate = self.done / max(now - self.started, 1e-9)
        width = 30
        filled = int(fraction * width)
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.label:<10} [{bar}] {fraction:6.1%} {self.done}/{self.total} "
                          f"{format_rate(rate)} {self.unit}/s{end}")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and not self._finished:
            self._finished = True
            self._draw(time.monotonic(), end="\n")


def format_rate(value: float) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f}{suffix}"
    return f"{value:.0f}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], stream: TextIO | None = None) -> None:
    """A plain aligned table: the first column left-aligned, the others right-aligned."""
    stream = stream if stream is not None else sys.stdout
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        line = "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        stream.write(line + "\n")
        if index == 0:
            stream.write("  ".join("-" * w for w in widths) + "\n")
