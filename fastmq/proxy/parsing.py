"""Reading the proxy's requests: what /produce, /message, /ack and /nack were asked, or a 4xx HttpError saying
what is wrong. Pure functions of a Request, property-tested in tests/proxy/test_parsing.py.

/produce bodies by Content-Type:
  application/json           {"producer": P, "topic": T, "messages": [M, ...]} or one message's fields at the top;
                             M = {"value": text or any JSON | "base64": B, "key": K, "headers": {N: V}, "tags": S}
                             (a non-string value is sent as its JSON text)
  text/plain                 the body is one message (UTF-8); key and tags in the query string
  application/octet-stream   the body is one message's bytes; key and tags in the query string
Message headers of a text or binary body come from the request's `X-Message-Header-<name>` headers.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Literal, cast, overload

from fastmq.proxy._native.produce import plain_batch, plain_values
from fastmq.proxy.backend import OutgoingMessages
from fastmq.proxy.http import HttpError, Request
from fastmq.proxy.state import AckToken, StateError, check_name

HEADER_PREFIX = "x-message-header-"
MESSAGE_FIELDS = frozenset(("value", "base64", "key", "headers", "tags"))


@dataclass(slots=True)          # not frozen: made per request (see fastmq/proxy/state.py's AckToken)
class ProduceRequest:
    producer: str
    topic: str | None
    messages: OutgoingMessages


@dataclass(slots=True)
class PullRequest:
    consumer: str
    topic: str | None
    client_id: str | None
    max_messages: int
    wait_ms: int
    ack: AckToken | None


@dataclass(slots=True)
class AckRequest:
    consumer: str
    topic: str | None
    client_id: str | None
    token: AckToken
    delay_ms: int


@overload
def name_param(value: Any, kind: str, *, required: Literal[True] = True) -> str: ...


@overload
def name_param(value: Any, kind: str, *, required: bool) -> str | None: ...


def name_param(value: Any, kind: str, *, required: bool = True) -> str | None:
    if value is None or value == "":
        if required:
            raise HttpError(400, "missing_parameter", f"the parameter {kind!r} is required")
        return None
    try:
        return check_name(kind, value)
    except StateError as exc:
        raise HttpError(400, "bad_parameter", str(exc)) from None


def int_param(value: Any, name: str, low: int, high: int, default: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise HttpError(400, "bad_parameter", f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


@overload
def token_param(value: Any, *, required: Literal[True]) -> AckToken: ...


@overload
def token_param(value: Any, *, required: bool) -> AckToken | None: ...


def token_param(value: Any, *, required: bool) -> AckToken | None:
    if value is None or value == "":
        if required:
            raise HttpError(400, "missing_parameter", "the parameter 'token' is required")
        return None
    try:
        return AckToken.parse(value)
    except StateError as exc:
        raise HttpError(400, "bad_token", str(exc)) from None


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise HttpError(400, "bad_message", f"{what} must be a string, not {type(value).__name__}")
    return value


# A message's value, key, headers and tags (None when it has none).
Message = tuple[bytes, bytes | None, list[tuple[str, bytes]] | None, str | None]
KEY, HEADERS, TAGS = 1, 2, 3


def _message(fields: Any, index: int) -> Message:
    """A message from its JSON object."""
    where = f"message {index}"
    if not isinstance(fields, dict):
        raise HttpError(400, "bad_message", f"{where} must be a JSON object")
    unknown = set(fields) - MESSAGE_FIELDS
    if unknown:
        raise HttpError(400, "bad_message", f"{where} has unknown fields {sorted(unknown)}; "
                                            f"known: {sorted(MESSAGE_FIELDS)}")
    if ("value" in fields) == ("base64" in fields):
        raise HttpError(400, "bad_message", f"{where} needs exactly one of 'value' and 'base64'")
    if "base64" in fields:
        try:
            value = base64.b64decode(_text(fields["base64"], f"{where}'s base64"), validate=True)
        except binascii.Error as exc:
            raise HttpError(400, "bad_message", f"{where}'s base64 cannot be decoded: {exc}") from None
    else:
        raw = fields["value"]
        value = (raw if isinstance(raw, str) else json.dumps(raw, separators=(",", ":"))).encode()
    key = fields.get("key")
    headers = fields.get("headers") or {}
    if not isinstance(headers, dict):
        raise HttpError(400, "bad_message", f"{where}'s headers must be an object of strings")
    tags = fields.get("tags")
    return (value, None if key is None else _text(key, f"{where}'s key").encode(),
            [(_text(k, "a header name"), _text(v, f"header {k!r}").encode()) for k, v in headers.items()] or None,
            None if tags is None else _text(tags, f"{where}'s tags"))


def _messages(listed: list[Any]) -> OutgoingMessages:
    """The messages of a JSON body as columns. A message that is only {"value": text}, the common case, is
    encoded in C (plain_values); the others go through _message, and their keys, headers and tags are placed
    into columns at the end."""
    encoded, not_plain = plain_values(listed)
    others: list[tuple[int, Message]] = []
    for index in not_plain:
        message = _message(listed[index], index)
        encoded[index] = message[0]
        if message[KEY] is not None or message[HEADERS] is not None or message[TAGS] is not None:
            others.append((index, message))
    values = cast(list[bytes], encoded)         # every entry is set now
    return OutgoingMessages(values, _column(others, KEY, len(values)), _column(others, HEADERS, len(values)),
                            _column(others, TAGS, len(values)))


def _column(others: list[tuple[int, Message]], field: int, count: int) -> list[Any] | None:
    """A column of `count` entries from the messages that have the field, None when none has it."""
    given = [(index, message[field]) for index, message in others if message[field] is not None]
    if not given:
        return None
    column: list[Any] = [None] * count
    for index, entry in given:
        column[index] = entry
    return column


def _at_most(listed: list[Any], max_messages: int) -> list[Any]:
    if len(listed) > max_messages:
        raise HttpError(413, "too_many_messages", f"at most {max_messages} messages per request")
    return listed


def parse_produce(request: Request, max_messages: int) -> ProduceRequest:
    try:
        return _parse_produce(request, max_messages)
    except UnicodeEncodeError:
        raise HttpError(400, "bad_message", "a text holds a lone surrogate (\\ud800-\\udfff), "
                                            "which UTF-8 cannot carry") from None


def _parse_produce(request: Request, max_messages: int) -> ProduceRequest:
    kind = request.content_type
    if kind == "application/json":
        # The common body is read in C with no JSON object per message (plain_batch); any other by orjson.
        plain = plain_batch(request.body)
        body = plain[0] if plain is not None else request.json()
        producer = name_param(request.param("producer", body), "producer")
        topic = name_param(request.param("topic", body), "topic", required=False)
        if plain is not None:
            messages = OutgoingMessages(_at_most(plain[1], max_messages))
        elif "messages" in body:
            listed = body["messages"]
            if not isinstance(listed, list) or not listed:
                raise HttpError(400, "bad_message", "messages must be a non-empty list")
            messages = _messages(_at_most(listed, max_messages))
        else:
            messages = _messages([{k: v for k, v in body.items() if k not in ("producer", "topic")}])
        return ProduceRequest(producer, topic, messages)
    if kind in ("text/plain", "application/octet-stream"):
        if kind == "text/plain":
            try:
                request.body.decode("utf-8")
            except UnicodeDecodeError:
                raise HttpError(400, "bad_message", "a text/plain body must be UTF-8") from None
        key, tags = request.query.get("key"), request.query.get("tags")
        headers = [(name[len(HEADER_PREFIX):], value.encode()) for name, value in request.headers.items()
                   if name.startswith(HEADER_PREFIX) and len(name) > len(HEADER_PREFIX)]
        message = OutgoingMessages([request.body], None if key is None else [key.encode()],
                                   [headers] if headers else None, None if tags is None else [tags])
        return ProduceRequest(name_param(request.query.get("producer"), "producer"),
                              name_param(request.query.get("topic"), "topic", required=False), message)
    raise HttpError(415, "unsupported_media_type",
                    "send application/json, text/plain or application/octet-stream, not "
                    f"{kind or 'a body without Content-Type'!r}")


def parse_pull(request: Request, max_messages: int, max_wait_ms: int) -> PullRequest:
    query = request.query
    return PullRequest(
        consumer=name_param(query.get("consumer"), "consumer"),
        topic=name_param(query.get("topic"), "topic", required=False),
        client_id=name_param(query.get("clientId"), "clientId", required=False),
        max_messages=int_param(query.get("max"), "max", 1, max_messages, min(16, max_messages)),
        wait_ms=int_param(query.get("wait_ms"), "wait_ms", 0, max_wait_ms, 0),
        ack=token_param(query.get("ack"), required=False))


def parse_ack(request: Request, max_delay_ms: int) -> AckRequest:
    body = request.json() if request.content_type == "application/json" else None
    return AckRequest(
        consumer=name_param(request.param("consumer", body), "consumer"),
        topic=name_param(request.param("topic", body), "topic", required=False),
        client_id=name_param(request.param("clientId", body), "clientId", required=False),
        token=token_param(request.param("token", body), required=True),
        delay_ms=int_param(request.param("delay_ms", body), "delay_ms", 0, max_delay_ms, 0))
