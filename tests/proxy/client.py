"""A small HTTP client of the proxy for the tests (http.client, one connection per call)."""
from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class ProxyClient:
    def __init__(self, port: int, token: str | None = None, timeout: float = 15.0) -> None:
        self.port = port
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, *, query: dict | None = None, json_body: Any = None,
             body: bytes | None = None, content_type: str | None = None, headers: dict | None = None) -> Answer:
        sent = dict(headers or {})
        if json_body is not None:
            body, content_type = json.dumps(json_body).encode(), "application/json"
        if content_type is not None:
            sent["content-type"] = content_type
        if self.token is not None:
            sent.setdefault("authorization", f"Bearer {self.token}")
        if query:
            path = f"{path}?{urlencode(query)}"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def produce(self, producer: str, messages: list[dict]) -> Answer:
        return self.call("POST", "/produce", json_body={"producer": producer, "messages": messages})

    def message(self, consumer: str, **query: Any) -> Answer:
        return self.call("GET", "/message", query={"consumer": consumer, **query})

    def ack(self, consumer: str, token: str, **fields: Any) -> Answer:
        return self.call("POST", "/ack", json_body={"consumer": consumer, "token": token, **fields})
