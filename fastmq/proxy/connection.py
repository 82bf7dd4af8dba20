"""HTTP/1.1 connections of the proxy: httptools' parser (llhttp) feeding a plain ASGI app, under uvicorn's server
(which still owns the sockets, processes, signals, lifespan and graceful shutdown: this class is what it is given
as its `http` protocol, with the constructor and `shutdown()` it expects).

Why not uvicorn's own httptools protocol: per request it copies the lifespan state, makes an asyncio.Event and a
RequestResponseCycle, arms and cancels a keep-alive timer, and checks every response header against two regular
expressions; the status line and headers and then the body go out as two writes. Measured with a trivial ASGI
app (16 keep-alive connections): 22.5 us of server CPU per request with uvicorn's protocol, 8.5 us with the bare
parser. Here a request costs one small object, one task and one write; idle connections are closed by one timer
per connection that re-arms itself, not one per request.

What it serves: keep-alive (HTTP/1.1, or HTTP/1.0 with "Connection: keep-alive"), pipelined requests answered in
order, request bodies (Content-Length or chunked) handed to receive() as they come (reading pauses while more than
BODY_BUFFER bytes wait), "Expect: 100-continue", HEAD (no body written), responses with Content-Length or chunked.
Bad input: a request the parser refuses gets 400, a request line and headers over MAX_HEAD_BYTES 431; both close
the connection. An upgrade request is served as plain HTTP/1.1 and the connection closed after it.
"""
from __future__ import annotations

import asyncio
import http
import logging
from collections import deque
from typing import Any
from urllib.parse import unquote

import httptools
import orjson

_log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 << 10       # request line and headers of one request
BODY_BUFFER = 64 << 10          # request body read ahead of the app before reading pauses
MAX_PIPELINED = 16              # requests read ahead of the one being answered before reading pauses

STATUS_LINES: dict[int, bytes] = {int(status): b"HTTP/1.1 %d %s\r\n" % (status, status.phrase.encode())
                                   for status in http.HTTPStatus}


def _status_line(status: int) -> bytes:
    return STATUS_LINES.get(status) or b"HTTP/1.1 %d \r\n" % status


def _refusal(status: int, code: str, message: str) -> bytes:
    """A whole response that closes the connection, in the app's JSON error shape."""
    body = orjson.dumps({"ok": False, "error": code, "message": message})
    return (_status_line(status) + b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % len(body) + body)


class _Exchange:
    """One request and its response on a connection."""

    __slots__ = ("connection", "scope", "keep_alive", "expect_continue", "chunks", "buffered", "complete",
                 "body_taken", "waiter", "started", "head", "chunked", "remaining", "finished", "disconnected")

    def __init__(self, connection: HttpConnection, scope: dict[str, Any]) -> None:
        self.connection = connection
        self.scope = scope
        self.keep_alive = True
        self.expect_continue = False
        self.chunks: list[bytes] = []           # body read, not yet received by the app
        self.buffered = 0
        self.complete = False                   # the whole body was read
        self.body_taken = False                 # receive() handed out the last of the body
        self.waiter: asyncio.Future[None] | None = None
        self.started = False                    # http.response.start sent
        self.head = b""                         # status line and headers, written with the first body
        self.chunked = False
        self.remaining = 0                      # of the Content-Length the app declared
        self.finished = False                   # the whole response was written
        self.disconnected = False

    def wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def receive(self) -> dict[str, Any]:
        connection = self.connection
        if self.expect_continue:
            self.expect_continue = False
            connection.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        while True:
            if self.disconnected or self.finished:
                return {"type": "http.disconnect"}
            if self.chunks or (self.complete and not self.body_taken):
                break
            # Nothing read yet, or the whole body handed out already (then ASGI's receive waits for the end).
            connection.resume_reading()
            self.waiter = connection.loop.create_future()
            await self.waiter
        body = b"".join(self.chunks) if len(self.chunks) != 1 else self.chunks[0]
        self.chunks.clear()
        self.buffered = 0
        self.body_taken = self.complete
        connection.resume_reading()
        return {"type": "http.request", "body": body, "more_body": not self.complete}

    async def send(self, message: dict[str, Any]) -> None:
        if self.disconnected:
            return
        kind = message["type"]
        connection = self.connection
        if kind == "http.response.start" and not self.started:
            self.started = True
            self.head = self._head(message["status"], message.get("headers") or ())
        elif kind == "http.response.body" and self.started and not self.finished:
            body = message.get("body", b"")
            more = message.get("more_body", False)
            if self.scope["method"] == "HEAD":
                body = b""
            elif self.chunked:
                body = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
                if not more:
                    body += b"0\r\n\r\n"
            elif len(body) > self.remaining:
                raise RuntimeError("the response body is longer than its Content-Length")
            else:
                self.remaining -= len(body)
            if not more and not self.chunked and self.remaining and self.scope["method"] != "HEAD":
                raise RuntimeError("the response body is shorter than its Content-Length")
            if connection.write_paused is not None:
                await asyncio.shield(connection.write_paused)
            if self.head:
                body, self.head = self.head + body, b""
            connection.write(body)
            if not more:
                self.finished = True
                connection.answered(self)
        else:
            raise RuntimeError(f"ASGI message {kind!r} out of order (response started: {self.started}, "
                               f"finished: {self.finished})")

    def _head(self, status: int, headers: Any) -> bytes:
        lines = b"".join([b"%b: %b\r\n" % (name, value) for name, value in headers])
        if lines.count(b"\n") != len(headers) or lines.count(b"\r") != len(headers):
            raise RuntimeError(f"a response header may not hold a line break: {headers!r}")
        length = None
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"content-length":
                length = int(value)
            elif lowered == b"connection" and b"close" in value.lower():
                self.keep_alive = False
        if length is None and status not in (204, 304) and self.scope["method"] != "HEAD":
            self.chunked = True
            lines += b"transfer-encoding: chunked\r\n"
        self.remaining = length or 0
        if not self.keep_alive and b"connection: close" not in lines.lower():
            lines += b"connection: close\r\n"
        return b"%b%b%b\r\n" % (_status_line(status), self.connection.default_headers(), lines)


class HttpConnection(asyncio.Protocol):
    """uvicorn constructs it per connection as HttpConnection(config=, server_state=, app_state=)."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not config.loaded:
            config.load()
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.app_state = app_state
        self.keep_alive_s = float(config.timeout_keep_alive)
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.server: Any = None
        self.client: Any = None
        self.serving: _Exchange | None = None           # the request being answered
        self.queued: deque[_Exchange] = deque()         # pipelined requests read after it
        self.reading: _Exchange | None = None           # the request whose body the parser is reading
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.expect_continue = False
        self.reading_paused = False
        self.write_paused: asyncio.Future[None] | None = None
        self.closing = False                            # shutdown() asked: close after the current answer
        self.refusal = b""                              # bad input seen: answer this after the rest, then close
        self.active_at = self.loop.time()
        self.idle_timer: asyncio.TimerHandle | None = None
        self._defaults: tuple[Any, bytes] = (None, b"")

    # ---- the transport's side ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport (create_server)
        self.server = _address(transport.get_extra_info("sockname"))
        self.client = _address(transport.get_extra_info("peername"))
        self.server_state.connections.add(self)
        self.idle_timer = self.loop.call_later(self.keep_alive_s, self._idle_check)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        for exchange in (self.serving, self.reading, *self.queued):
            if exchange is not None:
                exchange.disconnected = True
                exchange.wake()
        self.queued.clear()
        if self.write_paused is not None and not self.write_paused.done():
            self.write_paused.set_result(None)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.active_at = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Served as plain HTTP/1.1 (no protocol switch here); what follows the request is not read.
            if self.reading is not None:
                self.reading.keep_alive = False
                self.reading.complete = True
                self.reading = None
            self.pause_reading()
        except httptools.HttpParserError as exc:         # a callback's own exception comes as one too
            if self.head_bytes > MAX_HEAD_BYTES:
                self._refuse(_refusal(431, "head_too_large",
                                      f"the request line and headers may hold at most {MAX_HEAD_BYTES} bytes"))
            else:
                self._refuse(_refusal(400, "bad_request", f"the request is not valid HTTP/1.1 ({exc})"))

    def pause_writing(self) -> None:
        self.write_paused = self.loop.create_future()

    def resume_writing(self) -> None:
        paused, self.write_paused = self.write_paused, None
        if paused is not None and not paused.done():
            paused.set_result(None)

    # ---- the parser's callbacks ----------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.head_bytes = 0
        self.expect_continue = False

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self.parser
        url = httptools.parse_url(self.url)
        raw_path = url.path
        path = raw_path.decode("latin-1")
        if "%" in path:
            path = unquote(path, encoding="latin-1")
        version = parser.get_http_version()
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": version,
                 "server": self.server, "client": self.client, "scheme": "http", "root_path": "",
                 "method": parser.get_method().decode("ascii"), "path": path, "raw_path": raw_path,
                 "query_string": url.query or b"", "headers": self.headers, "state": self.app_state.copy()}
        exchange = _Exchange(self, scope)
        exchange.keep_alive = parser.should_keep_alive() and not self.closing
        exchange.expect_continue = self.expect_continue and version == "1.1"
        self.reading = exchange
        if self.serving is None:
            self._serve(exchange)
        else:
            self.queued.append(exchange)
            if len(self.queued) >= MAX_PIPELINED:
                self.pause_reading()

    def on_body(self, body: bytes) -> None:
        exchange = self.reading
        if exchange is None:
            return
        exchange.chunks.append(body)
        exchange.buffered += len(body)
        if exchange.buffered > BODY_BUFFER:
            self.pause_reading()
        exchange.wake()

    def on_message_complete(self) -> None:
        exchange = self.reading
        if exchange is not None:
            exchange.complete = True
            exchange.wake()
            self.reading = None

    def _count_head(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > MAX_HEAD_BYTES:
            raise ValueError("the request's head is too large")      # feed_data raises it as a parser error

    # ---- serving ---------------------------------------------------------------------------------------------

    def _serve(self, exchange: _Exchange) -> None:
        self.serving = exchange
        task = self.loop.create_task(self._run(exchange))
        tasks = self.server_state.tasks         # uvicorn's graceful shutdown waits for these
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _run(self, exchange: _Exchange) -> None:
        try:
            await self.app(exchange.scope, exchange.receive, exchange.send)
        except Exception:
            _log.exception("the ASGI app failed on %s %s", exchange.scope["method"], exchange.scope["path"])
            self._broken(exchange)
        else:
            if not exchange.finished and not exchange.disconnected:
                _log.error("the ASGI app returned without finishing its response to %s %s",
                           exchange.scope["method"], exchange.scope["path"])
                self._broken(exchange)

    def _broken(self, exchange: _Exchange) -> None:
        if exchange.disconnected:
            return
        if not exchange.started:
            self.write(_refusal(500, "internal", "the proxy failed; see its log"))
        if self.transport is not None:
            self.transport.close()

    def answered(self, exchange: _Exchange) -> None:
        """The response is written: close, or serve the next pipelined request."""
        self.active_at = self.loop.time()
        exchange.wake()
        self.serving = None
        if not exchange.keep_alive or self.closing:
            if self.transport is not None:
                self.transport.close()
            return
        if self.queued:
            self._serve(self.queued.popleft())
        elif self.refusal:
            self._refuse(self.refusal)
            return
        if not self.refusal:
            self.resume_reading()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close now if idle, else after the response in progress."""
        self.closing = True
        if self.serving is None and self.transport is not None:
            self.transport.close()
        elif self.serving is not None:
            self.serving.keep_alive = False

    def _idle_check(self) -> None:
        """Close a connection idle for keep_alive_s (one timer per connection, moved on while it is used)."""
        idle = self.loop.time() - self.active_at
        if self.serving is not None:
            idle = 0.0
        elif idle >= self.keep_alive_s:
            if self.transport is not None:
                self.transport.close()
            return
        self.idle_timer = self.loop.call_later(self.keep_alive_s - idle, self._idle_check)

    # ---- writing ---------------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def default_headers(self) -> bytes:
        """uvicorn's default headers (the Date it renews every second), joined once per list it makes."""
        headers = self.server_state.default_headers
        known, joined = self._defaults
        if headers is not known:
            joined = b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers)
            self._defaults = (headers, joined)
        return joined

    def _refuse(self, response: bytes) -> None:
        """Answer bad input and close, after the answers to the requests read before it."""
        self.pause_reading()
        self.refusal = response
        if self.serving is None:
            self.write(response)
            if self.transport is not None:
                self.transport.close()

    def pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.reading_paused and self.transport is not None and len(self.queued) < MAX_PIPELINED and (
                self.reading is None or self.reading.buffered <= BODY_BUFFER):
            self.reading_paused = False
            self.transport.resume_reading()


def _address(info: Any) -> tuple[str, int] | None:
    return (str(info[0]), int(info[1])) if isinstance(info, tuple) and len(info) >= 2 else None
