"""fastmq/json_document.py: JSON from servers and files is an object or an array, or the reader's own error."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import CorruptDataError, ProtocolError
from fastmq.json_document import json_array, json_object


class ReaderError(Exception):
    pass


def test_an_object_and_an_array_come_back_as_parsed() -> None:
    assert json_object(b'{"a": [1, null]}', "the answer") == {"a": [1, None]}
    assert json_array('[{"type": 0}]', "the rules") == [{"type": 0}]


@pytest.mark.parametrize(("data", "message"), [
    (b"{not json", r"^the answer: not JSON \("),
    (b"\xff\xfe{", r"^the answer: not JSON \("),
    (b"[" * 100_000, r"^the answer: not JSON \("),
    (b"[1]", r"^the answer: a JSON object was expected, got an array$"),
    (b"null", r"^the answer: a JSON object was expected, got null$"),
    (b'"text"', r"^the answer: a JSON object was expected, got a str$"),
])
def test_anything_else_raises_the_readers_error_naming_what_it_read(data: bytes, message: str) -> None:
    with pytest.raises(ReaderError, match=message):
        json_object(data, "the answer", ReaderError)


def test_the_default_error_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="a JSON array was expected, got an object"):
        json_array(b"{}", "the rules")


def test_a_reader_may_bring_its_own_parser() -> None:
    def lenient(data: bytes) -> object:
        return json.loads(data.replace(b"'", b'"'))
    assert json_object(b"{'a': 1}", "the body", CorruptDataError, loads=lenient) == {"a": 1}
    with pytest.raises(CorruptDataError, match="not JSON"):
        json_object(b"{'a'", "the body", CorruptDataError, loads=lenient)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=64), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12).map(lambda value: json.dumps(value).encode())))
def test_any_bytes_give_the_expected_kind_or_the_readers_error(data: bytes) -> None:
    for parse, kind in ((json_object, dict), (json_array, list)):
        try:
            document = parse(data, "the input", ReaderError)
        except ReaderError as exc:
            assert str(exc).startswith("the input: ")
        else:
            assert isinstance(document, kind)
            assert document == json.loads(data)
