"""fastmq.client.bootstrap: server lists, with a property test that every input parses or is refused clearly."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.client import parse_servers
from fastmq.errors import ConfigurationError


def test_forms_of_an_entry():
    assert parse_servers("a:1, b ,[::1]:3,[fe80::2],::5", 9092) == [
        ("a", 1), ("b", 9092), ("::1", 3), ("fe80::2", 9092), ("::5", 9092)]
    assert parse_servers(["h:10", " ", "k"], 4150) == [("h", 10), ("k", 4150)]


@pytest.mark.parametrize("bad", ["host:notaport", "host:0", "host:65536", "host:", ":9092", "[::1", "[::1]x",
                                 "[::1]:", " , ", "", "h o:1", "h:١٢"])
def test_bad_lists_are_refused_naming_the_entry(bad):
    with pytest.raises(ConfigurationError, match="bad server|empty"):
        parse_servers(bad, 9092)


def test_not_text_is_refused():
    with pytest.raises(ConfigurationError):
        parse_servers(b"a:1", 9092)
    with pytest.raises(ConfigurationError):
        parse_servers([1], 9092)


hosts = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True)
ports = st.integers(1, 65535)


@given(st.lists(st.tuples(hosts, ports), min_size=1, max_size=5))
def test_a_written_list_reads_back(entries):
    text = ",".join(f"{host}:{port}" for host, port in entries)
    assert parse_servers(text, 1) == entries
    assert parse_servers([f" {host}:{port} " for host, port in entries], 1) == entries


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_configuration_error(text):
    try:
        parsed = parse_servers(text, 9092)
    except ConfigurationError:
        return
    assert parsed
    for host, port in parsed:
        assert host and not any(c.isspace() for c in host) and 1 <= port <= 65535
