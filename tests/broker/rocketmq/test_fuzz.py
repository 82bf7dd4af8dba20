"""Bad input against the RocketMQ endpoint and the namesrv: garbage, truncated and oversized frames, headers of
the wrong types, and well-formed commands with random fields and bodies. What is not a command closes that one
connection; a command with bad fields gets an error answer and the connection stays; no handler ever fails (that
would be logged, and fail these tests); the broker keeps serving everyone else."""
from __future__ import annotations

import json
import socket
import struct

import pytest
from fastmq.rocketmq._native.remoting import encode_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.broker.rocketmq.handlers import handler_table
from fastmq.broker.rocketmq.namesrv import NamesrvFrontEnd

from .conftest import Remoting, broker_address, namesrv_address

pytestmark = pytest.mark.usefixtures("no_handler_failures")
FUZZ = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FIELDS_FUZZ = settings(FUZZ, max_examples=40)       # well-formed commands: the handlers' own checks
INVALID_PARAMETER = 29


def raw_exchange(address: tuple[str, int], data: bytes, read_timeout: float = 0.1) -> tuple[bytes, bool]:
    """Send bytes on a new connection: (what came back, whether the broker closed the connection), reading until
    one whole answer came, the connection closed or read_timeout passed without a byte."""
    sock = socket.create_connection(address, timeout=5)
    received, closed = b"", False
    try:
        sock.sendall(data)
        sock.settimeout(read_timeout)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            received += chunk
            if len(received) >= 4 and len(received) >= 4 + struct.unpack(">i", received[:4])[0]:
                break
    except socket.timeout:
        pass
    except ConnectionError:
        closed = True
    finally:
        sock.close()
    return received, closed


def assert_still_serving(rmq) -> None:
    for address in (broker_address(rmq), namesrv_address(rmq)):
        client = Remoting(address)
        try:
            # (random commands may have deleted any topic, the template included: ask what always works)
            assert client.call(106 if address == namesrv_address(rmq) else 30, {"topic": "t", "queueId": 0}
                               ).code == 0
        finally:
            client.close()


@FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_garbage_frames(rmq, garbage, to_namesrv):
    address = namesrv_address(rmq) if to_namesrv else broker_address(rmq)
    raw_exchange(address, struct.pack(">i", len(garbage)) + garbage)
    assert_still_serving(rmq)


@FUZZ
@given(st.integers(-2 ** 31, 2 ** 31 - 1), st.binary(max_size=20))
def test_forged_lengths(rmq, length, tail):
    # beyond 16 MiB or negative: closed before anything is allocated; shorter: the frame waits for its bytes
    raw_exchange(broker_address(rmq), struct.pack(">i", length) + tail, read_timeout=0.05)
    assert_still_serving(rmq)


def test_truncated_oversized_and_mistyped_headers_close_the_connection(rmq):
    def frame(header: bytes, header_length: int | None = None) -> bytes:
        length = len(header) if header_length is None else header_length
        return struct.pack(">ii", 4 + len(header), length) + header

    cases = [
        frame(b"{}\0\0", header_length=1000),                  # header longer than the frame
        struct.pack(">i", 64 << 20) + b"\0" * 16,              # 64 MiB: refused by the splitter
        frame(b'{"code":"x"}'),                                # code of the wrong type
        frame(b'{"code":30,"extFields":[1]}'),                 # extFields not an object
        frame(b'{"code":30'),                                  # JSON cut short
        frame(struct.pack(">hbhii", 30, 0, 1, 1, 0), header_length=(1 << 24) | 13),  # binary header cut short
    ]
    for data in cases:
        answer, closed = raw_exchange(broker_address(rmq), data, read_timeout=2)
        assert closed and answer == b"", data[:40]
    assert_still_serving(rmq)


def test_bad_fields_are_answered_and_the_connection_stays(rmq):
    client = Remoting(broker_address(rmq))
    try:
        answer = client.call(11, {"consumerGroup": "g", "topic": "TBW102", "queueId": "zero", "queueOffset": 0,
                                  "maxMsgNums": 1, "sysFlag": 0})
        assert answer.code == INVALID_PARAMETER and "queueId" in answer.remark
        assert client.call(11, {"topic": "TBW102"}).code == INVALID_PARAMETER           # consumerGroup missing
        assert client.call(34, body=b"{not json").code == 1
        assert "HeartbeatData" in client.call(34, body=json.dumps({"clientID": 5}).encode()).remark
        assert client.call(34, body=json.dumps({"clientID": "c", "consumerDataSet": [
            {"groupName": "g", "messageModel": "SIDEWAYS"}]}).encode()).code == 1
        assert client.call(41, body=b'{"mqSet": "all"}').code == 1
        assert client.call(9999).code == 3                                                # not supported
        assert client.call(30, {"topic": "TBW102", "queueId": 0}).code == 0               # still open
    finally:
        client.close()


def _codes(rmq) -> tuple[list[int], list[int]]:
    broker_codes = sorted(handler_table(rmq.broker.front_end("rocketmq")))
    namesrv_codes = sorted(NamesrvFrontEnd.handler_table(rmq.broker.front_end("namesrv")))
    return broker_codes, namesrv_codes


FIELD_NAMES = ["topic", "queueId", "queueOffset", "consumerGroup", "group", "offset", "maxMsgNums", "sysFlag",
               "commitOffset", "suspendTimeoutMillis", "a", "b", "c", "d", "e", "f", "i", "namespace", "key", "value",
               "brokerName", "brokerAddr", "clusterName", "brokerId", "delayLevel", "readQueueNums", "perm"]
VALUES = st.one_of(st.integers(-2 ** 63, 2 ** 63).map(str), st.sampled_from(["", "TBW102", "%RETRY%x", "-1", "ten"]),
                   st.text(max_size=12))


@FIELDS_FUZZ
@given(st.data(), st.dictionaries(st.sampled_from(FIELD_NAMES), VALUES, max_size=8),
       st.one_of(st.none(), st.binary(max_size=64), st.sampled_from([b"{}", b"[]", b'{"mqSet":[{}]}', b"null"])),
       st.booleans())
def test_commands_with_random_fields(rmq, data, fields, body, to_namesrv):
    broker_codes, namesrv_codes = _codes(rmq)
    code = data.draw(st.sampled_from(namesrv_codes if to_namesrv else broker_codes))
    fields = dict(fields, suspendTimeoutMillis="0")      # a held pull would only wait
    address = namesrv_address(rmq) if to_namesrv else broker_address(rmq)
    answer, closed = raw_exchange(address, encode_frame(code, 77, fields, body), read_timeout=5.0)
    assert answer or closed, f"request {code} {fields} went unanswered"
    assert_still_serving(rmq)
