"""The `with` block of everything that holds connections, threads or files.

Clients, consumers, producers, admin clients and the store all close the same way on leaving a `with` block,
whether it ends or raises; each defines only close(), which must be safe to call more than once.
"""
from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Self


class Closeable:
    """Mixed into a class that defines close(): `with obj:` gives obj and closes it on the way out."""

    __slots__ = ()

    if TYPE_CHECKING:  # each subclass defines its own, with or without keyword arguments
        def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
