"""Progress bars: drawn on a terminal, nothing otherwise (logs and pipes get only the results)."""
from __future__ import annotations

import io

from fastmq.cli.progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_on_a_terminal_and_ends_with_a_newline():
    stream = Terminal()
    bar = ProgressBar("produce", 200, stream=stream)
    bar.update(100)
    bar.update(200)
    bar.finish()
    frames = stream.getvalue().split("\r")[1:]
    assert frames[0].startswith("produce    [###############...............]  50.0% 100/200")
    assert frames[-1].startswith("produce    [##############################] 100.0% 200/200")
    assert frames[-1].endswith(" msg/s\n") and stream.getvalue().count("\n") == 1


def test_an_unfinished_bar_ends_its_line_at_finish():
    stream = Terminal()
    bar = ProgressBar("consume", 10, stream=stream)
    bar.update(3)
    bar.finish()
    assert stream.getvalue().count("\n") == 1 and " 3/10 " in stream.getvalue().rsplit("\r", 1)[1]


def test_nothing_is_written_when_not_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar("produce", 10, stream=stream)
    for done in range(11):
        bar.update(done)
    bar.finish()
    assert stream.getvalue() == ""
