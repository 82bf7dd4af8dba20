"""JSON documents from servers and files, checked for what stands at their top.

nsqd's IDENTIFY and AUTH answers, an NSQ auth server's answer, RocketMQ's bodies and TubeMQ's flow-control rules
are JSON that a reader expects to be an object or an array. These functions parse and check in one step, so that
anything else raises the reader's own error saying what was expected, never a JSONDecodeError or an
AttributeError from deep inside the reader.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from fastmq.errors import ProtocolError

Loads = Callable[[Any], object]
MakeError = Callable[[str], Exception]


def json_object(data: bytes | str, what: str, error: MakeError = ProtocolError, *,
                loads: Loads = json.loads) -> dict[str, Any]:
    """`data` as a JSON object; error(message) naming `what` when it does not parse or is no object."""
    document = _parse(data, what, error, loads)
    if not isinstance(document, dict):
        raise error(f"{what}: a JSON object was expected, got {_kind(document)}")
    return document


def json_array(data: bytes | str, what: str, error: MakeError = ProtocolError, *,
               loads: Loads = json.loads) -> list[Any]:
    """`data` as a JSON array; error(message) naming `what` when it does not parse or is no array."""
    document = _parse(data, what, error, loads)
    if not isinstance(document, list):
        raise error(f"{what}: a JSON array was expected, got {_kind(document)}")
    return document


def _parse(data: bytes | str, what: str, error: MakeError, loads: Loads) -> object:
    try:
        return loads(data)
    except (ValueError, RecursionError) as exc:     # UnicodeDecodeError is a ValueError; deep nesting recurses
        raise error(f"{what}: not JSON ({exc})") from None


def _kind(document: object) -> str:
    if isinstance(document, dict):
        return "an object"
    if isinstance(document, list):
        return "an array"
    if document is None:
        return "null"
    return f"a {type(document).__name__}"
