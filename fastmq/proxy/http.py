"""The little HTTP the proxy needs on raw ASGI: a request read within a size limit, JSON answers, and errors that
answer as JSON with a status, a machine-readable code and a sentence saying what to do."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl

import orjson

Send = Callable[[dict[Any, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[Any, Any]]]


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def bearer_token(self) -> str | None:
        value = self.headers.get("authorization", "")
        if value[:7].lower() == "bearer ":
            return value[7:].strip()
        return self.headers.get("x-fastmq-token")

    def json(self) -> Any:
        """The body as a JSON object (400 when it is not one)."""
        try:
            # orjson reads a body several times faster; what it refuses and the stdlib takes (integers beyond 64
            # bits, NaN, lone surrogates) is read again by the stdlib, so that both read the same JSON.
            value = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            value = _stdlib_json(self.body)
        if not isinstance(value, dict):
            raise HttpError(400, "bad_json", "the body must be a JSON object")
        return value

    def param(self, name: str, body: dict[Any, Any] | None = None) -> Any:
        """A parameter from the JSON body when given there, else from the query string."""
        if body is not None and name in body:
            return body[name]
        return self.query.get(name)


def _stdlib_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, "bad_json", f"the body is not valid JSON: {exc}") from None


MAX_QUERY_FIELDS = 100


def parse_query(raw: bytes) -> dict[str, str]:
    text = raw.decode("latin-1")
    if "%" in text or "+" in text or text.count("&") >= MAX_QUERY_FIELDS:
        try:
            pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=False, max_num_fields=MAX_QUERY_FIELDS)
        except ValueError as exc:
            raise HttpError(400, "bad_query", f"the query string cannot be read: {exc}") from None
    else:
        # Nothing to unquote (the usual query: names, numbers, tokens): parse_qsl's answer, in a tenth of its time.
        pairs = [(name, value) for field in text.split("&") if field for name, _, value in (field.partition("="),)]
    query: dict[str, str] = {}
    for name, value in pairs:
        if name in query:
            raise HttpError(400, "bad_query", f"the query parameter {name!r} is given twice")
        query[name] = value
    return query


async def read_request(scope: dict[Any, Any], receive: Receive, max_body: int) -> Request:
    # Header names come lower-case (fastmq/proxy/connection.py makes them so, as ASGI servers do).
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    declared = headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_body):
        raise HttpError(413, "too_large", f"the body may hold at most {max_body} bytes")
    if (declared is None or declared == "0") and "transfer-encoding" not in headers:
        # No body comes (a GET /message): nothing to receive.
        return Request(scope["method"], scope["path"], parse_query(scope.get("query_string", b"")), headers, b"")
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionAbortedError("the client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_body:
            raise HttpError(413, "too_large", f"the body may hold at most {max_body} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return Request(scope["method"], scope["path"], parse_query(scope.get("query_string", b"")), headers,
                   b"".join(chunks))


async def send_body(send: Send, status: int, body: bytes, content_type: str,
                    headers: dict[str, str] | None = None) -> None:
    raw_headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    for name, value in (headers or {}).items():
        raw_headers.append((name.encode("latin-1"), value.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
    # orjson: about a tenth of json.dumps' time on the answers' lists (a produce of hundreds of messages answers
    # one object per message); compact, as json.dumps with these separators. Bodies are read by orjson too
    # (Request.json: 22 against 52 us for a produce of 100 messages of 100 B, 0.4 against 5.5 us for an ack).
    await send_body(send, status, orjson.dumps(value), "application/json", headers)


@dataclass
class Reply:
    """What a handler answers: a JSON value, or a body of its own type."""

    status: int
    value: Any = None
    body: bytes | None = None
    content_type: str = "application/json"
    headers: dict[str, str] | None = None

    async def send(self, send: Send) -> None:
        if self.body is None:
            await send_json(send, self.status, self.value, self.headers)
        else:
            await send_body(send, self.status, self.body, self.content_type, self.headers)
