"""The embedded nsqd's HTTP API refuses what its TCP protocol refuses (a partition the topic lacks, no partition
for an ordered topic, a defer beyond nsqd's hour), a request whose body has no readable length is answered and its
connection closed, and random requests are all answered, with no handler failing."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker import EmbeddedBroker
from fastmq.broker.config import ListenerConfig

WAIT = 10.0


@pytest.fixture(scope="module")
def broker():
    listeners = [ListenerConfig(protocol="nsq"), ListenerConfig(protocol="nsq-http")]
    with EmbeddedBroker(listeners=listeners, num_partitions=2) as started:
        yield started


def http(broker, path: str, body: bytes = b"") -> tuple[int, bytes]:
    host, port = broker.addresses[1]
    request = urllib.request.Request(f"http://{host}:{port}{path}", data=body, method="POST",
                                     headers={"Accept": "application/vnd.nsq; version=1.0"})
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def queue_depths(broker, topic: str) -> list[int]:
    store = broker.broker.store
    return [store.get_max_offset(topic, partition) for partition in range(2)]


@pytest.mark.parametrize(("path", "said"), [
    ("/pub?topic=h1&partition=2", "topic h1 has no partition 2"),
    ("/pub?topic=h1&partition=-1", "topic h1 has no partition -1"),
    ("/mpub?topic=h1&partition=7", "topic h1 has no partition 7"),
    ("/pub?topic=h1&defer=3600001", "INVALID_DEFER 3600001 out of range 0-3600000"),
    ("/pub?topic=h1&defer=-5", "INVALID_DEFER -5 out of range 0-3600000"),
])
def test_publishes_the_tcp_protocol_refuses_are_refused(broker, path, said):
    assert http(broker, "/topic/create?topic=h1")[0] == 200
    before = queue_depths(broker, "h1")
    status, body = http(broker, path, b"m")
    assert (status, json.loads(body)["message"]) == (400, said)
    assert queue_depths(broker, "h1") == before
    assert http(broker, "/pub?topic=h1&partition=1&defer=3600000", b"m") == (200, b"OK")
    assert queue_depths(broker, "h1") == [before[0], before[1] + 1]


def test_an_ordered_topic_takes_http_publishes_only_with_a_partition(broker):
    assert http(broker, "/topic/create?topic=h2&partition_num=2&orderedmulti=true")[0] == 200
    status, body = http(broker, "/pub?topic=h2", b"m")
    assert (status, json.loads(body)["message"]) == (400, "topic h2 is ordered: publish to a partition")
    assert http(broker, "/pub?topic=h2&partition=1", b"m") == (200, b"OK")


@pytest.mark.parametrize("length", [b"-1", b"12abc", b"+3", b"\xd9\xa3"])
def test_a_body_without_a_readable_length_is_refused_and_the_connection_closed(broker, length):
    with socket.create_connection(broker.addresses[1], timeout=WAIT) as sock:
        sock.sendall(b"POST /pub?topic=h3 HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\nabc")
        received = b""
        for _ in range(100):                     # until the server closes: a bound on the reads
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    assert received.startswith(b"HTTP/1.1 400 ") and b"INVALID_CONTENT_LENGTH" in received


PATHS = st.sampled_from(["/pub", "/mpub", "/topic/create", "/topic/delete", "/channel/create", "/channel/delete",
                         "/stats", "/info", "/ping", "/nothing"])
QUERY_NAMES = st.sampled_from(["topic", "channel", "partition", "defer", "binary", "partition_num", "orderedmulti",
                               "extend", "format"])
QUERY_VALUES = st.one_of(st.sampled_from(["hf", "c", "0", "1", "-1", "2", "true", "x" * 70, "", "9" * 30]),
                         st.text(alphabet=st.characters(codec="utf-8"), max_size=8))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PATHS, st.dictionaries(QUERY_NAMES, QUERY_VALUES, max_size=4), st.binary(max_size=64))
def test_random_requests_are_all_answered(broker, no_handler_failures, path, query, body):
    status, _ = http(broker, path + "?" + urllib.parse.urlencode(query), body)
    assert status in (200, 400, 404, 405, 413)
