"""The proxy's OpenAPI 3.0 description, served at /openapi.json (schemathesis checks the proxy against it)."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from fastmq.proxy.http import Reply, Request

if TYPE_CHECKING:
    from fastmq.proxy.app import ProxyApp

NAME = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,249}$"}
TOKEN = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}:[0-9]{1,9}:[0-9]{1,19}:[0-9]{1,19}:[0-9]{1,19}$",
         "description": "broker:queue:offset:next_offset:timestamp"}
ERROR = {"type": "object", "required": ["ok", "error", "message"],
         "properties": {"ok": {"type": "boolean"}, "error": {"type": "string"}, "message": {"type": "string"}}}
MESSAGE_FIELDS = {
    "value": {"description": "text, or any JSON (sent as its JSON text)"},
    "base64": {"type": "string", "format": "byte"}, "key": {"type": "string"},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}}, "tags": {"type": "string"}}
EXACTLY_ONE_VALUE = [{"required": ["value"]}, {"required": ["base64"]}]
MESSAGE_IN = {"type": "object", "properties": MESSAGE_FIELDS, "additionalProperties": False,
              "oneOf": EXACTLY_ONE_VALUE}
MESSAGE_OUT = {"type": "object", "required": ["offset", "timestamp", "value"], "properties": {
    "offset": {"type": "integer"}, "timestamp": {"type": "integer"}, "key": {"type": "string", "nullable": True},
    "value": {"type": "string", "nullable": True},
    "headers": {"type": "object", "additionalProperties": {"type": "string", "nullable": True}},
    "binary": {"type": "array", "items": {"type": "string"}, "description": "fields given as base64"}}}


def _errors(*statuses: int) -> dict[Any, Any]:
    return {str(s): {"description": "an error", "content": {"application/json": {"schema": ERROR}}}
            for s in statuses}


def _json(schema: dict[Any, Any], description: str = "done") -> dict[Any, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _query(name: str, schema: dict[Any, Any], required: bool = False, description: str = "") -> dict[Any, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


ACK_BODY = {"type": "object", "required": ["consumer", "token"], "properties": {
    "consumer": NAME, "topic": NAME, "clientId": NAME, "token": TOKEN,
    "delay_ms": {"type": "integer", "minimum": 0, "maximum": 86400000}}}
OK = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}


@lru_cache(maxsize=None)
def spec_json(max_produce: int, max_pull: int, max_wait_ms: int) -> bytes:
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "fastmq HTTP proxy", "version": "1",
                 "description": "Produce and consume over HTTP; consumer offsets and locks live in Redis."},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{}, {"bearer": []}],
        "paths": {
            "/produce": {"post": {
                "summary": "send one or many messages",
                "parameters": [_query("producer", NAME, True, "(a JSON body may name it instead)"),
                               _query("topic", NAME), _query("key", {"type": "string"}),
                               _query("tags", {"type": "string"})],
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"oneOf": [
                        {"type": "object", "required": ["messages"], "additionalProperties": False,
                         "properties": {"producer": NAME, "topic": NAME, "messages": {
                             "type": "array", "minItems": 1, "maxItems": max_produce, "items": MESSAGE_IN}}},
                        {"type": "object", "description": "one message, its fields at the top",
                         "additionalProperties": False, "oneOf": EXACTLY_ONE_VALUE,
                         "properties": {"producer": NAME, "topic": NAME, **MESSAGE_FIELDS}}]}},
                    "text/plain": {"schema": {"type": "string"}},
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {"200": _json({"type": "object", "required": ["ok", "topic", "results"], "properties": {
                    "ok": {"type": "boolean"}, "topic": {"type": "string"}, "results": {"type": "array", "items": {
                        "type": "object", "required": ["queue", "offset", "timestamp"], "properties": {
                            "queue": {"type": "string"}, "offset": {"type": "integer"}, "timestamp": {"type": "integer"},
                            "id": {"type": "string", "description": "the message's id (RocketMQ's msgId); "
                                                                    "absent where the protocol has none (Kafka)"}}}}}}),
                              **_errors(400, 401, 403, 404, 413, 415, 429, 502)}}},
            "/message": {"get": {
                "summary": "lock a queue with backlog and pull from it",
                "parameters": [_query("consumer", NAME, True), _query("topic", NAME),
                               _query("clientId", NAME, description="required for broadcast consumers"),
                               _query("max", {"type": "integer", "minimum": 1, "maximum": max_pull}),
                               _query("wait_ms", {"type": "integer", "minimum": 0, "maximum": max_wait_ms}),
                               _query("ack", TOKEN, description="the previous token, acknowledged first")],
                "responses": {"200": _json({"type": "object", "required": ["ok", "status", "messages", "token"],
                                            "properties": {
                    "ok": {"type": "boolean"}, "status": {"type": "string", "enum": ["locked", "empty", "paused"]},
                    "token": {"type": "string", "nullable": True}, "queue": {"type": "string"},
                    "attempt": {"type": "integer"}, "lease_ms": {"type": "integer"}, "backlog": {"type": "integer"},
                    "ack": {"type": "string", "nullable": True},
                    "messages": {"type": "array", "items": MESSAGE_OUT}}}),
                              **_errors(400, 401, 403, 404, 429, 502)}}},
            "/ack": {"post": {"summary": "commit a token's messages and unlock its queue",
                              "requestBody": {"required": True,
                                              "content": {"application/json": {"schema": ACK_BODY}}},
                              "responses": {"200": _json(OK), **_errors(400, 401, 403, 404, 409, 415)}}},
            "/nack": {"post": {"summary": "unlock without committing; redelivered after delay_ms",
                               "requestBody": {"required": True,
                                               "content": {"application/json": {"schema": ACK_BODY}}},
                               "responses": {"200": _json(OK), **_errors(400, 401, 403, 404, 409, 415)}}},
            "/healthz": {"get": {"summary": "200 while serving, 503 while shutting down",
                                 "responses": {"200": _json(OK), "503": _json(OK, "shutting down")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {
                "description": "text exposition format", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "this document", "responses": {"200": _json({"type": "object"})}}},
        },
    }
    return json.dumps(spec).encode()


async def serve(app: ProxyApp, request: Request) -> Reply:
    config = app.config
    return Reply(200, body=spec_json(config.max_messages_per_produce, config.max_messages_per_pull,
                                     config.max_wait_ms))
