"""Closeable (fastmq/closeable.py): `with` gives the object itself and closes it once, whether the block ends or
raises, and never swallows what the block raised."""
from __future__ import annotations

import pytest

from fastmq.closeable import Closeable
from fastmq.store import MessageStore


class Counted(Closeable):
    def __init__(self) -> None:
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


def test_the_block_gets_the_object_and_its_end_closes_it() -> None:
    resource = Counted()
    with resource as entered:
        assert entered is resource
        assert resource.closes == 0
    assert resource.closes == 1


def test_an_exception_in_the_block_closes_and_goes_on_up() -> None:
    resource = Counted()
    with pytest.raises(KeyError, match="from the block"):
        with resource:
            raise KeyError("from the block")
    assert resource.closes == 1


def test_a_real_store_left_by_an_exception_is_closed(tmp_path) -> None:
    with pytest.raises(RuntimeError):
        with MessageStore(tmp_path / "store") as store:
            assert not store.closed
            raise RuntimeError("leave the block")
    assert store.closed
