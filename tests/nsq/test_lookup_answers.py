"""parse_lookup (fastmq.nsq.lookup): nsqlookupd's /lookup answers, bare (nsqd v1.3.0) or wrapped with partitions
(Youzan), and anything else a server might send, which raises ProtocolError and nothing else."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import ProtocolError
from fastmq.nsq.lookup import NO_PARTITION, NSQDAddress, TopicLookup, parse_lookup

PEER = {"remote_address": "127.0.0.1:50412", "hostname": "box", "broadcast_address": "10.0.0.7",
        "tcp_port": 4150, "http_port": 4151, "version": "1.3.0"}


def test_a_bare_answer_lists_the_producers_and_channels() -> None:
    answer = parse_lookup(json.dumps({"channels": ["ch"], "producers": [PEER]}).encode())
    assert answer == TopicLookup([NSQDAddress("10.0.0.7", 4150, NO_PARTITION, 4151)], ["ch"], {})
    assert not answer.partitioned


def test_a_wrapped_answer_gives_one_address_a_partition() -> None:
    data = {"partitions": {"1": {**PEER, "tcp_port": 4250}, "0": PEER}, "producers": [PEER],
            "meta": {"partition_num": 2, "ordered": True}}
    answer = parse_lookup(json.dumps({"status_code": 200, "status_txt": "OK", "data": data}).encode())
    assert answer.addresses == [NSQDAddress("10.0.0.7", 4150, 0, 4151), NSQDAddress("10.0.0.7", 4250, 1, 4151)]
    assert answer.partitioned and answer.ordered


@pytest.mark.parametrize("body", [
    b"", b"{", b"[]", b"null", b'{"producers": {"a": 1}}', b'{"producers": [1]}', b'{"producers": [{}]}',
    b'{"producers": [{"tcp_port": "x"}]}', b'{"partitions": [1, 2]}', b'{"partitions": {"p": {"tcp_port": 1}}}',
    b'{"status_code": 200, "data": [1]}', b'{"producers": [], "meta": [1, 2]}',
])
def test_answers_of_another_shape_raise_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="nsqlookupd's lookup answer"):
        parse_lookup(body)


NAMES = st.sampled_from(["status_code", "data", "partitions", "producers", "channels", "meta", "tcp_port",
                         "http_port", "hostname", "broadcast_address", "remote_address", "0", "1", "x"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=6) | NAMES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=5),
    max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=40), JSON_VALUES.map(lambda value: json.dumps(value).encode())))
def test_any_answer_parses_or_raises_protocol_error(body: bytes) -> None:
    try:
        answer = parse_lookup(body)
    except ProtocolError:
        return
    assert isinstance(answer, TopicLookup)
    assert all(isinstance(address, NSQDAddress) for address in answer.addresses)
