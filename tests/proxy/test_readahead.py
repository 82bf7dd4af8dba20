"""fastmq/proxy/readahead.py: runs of pulled messages served to the next requests of their queue."""
from __future__ import annotations

from fastmq.proxy.backend import PulledMessage
from fastmq.proxy.readahead import ReadAhead


def messages(*offsets: int) -> list[PulledMessage]:
    return [PulledMessage(o, 1000 + o, None, b"v%d" % o, []) for o in offsets]


def test_a_run_serves_the_offsets_it_covers_until_it_is_too_old():
    now = [0.0]
    ahead = ReadAhead(max_age_s=1.0, clock=lambda: now[0])
    # Offsets 10..14 with 12 gone (a transaction marker), and a marker after 14: the run ends at 16.
    ahead.keep("t", "kafka:0", 10, messages(10, 11, 13, 14), 16, 20)
    first = ahead.take("t", "kafka:0", 10, 2)
    assert [m.offset for m in first.messages] == [10, 11] and first.next_offset == 12 and first.high == 20
    rest = ahead.take("t", "kafka:0", 12, 10)
    assert [m.offset for m in rest.messages] == [13, 14] and rest.next_offset == 16
    past_markers = ahead.take("t", "kafka:0", 15, 10)
    assert past_markers.messages == [] and past_markers.next_offset == 16
    assert ahead.take("t", "kafka:0", 16, 1) is None          # beyond the run: ask the broker
    assert ahead.take("t", "kafka:0", 9, 1) is None           # before it
    assert ahead.take("t", "kafka:1", 10, 1) is None          # another queue
    now[0] = 1.5
    assert ahead.take("t", "kafka:0", 10, 1) is None          # too old


class Record:
    """A backend's own record: only an offset is needed to keep it."""

    def __init__(self, offset: int) -> None:
        self.offset = offset


def test_a_run_of_records_converts_only_what_it_hands_out():
    converted = []

    def convert(record: Record) -> PulledMessage:
        converted.append(record.offset)
        return messages(record.offset)[0]
    ahead = ReadAhead()
    ahead.keep("t", "kafka:0", 0, [Record(o) for o in range(500)], 500, 500, convert)
    taken = ahead.take("t", "kafka:0", 100, 3)
    assert [m.value for m in taken.messages] == [b"v100", b"v101", b"v102"] and taken.next_offset == 103
    assert converted == [100, 101, 102]
