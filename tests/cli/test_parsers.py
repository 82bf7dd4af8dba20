"""The command line's parsers of user text: any input gives a value or a clear error, never another exception."""
from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq.broker.auth import parse_users
from fastmq.cli.admin import key_value, parse_datetime
from fastmq.cli.consume import Formatter, parse_format, parse_offset
from fastmq.cli.endpoint import Endpoint, parse_endpoint, parse_timeout
from fastmq.errors import ConfigurationError
from fastmq.kafka.structs import ConsumerRecord

RECORD = ConsumerRecord("t", 1, 7, 42, 1_700_000_000_000, 0, b"k", b"v", (("h", b"1"),), None, 1, 1, 1)
ARGUMENT_PARSERS = [parse_offset, parse_format, parse_endpoint, parse_timeout, key_value, parse_datetime]


@pytest.mark.parametrize("parse", ARGUMENT_PARSERS, ids=lambda f: f.__name__)
@given(text=st.text(max_size=40))
def test_argument_parsers_accept_or_explain(parse, text):
    try:
        parse(text)
    except argparse.ArgumentTypeError as exc:
        assert str(exc)


@given(literal=st.text(alphabet=st.characters(blacklist_characters="%\\", blacklist_categories=("Cs",)),
                              max_size=40))
def test_a_format_without_tokens_is_written_as_is(literal):
    assert Formatter(literal).format(RECORD) == literal.encode()


@given(pieces=st.lists(st.sampled_from(["%t", "%p", "%o", "%k", "%s", "%T", "%%", "\\n", "-", "x"]), max_size=12))
def test_format_tokens_compose(pieces):
    values = {"%t": b"t", "%p": b"1", "%o": b"42", "%k": b"k", "%s": b"v", "%T": b"1700000000000", "%%": b"%",
              "\\n": b"\n", "-": b"-", "x": b"x"}
    assert Formatter("".join(pieces)).format(RECORD) == b"".join(values[p] for p in pieces)


def test_unknown_format_tokens_are_named():
    for pattern, token in (("%x", "'%x'"), ("abc %", "'%'"), ("%s%%%q", "'%q'")):
        with pytest.raises(ValueError, match=f"unknown format token {token}"):
            Formatter(pattern)


def test_offsets_and_endpoints():
    assert [parse_offset(s) for s in ("beginning", "end", "stored", "12", "-3", "s@1700000000000")] == [
        "beginning", "end", "stored", "12", "-3", "s@1700000000000"]
    for bad in ("--3", "s@", "s@x", "later", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_offset(bad)
    assert parse_endpoint("h:1,h:2") == Endpoint(None, "h:1,h:2")
    assert parse_endpoint("KAFKA://h:1") == Endpoint("kafka", "h:1")
    with pytest.raises(argparse.ArgumentTypeError, match="no host:port"):
        parse_endpoint("kafka://")


@given(text=st.text(max_size=200))
def test_users_text_gives_users_or_a_configuration_error(text):
    try:
        users = parse_users(text, "source")
    except ConfigurationError as exc:
        assert str(exc).startswith("source line ")
    else:
        assert all(name and name == name.strip() for name in users)


def test_users_text():
    assert parse_users("# users\n\n alice =pw=with=equals\nbob=\n", "f") == {"alice": "pw=with=equals", "bob": ""}
    with pytest.raises(ConfigurationError, match="f line 2: wants NAME=PASSWORD"):
        parse_users("a=b\nnobody\n", "f")
