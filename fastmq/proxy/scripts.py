"""The consumer-state scripts on Redis over one pipelined connection per proxy process.

Each /message and /ack runs one Lua script. Through redis-py's asyncio client a call takes a pooled connection,
packs its arguments through the client's encoder, writes, reads and gives the connection back: about 100 us of
Python per call, more than the script itself. Here every call made in one turn of the event loop goes out in one
write (auto-pipelining, fastmq/proxy/coalesce.py), replies are read by hiredis' C parser and handed to their callers in order (Redis answers
a connection's commands in the order they came), and a script is sent by its SHA1 (EVALSHA), loaded once when
Redis does not know it (NOSCRIPT, as after a restart).

Wire format: RESP2 arrays of bulk strings, `*<n>\\r\\n` then per argument `$<length>\\r\\n<bytes>\\r\\n`.
"""
from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from typing import Any, Sequence

import hiredis

from fastmq.errors import FastMQError
from fastmq.proxy.coalesce import Coalescer


class ScriptError(FastMQError):
    """Redis refused a command (the reply's error text), or the connection was lost."""


class Script:
    def __init__(self, source: str) -> None:
        self.source = source.encode()
        self.sha = hashlib.sha1(self.source).hexdigest().encode()


Arg = bytes | str | int


def _command(args: tuple[Arg, ...]) -> bytes:
    """A command of `args` (bytes, str as UTF-8, int in decimal), packed by hiredis in C: a third of the time of
    packing argument by argument in Python."""
    command: bytes = hiredis.pack_command(args)  # type: ignore[arg-type]  # its stub takes a tuple of one item
    return command


class Packed:
    """Arguments packed once, to be sent after others many times (the queues' bounds of a topic)."""

    def __init__(self, args: Sequence[Arg]) -> None:
        self.count = len(args)
        command = _command(tuple(args))
        self.data = command[command.index(b"\r\n") + 2:]      # the arguments, without the array's header


def pack(args: tuple[Arg, ...], packed: Packed | None = None) -> bytes:
    """A command of `args`, then those packed already."""
    command = _command(args)
    if packed is None:
        return command
    return b"*%d\r\n%b%b" % (len(args) + packed.count, command[command.index(b"\r\n") + 2:], packed.data)


class _Pipe(asyncio.Protocol):
    """One connection: call() queues a command and returns the future of its reply."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.outgoing = Coalescer(loop, self._write)
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # asyncio types it as the base; it is a Transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        waiting = self.waiting
        while True:
            reply = self.reader.gets()
            if reply is False:
                return
            future = waiting.popleft()
            if future.done():
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(ScriptError(str(reply)))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionError("Redis closed the connection")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(ScriptError(f"the connection to Redis was lost: {self.lost}"))

    def call(self, args: tuple[Arg, ...], packed: Packed | None = None) -> asyncio.Future[Any]:
        """The command's arguments, then those packed already."""
        self.outgoing.add(pack(args, packed))
        future = self.loop.create_future()
        self.waiting.append(future)
        return future

    def _write(self, data: bytes) -> None:
        if self.lost is None and self.transport is not None:
            self.transport.write(data)


class ScriptRunner:
    """Runs Scripts on the Redis that a redis-py client is connected to (its host, port, db and credentials);
    connects on first use, and again after the connection was lost."""

    def __init__(self, redis: Any) -> None:
        options = redis.connection_pool.connection_kwargs
        self._host, self._port = options.get("host", "127.0.0.1"), options.get("port", 6379)
        self._db = options.get("db", 0)
        self._username, self._password = options.get("username"), options.get("password")
        self._pipe: _Pipe | None = None
        self._connecting: asyncio.Future[_Pipe] | None = None

    async def _connected(self) -> _Pipe:
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        try:
            return await asyncio.shield(self._connecting)
        finally:
            self._connecting = None

    async def _connect(self) -> _Pipe:
        loop = asyncio.get_running_loop()
        _, pipe = await loop.create_connection(lambda: _Pipe(loop), self._host, self._port)
        if self._password is not None:
            auth: tuple[Arg, ...] = (b"AUTH", self._username, self._password) if self._username else (
                b"AUTH", self._password)
            await pipe.call(auth)
        if self._db:
            await pipe.call((b"SELECT", self._db))
        self._pipe = pipe
        return pipe

    async def run(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg], packed: Packed | None = None
                  ) -> Any:
        """EVALSHA with the keys, the args, then the packed args."""
        pipe = self._pipe
        if pipe is None or pipe.lost is not None:
            pipe = await self._connected()
        try:
            return await pipe.call((b"EVALSHA", script.sha, len(keys), *keys, *args), packed)
        except ScriptError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await pipe.call((b"EVAL", script.source, len(keys), *keys, *args), packed)

    def close(self) -> None:
        if self._pipe is not None and self._pipe.transport is not None:
            self._pipe.transport.close()
        self._pipe = None
