"""fastmq/rocketmq/route.py: TopicRouteData as namesrvs write it (standard JSON, or bare integer keys)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import CorruptDataError
from fastmq.rocketmq.route import MessageQueue, parse_route

ROUTE = {"brokerDatas": [{"brokerAddrs": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}, "brokerName": "broker-b",
                          "cluster": "DefaultCluster"},
                         {"brokerAddrs": {"1": "127.0.0.1:10931"}, "brokerName": "broker-c", "cluster": "c"},
                         {"brokerAddrs": {"0": "127.0.0.1:10941"}, "brokerName": "broker-a", "cluster": "c"}],
         "filterServerTable": {},
         "queueDatas": [{"brokerName": "broker-b", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0,
                         "writeQueueNums": 3},
                        {"brokerName": "broker-c", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
                        {"brokerName": "broker-a", "perm": 4, "readQueueNums": 1, "writeQueueNums": 1}]}


def test_queues_come_from_brokers_with_a_master_and_the_right_permission():
    route = parse_route("t", json.dumps(ROUTE).encode())
    assert route.master("broker-b") == "127.0.0.1:10911" and route.master("broker-c") is None
    assert route.write_queues == [MessageQueue("t", "broker-b", i) for i in range(3)]
    assert route.read_queues == [MessageQueue("t", "broker-a", 0), MessageQueue("t", "broker-b", 0),
                                 MessageQueue("t", "broker-b", 1)]


def test_bare_integer_keys_of_older_namesrvs_are_read():
    text = json.dumps(ROUTE).replace('"0":', "0:").replace('"1": ', "1: ")
    with pytest.raises(ValueError):
        json.loads(text)
    assert parse_route("t", text.encode()) == parse_route("t", json.dumps(ROUTE).encode())


@pytest.mark.parametrize("body", [b"[]", b"{", b'{"brokerDatas": [{"brokerAddrs": {"x": "a"}}]}',
                                  b'{"queueDatas": [{"perm": 6}]}', b'{"brokerDatas": 5}'])
def test_malformed_routes_are_refused(body):
    with pytest.raises(CorruptDataError):
        parse_route("t", body)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                                max_size=4), max_leaves=12))
@settings(max_examples=100, deadline=None)
def test_arbitrary_json_parses_or_raises_corrupt_data(value):
    try:
        parse_route("t", json.dumps(value).encode())
    except CorruptDataError:
        pass


@given(st.binary(max_size=80))
@settings(max_examples=100, deadline=None)
def test_arbitrary_bytes_parse_or_raise_corrupt_data(data):
    try:
        parse_route("t", data)
    except CorruptDataError:
        pass
