"""The request parsers (fastmq/proxy/parsing.py, http.parse_query) and the config loader: any input gives either
a well-formed request or an HttpError / ConfigError with a 4xx status, nothing else."""
from __future__ import annotations

import base64
import json

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from fastmq.proxy.config import ConfigError, ProxyConfig
from fastmq.proxy.http import HttpError, Request, parse_query
from fastmq.proxy.parsing import parse_ack, parse_produce, parse_pull

CONTENT_TYPES = st.sampled_from(["application/json", "text/plain", "application/octet-stream", "text/html", ""])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4), max_leaves=12)
QUERIES = st.dictionaries(st.sampled_from(["producer", "consumer", "topic", "clientId", "max", "wait_ms", "ack",
                                           "key", "tags", "token", "delay_ms"]), st.text(max_size=30), max_size=6)


# Fewer examples than the suite's default: the parsers are small, and the suite's time is shared.
examples = settings(max_examples=25)


def request(body: bytes, content_type: str, query: dict[str, str] | None = None, method: str = "POST") -> Request:
    headers = {"content-type": content_type} if content_type else {}
    return Request(method, "/", query or {}, headers, body)


def refused(error: HttpError) -> None:
    assert 400 <= error.status < 500 and error.code and error.message


def produced(parsed) -> bool:
    messages = parsed.messages
    return bool(parsed.producer) and 1 <= len(messages) <= 10 and all(
        isinstance(value, bytes) for value in messages.values) and all(
        column is None or len(column) == len(messages) for column in (messages.keys, messages.headers, messages.tags))


def acked(parsed) -> bool:
    return parsed.token.next_offset >= parsed.token.offset and 0 <= parsed.delay_ms <= 1000


# The parsers of request bodies, each with what a request it accepts must satisfy.
BODY_PARSERS = {"produce": (lambda r: parse_produce(r, max_messages=10), produced),
                "ack": (lambda r: parse_ack(r, max_delay_ms=1000), acked)}


@examples
@given(st.sampled_from(sorted(BODY_PARSERS)),
       st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()), CONTENT_TYPES, QUERIES)
def test_body_parsers_answer_a_request_or_a_4xx(which, body, content_type, query):
    parse, well_formed = BODY_PARSERS[which]
    try:
        parsed = parse(request(body, content_type, query))
    except HttpError as error:
        refused(error)
        return
    assert well_formed(parsed)


@examples
@given(st.lists(st.fixed_dictionaries({}, optional={
    "value": JSON_VALUES, "base64": st.binary(max_size=10).map(lambda b: base64.b64encode(b).decode()),
    "key": st.text(max_size=5), "headers": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    "tags": st.text(max_size=5)}), min_size=1, max_size=5))
def test_produce_parser_keeps_what_json_messages_say(messages):
    body = json.dumps({"producer": "p", "messages": messages}).encode()
    try:
        parsed = parse_produce(request(body, "application/json"), max_messages=10)
    except HttpError as error:
        refused(error)
        assert any(("value" in m) == ("base64" in m) for m in messages)
        return
    assert produced(parsed) and len(parsed.messages) == len(messages)
    for index, given_message in enumerate(messages):
        value, key, headers, tags = parsed.messages.message(index)
        if "base64" in given_message:
            assert value == base64.b64decode(given_message["base64"])
        elif isinstance(given_message["value"], str):
            assert value == given_message["value"].encode()
        else:
            assert json.loads(value) == given_message["value"]
        assert key == (given_message["key"].encode() if "key" in given_message else None)
        assert headers == [(name, text.encode()) for name, text in given_message.get("headers", {}).items()]
        assert tags == given_message.get("tags")


def test_a_lone_surrogate_is_a_bad_message():
    """JSON may spell a lone UTF-16 surrogate, which UTF-8 cannot carry: 400, not a failure of the proxy."""
    for body in (b'{"producer": "p", "value": "\\ud800"}', b'{"producer": "p", "messages": [{"value": "a", "key": "\\udfff"}]}'):
        with pytest.raises(HttpError) as error:
            parse_produce(request(body, "application/json"), max_messages=10)
        assert (error.value.status, error.value.code) == (400, "bad_message")


@examples
@given(QUERIES)
def test_pull_parser_answers_a_request_or_a_4xx(query):
    try:
        parsed = parse_pull(request(b"", "", query, "GET"), max_messages=100, max_wait_ms=30000)
    except HttpError as error:
        refused(error)
        return
    assert 1 <= parsed.max_messages <= 100 and 0 <= parsed.wait_ms <= 30000 and parsed.consumer


@examples
@given(st.binary(max_size=100))
def test_query_parser_answers_a_mapping_or_a_4xx(raw):
    try:
        query = parse_query(raw)
    except HttpError as error:
        refused(error)
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in query.items())


@settings(max_examples=60)
@given(st.text(st.sampled_from("ab=&%+;1 \u00e9"), max_size=30) | st.lists(st.just("a=1"), max_size=120).map("&".join))
def test_query_parser_reads_what_parse_qsl_reads(text):
    """The fast path (no % or +) and parse_qsl answer the same, and refuse the same (too many fields)."""
    from urllib.parse import parse_qsl

    raw = text.encode("latin-1", "replace")
    try:
        expected = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, strict_parsing=False, max_num_fields=100)
    except ValueError:
        with pytest.raises(HttpError):
            parse_query(raw)
        return
    names = [name for name, _ in expected]
    if len(set(names)) < len(names):
        with pytest.raises(HttpError):
            parse_query(raw)
    else:
        assert parse_query(raw) == dict(expected)


@examples
@given(st.lists(st.fixed_dictionaries({"value": st.text(max_size=10)}) | JSON_VALUES, max_size=8))
def test_plain_messages_are_encoded_in_c_and_the_others_left_to_the_parser(listed):
    from fastmq.proxy._native.produce import plain_values

    plain = [type(m) is dict and len(m) == 1 and type(m.get("value")) is str for m in listed]
    try:
        expected = [m["value"].encode() if is_plain else None for m, is_plain in zip(listed, plain)]
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            plain_values(listed)
        return
    assert plain_values(listed) == (expected, [i for i, is_plain in enumerate(plain) if not is_plain])


# Bodies of /produce's common shape, written with JSON white space anywhere between tokens, members in any
# order, and texts that are sometimes outside what plain_batch reads (non-ASCII, escapes, control characters).
SPACE = st.sampled_from(["", " ", "\n", "\t ", "\r\n  "])
TEXTS = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=12) | st.text(max_size=6)


@st.composite
def produce_bodies(draw) -> bytes:
    def space() -> str:
        return draw(SPACE)

    def text(value: str) -> str:
        return space() + json.dumps(value, ensure_ascii=draw(st.booleans())) + space()

    messages = [space() + "{" + text("value") + ":" + text(draw(TEXTS)) + "}" + space()
                for _ in range(draw(st.integers(0, 5)))]
    members = {"messages": text("messages") + ":" + space() + "[" + ",".join(messages) + "]" + space()}
    for name in draw(st.lists(st.sampled_from(["producer", "topic", "key", "messages"]), max_size=3)):
        members.setdefault(name, text(name) + ":" + text(draw(TEXTS)))
    ordered = draw(st.permutations(sorted(members)))
    return (space() + "{" + ",".join(members[name] for name in ordered) + "}" + space()).encode()


def plain_body_as_json(plain) -> dict:
    named, values = plain
    return {**named, "messages": [{"value": value.decode()} for value in values]}


@settings(max_examples=60)
@given(produce_bodies())
def test_plain_batch_reads_the_common_body_as_json_reads_it(body):
    from fastmq.proxy._native.produce import plain_batch

    plain = plain_batch(body)
    parsed = orjson.loads(body)
    listed = parsed["messages"]
    common = (set(parsed) <= {"producer", "topic", "messages"} and listed and body.isascii()
              and b"\\" not in body and all(isinstance(parsed.get(name, ""), str) for name in ("producer", "topic"))
              and body.count(b'"messages"') == 1)
    if common:
        assert plain is not None
    if plain is not None:
        assert plain_body_as_json(plain) == parsed


@examples
@given(st.binary(max_size=200) | produce_bodies().flatmap(
    lambda body: st.tuples(st.integers(0, len(body)), st.binary(max_size=3)).map(
        lambda cut: body[:cut[0]] + cut[1] + body[cut[0] + len(cut[1]):])))
def test_plain_batch_takes_only_what_json_reads_the_same(body):
    from fastmq.proxy._native.produce import plain_batch

    plain = plain_batch(body)
    if plain is not None:
        assert plain_body_as_json(plain) == orjson.loads(body)


def test_produce_reads_the_common_body_and_any_other_alike():
    # the same messages as the common body, and with one member more that only the general parser reads
    common = json.dumps({"messages": [{"value": "a b"}, {"value": "c"}], "topic": "t"}).encode()
    other = json.dumps({"messages": [{"value": "a b"}, {"value": "c"}], "topic": "t", "producer": 7}).encode()
    parsed = parse_produce(request(common, "application/json", {"producer": "p"}), max_messages=2)
    assert (parsed.producer, parsed.topic, parsed.messages.values) == ("p", "t", [b"a b", b"c"])
    assert parsed.messages.keys is None and parsed.messages.headers is None and parsed.messages.tags is None
    with pytest.raises(HttpError) as refusal:
        parse_produce(request(other, "application/json", {"producer": "p"}), max_messages=2)
    assert refusal.value.status == 400
    with pytest.raises(HttpError) as too_many:
        parse_produce(request(common, "application/json", {"producer": "p"}), max_messages=1)
    assert too_many.value.status == 413


def test_config_file(tmp_path):
    path = tmp_path / "proxy.toml"
    path.write_text('namespace = "n"\n[producers.w]\ntopic = "t"\nrate = 5\n'
                    '[consumers.r]\ntopic = "t"\nmode = "broadcast"\nlease_ms = 100\n')
    config = ProxyConfig.load(path)
    assert config.namespace == "n" and config.producers["w"].rate == 5
    assert config.consumers["r"].mode == "broadcast" and config.consumers["r"].dead_letters == "r.dlq"


@pytest.mark.parametrize("text, complaint", [
    ("nonsense = 1\n", "unknown settings"),
    ("[consumers.r]\ntopic = 't'\nmode = 'fanout'\n", "mode must be"),
    ("[consumers.r]\ntopic = 't'\nlease_ms = -1\n", "lease_ms must be"),
    ("[consumers.r]\ntopic = 't'\nlease = 5\n", "unknown settings"),
    ("[producers.w]\ntopic = 'a:b'\n", "topic must be"),
    ("[producers.w]\ntopic = 't'\ntoken = 5\n", "token must be a string"),
    ("[producers\n", "cannot read"),
])
def test_bad_config_files_say_what_is_wrong(tmp_path, text, complaint):
    path = tmp_path / "proxy.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=complaint):
        ProxyConfig.load(path)
