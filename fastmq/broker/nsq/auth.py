"""nsqd's AUTH against auth servers (nsqd's --auth-http-address, repeatable; the broker's `--nsqd-auth-http-address`).

With auth servers configured, IDENTIFY answers auth_required=true and a client must send AUTH with a secret
before PUB / MPUB / DPUB / PUB_TRACE / MPUB_TRACE / PUB_EXT / SUB*. The broker asks the servers as nsqd 1.3.0 does:
one after the other from a random one on, until one gives a valid answer (AUTH fails when none does), with
the method nsqd's --auth-http-request-method chooses (nsqd after 1.3.0, commit 0db445c8; 1.3.0 itself only GETs):
  get:  GET http://ADDRESS/auth?remote_ip=IP&tls=true|false&secret=SECRET&common_name=CN
  post: POST http://ADDRESS/auth, Content-Type application/json, the same fields as Go's url.Values encode to
        JSON: {"common_name": [CN], "remote_ip": [IP], "secret": [SECRET], "tls": ["true"|"false"]}
(ADDRESS/auth, or the address itself when it is a URL). CN is the subject common name of the client's TLS
certificate once the connection upgraded to TLS and the client showed a verified one (empty otherwise). Answered with
  {"ttl": seconds > 0, "identity": "...", "identity_url": "...",
   "authorizations": [{"topic": REGEX, "channels": [REGEX, ...], "permissions": ["subscribe", "publish"]}]}
An authorization allows publishing to a topic its topic regex matches (and one of its channel regexes matches "",
as nsqd checks) when it has "publish", subscribing to a channel when it has "subscribe" and a channel regex matches
the channel. Regexes match anywhere in the name (Go's MatchString: re.search). When the TTL has passed the server
is asked again before the next command that needs it.

The server is asked on a worker thread (never on the broker's loop); the connection reads nothing meanwhile.
"""
from __future__ import annotations

import json
import random
import re
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from fastmq.json_document import json_object

PERMISSIONS = ("subscribe", "publish")
REQUEST_METHODS = ("get", "post")         # nsqd's --auth-http-request-method
REQUEST_TIMEOUT = 5.0
MAX_ANSWER = 1 << 20


class AuthServerError(Exception):
    """The auth server could not be asked, or its answer is not a valid one (the client only sees AUTH failed)."""


@dataclass(frozen=True)
class Authorization:
    topic: re.Pattern[str]
    channels: tuple[re.Pattern[str], ...]
    permissions: frozenset[str]

    def allows(self, topic: str, channel: str) -> bool:
        if ("subscribe" if channel else "publish") not in self.permissions:
            return False
        return bool(self.topic.search(topic)) and any(pattern.search(channel) for pattern in self.channels)


@dataclass(frozen=True)
class AuthState:
    identity: str
    identity_url: str
    authorizations: tuple[Authorization, ...]
    expires: float                    # time.monotonic()

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.expires

    def allows(self, topic: str, channel: str) -> bool:
        return any(authorization.allows(topic, channel) for authorization in self.authorizations)

    def answer(self) -> bytes:
        """AUTH's response body."""
        return json.dumps({"identity": self.identity, "identity_url": self.identity_url,
                           "permission_count": len(self.authorizations)}).encode()


def _list(document: dict[str, Any], name: str) -> list[Any]:
    value = document.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AuthServerError(f"{name} {value!r} is not a list")
    return value


def _pattern(value: object, what: str) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise AuthServerError(f"{what} {value!r} is not a string")
    try:
        return re.compile(value)
    except re.error as exc:
        raise AuthServerError(f"cannot compile {what} {value!r}: {exc}") from None


def parse_state(answer: bytes) -> AuthState:
    """The auth server's JSON answer, checked as nsqd checks it."""
    document = json_object(answer, "the auth server's answer", AuthServerError)
    ttl = document.get("ttl")
    if type(ttl) is not int or ttl <= 0:        # nsqd's int field: true and 1.5 are no TTL
        raise AuthServerError(f"invalid TTL {ttl!r} (must be > 0)")
    authorizations = []
    for entry in _list(document, "authorizations"):
        if not isinstance(entry, dict):
            raise AuthServerError(f"authorization {entry!r} is not an object")
        permissions = _list(entry, "permissions")
        unknown = [p for p in permissions if p not in PERMISSIONS]
        if unknown:
            raise AuthServerError(f"unknown permission {unknown!r}")
        authorizations.append(Authorization(
            _pattern(entry.get("topic", ""), "topic"),
            tuple(_pattern(channel, "channel") for channel in _list(entry, "channels")),
            frozenset(permissions)))
    return AuthState(str(document.get("identity", "")), str(document.get("identity_url", "")),
                     tuple(authorizations), time.monotonic() + ttl)


def _endpoint(address: str) -> str:
    return address if "://" in address else f"http://{address}/auth"


def query_auth_server(address: str, method: str, secret: str, remote_ip: str, tls: bool,
                      common_name: str) -> AuthState:
    """Ask one auth server about a secret (blocking: call it on a worker thread)."""
    fields = {"remote_ip": remote_ip, "tls": "true" if tls else "false", "secret": secret,
              "common_name": common_name}
    headers = {"Accept": "application/vnd.nsq; version=1.0"}
    endpoint = _endpoint(address)
    if method == "post":
        headers["Content-Type"] = "application/json"
        request = urllib.request.Request(endpoint, json.dumps({key: [value] for key, value in sorted(
            fields.items())}).encode(), headers, method="POST")
    else:
        request = urllib.request.Request(f"{endpoint}?{urllib.parse.urlencode(fields)}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as answer:
            body = answer.read(MAX_ANSWER + 1)
    except (OSError, ValueError) as exc:
        raise AuthServerError(f"cannot ask {endpoint}: {exc}") from None
    if len(body) > MAX_ANSWER:
        raise AuthServerError(f"the answer of {endpoint} is over {MAX_ANSWER} bytes")
    return parse_state(body)


def query_auth_servers(addresses: list[str], method: str, secret: str, remote_ip: str, tls: bool,
                       common_name: str = "") -> AuthState:
    """The first valid answer of the auth servers, asked in turn from a random one on (nsqd spreads its
    questions so); AuthServerError naming every failure when none answers."""
    start = random.randrange(len(addresses))
    failures = []
    for index in range(len(addresses)):
        address = addresses[(start + index) % len(addresses)]
        try:
            return query_auth_server(address, method, secret, remote_ip, tls, common_name)
        except AuthServerError as exc:
            failures.append(f"{address}: {exc}")
    raise AuthServerError("; ".join(failures) or "no auth server is configured")


def common_name(certificate: dict[str, Any] | None) -> str:
    """The subject common name of a peer certificate as SSLSocket.getpeercert() gives it ("" without one)."""
    for entry in (certificate or {}).get("subject", ()):
        for key, value in entry:
            if key == "commonName":
                return str(value)
    return ""
