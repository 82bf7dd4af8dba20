"""nsqlookupd discovery: which nsqd (and, on Youzan's NSQ, which partition on which nsqd) serves a topic.

GET /lookup?topic=T[&access=r|w][&metainfo=true] on one lookupd after the other, best first. Vanilla answers
{"channels": [...], "producers": [{broadcast_address, tcp_port, http_port, ...}]}; Youzan's adds
"partitions": {"0": peer, ...} and, with metainfo, "meta": {partition_num, ordered, extend_support, ...}. Without
the v1 Accept header both wrap the answer in {"status_code", "status_txt", "data"}; both forms are read here.
404 (TOPIC_NOT_FOUND) means no nsqd has the topic yet: an empty answer, not a failure.

GET /listlookup (Youzan) names every lookupd of the cluster: those join the list. A lookupd that fails (no answer,
an error status, bad JSON) is asked again up to `retries` times (the seed's retries), then goes to the back of the
list, so the next lookups ask the others first.
Blocking HTTP: callers run it off the io loop (the clients' lookup thread).
"""
from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from fastmq.client.bootstrap import parse_servers
from fastmq.errors import ProtocolError
from fastmq.json_document import json_object
from fastmq.nsq.errors import NSQError

_log = logging.getLogger(__name__)

_ACCEPT_V1 = {"Accept": "application/vnd.nsq; version=1.0"}
NO_PARTITION = -1


class NSQLookupError(NSQError):
    """No lookupd answered."""


@dataclass(frozen=True, order=True)
class NSQDAddress:
    """Where one topic partition lives: nsqd's TCP address; partition -1 on vanilla nsqd."""

    host: str
    tcp_port: int
    partition: int = NO_PARTITION
    http_port: int = 0

    @property
    def node_id(self) -> tuple[str, int, int]:
        return (self.host, self.tcp_port, self.partition)


@dataclass
class TopicLookup:
    """A lookup's answer: the nsqd per partition (or the partitionless producers), channels, Youzan's meta."""

    addresses: list[NSQDAddress] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def partitioned(self) -> bool:
        return any(address.partition != NO_PARTITION for address in self.addresses)

    @property
    def ordered(self) -> bool:
        return bool(self.meta.get("ordered"))


def _peer(peer: dict[Any, Any], partition: int) -> NSQDAddress:
    keys = {key.lower(): value for key, value in peer.items()}
    host = keys.get("broadcast_address") or keys.get("hostname") or keys.get("remote_address", "").rsplit(":", 1)[0]
    return NSQDAddress(str(host), int(keys["tcp_port"]), partition, int(keys.get("http_port") or 0))


def _answer_data(document: object) -> Any:
    """What a lookupd answered: Youzan's wraps it as {"status_code", "status_txt", "data"}, vanilla's is bare."""
    if isinstance(document, dict) and "status_code" in document and "data" in document:
        return document["data"]
    return document


def parse_lookup(body: bytes) -> TopicLookup:
    """A /lookup answer (bare or wrapped) -> TopicLookup; ProtocolError for anything of another shape."""
    data = _answer_data(json_object(body, "nsqlookupd's lookup answer")) or {}
    try:
        partitions = data.get("partitions") or {}
        if partitions:
            addresses = [_peer(peer, int(number)) for number, peer in partitions.items()]
        else:
            addresses = [_peer(peer, NO_PARTITION) for peer in data.get("producers") or ()]
        return TopicLookup(sorted(set(addresses)), [str(channel) for channel in data.get("channels") or ()],
                           dict(data.get("meta") or {}))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"nsqlookupd's lookup answer is malformed: {exc!r}") from None


class Lookupd:
    """The lookupds of one client, in the order to ask them (thread-safe)."""

    def __init__(self, http_addresses: str | list[str], *, timeout: float = 5.0, retries: int = 1) -> None:
        self._addresses = [f"{host}:{port}" for host, port in parse_servers(http_addresses, 4161)]
        self.timeout = timeout
        self.retries = retries
        self._lock = threading.Lock()

    @property
    def addresses(self) -> list[str]:
        with self._lock:
            return list(self._addresses)

    def _get(self, address: str, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://{address}{path}", headers=_ACCEPT_V1)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _demote(self, address: str, reason: object) -> None:
        _log.warning("nsqlookupd %s failed (%s): it is asked last from now on", address, reason)
        with self._lock:
            if address in self._addresses:
                self._addresses.remove(address)
                self._addresses.append(address)

    def lookup(self, topic: str, *, access: str | None = None, metainfo: bool = False) -> TopicLookup:
        """The topic's nsqd from the first lookupd that answers; an unknown topic gives an empty answer."""
        query = {"topic": topic}
        if access is not None:
            query["access"] = access
        if metainfo:
            query["metainfo"] = "true"
        path = "/lookup?" + urllib.parse.urlencode(query)
        errors = []
        for address in self.addresses:
            for _ in range(1 + self.retries):
                try:
                    status, body = self._get(address, path)
                    if status == 404:
                        return TopicLookup()
                    if status != 200:
                        raise ValueError(f"HTTP {status}: {body[:200]!r}")
                    return parse_lookup(body)
                except (OSError, ValueError, ProtocolError) as exc:
                    errors.append(f"{address}: {exc}")
            self._demote(address, errors[-1])
        raise NSQLookupError(f"no nsqlookupd answered the lookup of {topic!r}: {'; '.join(errors)}")

    def discover(self) -> list[str]:
        """Add the lookupds that /listlookup names (Youzan); vanilla lookupds have no such endpoint."""
        for address in self.addresses:
            try:
                status, body = self._get(address, "/listlookup")
                if status != 200:
                    continue
                data = _answer_data(json.loads(body))
            except (OSError, ValueError):
                continue
            nodes = data.get("lookupdnodes") if isinstance(data, dict) else None
            found = []
            for node in nodes if isinstance(nodes, list) else ():
                if not isinstance(node, dict):
                    continue
                keys = {str(key).lower(): value for key, value in node.items()}
                if keys.get("nodeip") and keys.get("httpport"):
                    found.append(f"{keys['nodeip']}:{keys['httpport']}")
            with self._lock:
                self._addresses.extend(item for item in found if item not in self._addresses)
            break
        return self.addresses
