"""Bootstrap server lists: "host1:port1,host2" or ["host1:port1", ...] -> [(host, port)]."""
from __future__ import annotations

from collections.abc import Iterable

from fastmq.errors import ConfigurationError

_MAX_PORT = 65535


def parse_servers(servers: str | Iterable[str], default_port: int) -> list[tuple[str, int]]:
    """The (host, port) pairs of a server list, in order. Entries are "host", "host:port", "[ipv6]",
    "[ipv6]:port" or a bare IPv6 address (which then takes the default port); blanks between commas are
    skipped. Raises ConfigurationError naming the entry that cannot be read, or when nothing is left."""
    if isinstance(servers, (bytes, bytearray)):
        raise ConfigurationError(f"the server list must be text, not {type(servers).__name__}")
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    parsed = []
    for raw in items:
        if not isinstance(raw, str):
            raise ConfigurationError(f"server {raw!r} is not a string")
        item = raw.strip()
        if not item:
            continue
        parsed.append(_parse_one(item, default_port))
    if not parsed:
        raise ConfigurationError("the server list is empty")
    return parsed


def _parse_one(item: str, default_port: int) -> tuple[str, int]:
    if item.startswith("["):                                # [ipv6] or [ipv6]:port
        host, closed, rest = item[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ConfigurationError(f"bad server {item!r}: expected [address] or [address]:port")
        port_text = rest[1:] if rest else None
    elif item.count(":") == 1:
        host, port_text = item.split(":")
    else:                                                   # a host name, or a bare IPv6 address
        host, port_text = item, None
    if not host or any(c.isspace() for c in host):
        raise ConfigurationError(f"bad server {item!r}: no host name")
    if port_text is None:
        return host, default_port
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) <= _MAX_PORT:
        raise ConfigurationError(f"bad server {item!r}: the port must be a number from 1 to {_MAX_PORT}")
    return host, int(port_text)
