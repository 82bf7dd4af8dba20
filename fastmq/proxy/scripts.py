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


def _encode(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int):
        return b"%d" % value
    return str(value).encode()


class Packed:
    """Arguments packed once, to be sent after others many times (the queues' bounds of a topic)."""

    def __init__(self, args: Sequence[Any]) -> None:
        self.count = len(args)
        self.data = b"".join(_bulk(_encode(a)) for a in args)


def _bulk(arg: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(arg), arg)


def pack(args: Sequence[bytes], packed: Packed | None = None) -> bytes:
    parts = [b"*%d\r\n" % (len(args) + (packed.count if packed is not None else 0))]
    parts += [_bulk(arg) for arg in args]
    if packed is not None:
        parts.append(packed.data)
    return b"".join(parts)


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

    def call(self, args: Sequence[bytes], packed: Packed | None = None) -> asyncio.Future[Any]:
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
            auth = [b"AUTH"] + ([_encode(self._username)] if self._username else []) + [_encode(self._password)]
            await pipe.call(auth)
        if self._db:
            await pipe.call([b"SELECT", _encode(self._db)])
        self._pipe = pipe
        return pipe

    async def run(self, script: Script, keys: Sequence[Any], args: Sequence[Any], packed: Packed | None = None
                  ) -> Any:
        """EVALSHA with the keys, the args, then the packed args."""
        pipe = self._pipe
        if pipe is None or pipe.lost is not None:
            pipe = await self._connected()
        tail = [b"%d" % len(keys), *[_encode(k) for k in keys], *[_encode(a) for a in args]]
        try:
            return await pipe.call([b"EVALSHA", script.sha, *tail], packed)
        except ScriptError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await pipe.call([b"EVAL", script.source, *tail], packed)

    def close(self) -> None:
        if self._pipe is not None and self._pipe.transport is not None:
            self._pipe.transport.close()
        self._pipe = None
