"""What the aio clients share about their lifetime: starting fastmq's engine off the loop, `async with`, and
refusing calls before start() and after stop()."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Generic, Protocol, TypeVar

from fastmq.kafka import errors as kerrors
from fastmq.kafka.client import KafkaClient


class _Engine(Protocol):
    """What the aio clients need of the fastmq client they run on (Producer, Consumer or Admin)."""

    @property
    def client(self) -> KafkaClient: ...

    def close(self) -> None: ...


Engine = TypeVar("Engine", bound=_Engine)


class Lifetime(Generic[Engine]):
    """start() / stop() bookkeeping: `async with` starts and stops; engine() is the fastmq client the
    methods use, refused (IllegalStateError) before start() and (stopped_error) after stop()."""

    what = "client"
    stopped_error: type[Exception] = kerrors.IllegalStateError

    def __init__(self) -> None:
        self._engine: Engine | None = None
        self._closed = False

    def engine(self) -> Engine:
        if self._closed:
            raise self.stopped_error(f"the {self.what} is stopped")
        if self._engine is None:
            raise kerrors.IllegalStateError(f"call start() (or use `async with`) before using the {self.what}")
        return self._engine

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        """Close the engine (on a worker thread: closing waits for the broker); later calls do nothing."""
        if self._engine is None or self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._engine.close)

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()


async def start_engine(factory: Callable[[], Engine], timeout: float, close: Callable[[Engine], Any],
                       prepare: Callable[[Engine], Any] | None = None) -> Engine:
    """On worker threads: build a fastmq client (factory), wait for its first metadata and run prepare on it;
    if any of that fails the client is closed again. aiokafka's start() raises KafkaConnectionError when no
    bootstrap server answers."""
    engine = await asyncio.to_thread(factory)
    try:
        await asyncio.to_thread(_bootstrap, engine.client, timeout)
        if prepare is not None:
            await asyncio.to_thread(prepare, engine)
    except BaseException:
        await asyncio.to_thread(close, engine)
        raise
    return engine


def _bootstrap(client: KafkaClient, timeout: float) -> None:
    try:
        client.bootstrap(timeout)
    except kerrors.KafkaTimeoutError as exc:
        raise kerrors.KafkaConnectionError(str(exc)) from None
