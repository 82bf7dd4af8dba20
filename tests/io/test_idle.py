"""IdleExpiry: the LRU that checks only the least recently used connection (with an explicit clock)."""
from __future__ import annotations

from fastmq.io.idle import IdleExpiry


def test_only_the_oldest_expired_entry_is_returned_and_the_check_time_follows_it():
    expiry = IdleExpiry(max_idle=10.0)
    expiry.touch("a", 0.0)
    expiry.touch("b", 1.0)
    expiry.touch("c", 2.0)
    assert expiry.poll_expired(5.0) is None
    assert expiry.next_check == 10.0          # a expires after 10
    assert expiry.poll_expired(10.0) is None  # "more than" max_idle
    assert expiry.poll_expired(10.5) == "a"
    expiry.remove("a")
    assert expiry.poll_expired(10.5) is None  # b is idle for 9.5 only
    assert expiry.next_check == 11.0


def test_activity_moves_a_connection_to_the_back_of_the_lru():
    expiry = IdleExpiry(max_idle=10.0)
    expiry.touch("a", 0.0)
    expiry.touch("b", 1.0)
    expiry.touch("a", 6.0)                    # a was used again: b is now the oldest
    assert expiry.poll_expired(11.5) == "b"
    expiry.remove("b")
    assert expiry.poll_expired(11.5) is None
    assert expiry.poll_expired(16.5) == "a"


def test_checks_before_the_next_check_time_do_not_look_at_the_lru():
    expiry = IdleExpiry(max_idle=10.0)
    expiry.touch("a", 0.0)
    assert expiry.poll_expired(1.0) is None   # next check at 10
    # Kafka's rule: until next_check nothing is inspected, even if the LRU changed meanwhile.
    expiry.remove("a")
    expiry.touch("b", -100.0)
    assert expiry.poll_expired(9.0) is None
    assert expiry.poll_expired(10.5) == "b"


def test_an_empty_lru_schedules_the_next_check_one_period_ahead():
    expiry = IdleExpiry(max_idle=3.0)
    assert expiry.poll_expired(100.0) is None
    assert expiry.next_check == 103.0
    assert len(expiry) == 0
    expiry.touch("x", 101.0)
    assert expiry.poll_expired(103.5) is None
    assert expiry.poll_expired(104.5) == "x"
