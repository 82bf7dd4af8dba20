"""Comparing fastmq's kafka-python-compatible faces with kafka-python itself (the oracle): the same errors, or
the same success, for the same call on the same broker."""
from __future__ import annotations

import kafka.errors
import pytest


def same_error(ours_call, theirs_call) -> type:
    """Both calls raise; fastmq's error class carries kafka-python's name (and its kafka-python-shaped
    ancestry); returns fastmq's class."""
    with pytest.raises(Exception) as mine:
        ours_call()
    with pytest.raises(Exception) as peer:
        theirs_call()
    assert type(mine.value).__name__ == type(peer.value).__name__
    if isinstance(peer.value, kafka.errors.BrokerResponseError):
        assert mine.value.errno == peer.value.errno
    return type(mine.value)


def same_outcome(ours_call, theirs_call) -> tuple | None:
    """Both calls raise the same error (as same_error; returns None), or neither does (returns both results):
    for what one broker lacks (Tansu) and another has (Apache Kafka)."""
    outcomes = []
    for call in (ours_call, theirs_call):
        try:
            outcomes.append((call(), None))
        except Exception as exc:
            outcomes.append((None, exc))
    (mine, my_error), (peer, peer_error) = outcomes
    assert (my_error is None) == (peer_error is None), (my_error, peer_error)
    if my_error is None:
        return mine, peer
    assert type(my_error).__name__ == type(peer_error).__name__
    if isinstance(peer_error, kafka.errors.BrokerResponseError):
        assert my_error.errno == peer_error.errno
    return None
