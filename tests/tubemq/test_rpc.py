"""fastmq.tubemq.rpc, the envelope codec: every golden frame decodes and re-encodes byte for byte through it (and
its inner message through the generated classes); the C++ client's zero padding is tolerated; exception responses
raise, a standby's as StandbyError; hypothesis feeds the decoders arbitrary bytes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq._native.frames import TubeMQFrameSplitter
from fastmq.errors import ProtocolError
from fastmq.tubemq import rpc
from fastmq.tubemq._proto import broker_pb2, master_pb2
from fastmq.tubemq.errors import RemoteException, StandbyError


def vectors(golden_dir: Path) -> list[dict]:
    return json.loads((golden_dir / "tubemq" / "vectors.json").read_text())["vectors"]


def split(frame: bytes) -> tuple[int, bytes]:
    splitter = TubeMQFrameSplitter()
    splitter.feed(frame)
    return splitter.next_frame()


def message_class(name: str):
    return getattr(master_pb2, name, None) or getattr(broker_pb2, name)


def test_every_golden_frame_decodes_and_reencodes_byte_for_byte(golden_dir):
    for vector in vectors(golden_dir):
        frame = bytes.fromhex(vector["frame_hex"])
        serial_no, payload = split(frame)
        inner_class = message_class(vector["inner_message_type"])
        if vector["name"].endswith("_req"):
            request = rpc.decode_request(serial_no, payload)
            inner = request.body
            again = rpc.encode_request(serial_no, request.method, inner, timeout_ms=request.timeout_ms,
                                       service_type=request.service_type, protocol_version=request.protocol_version)
        else:
            response = rpc.decode_response(serial_no, payload)
            inner = response.data
            again = rpc.encode_response(serial_no, response.method, inner)
        assert inner.hex() == vector["inner_hex"], vector["name"]
        assert inner_class.FromString(inner).SerializeToString() == inner, vector["name"]
        assert again == frame, vector["name"]


def test_golden_fields_read_back(golden_dir):
    by_name = {vector["name"]: vector for vector in vectors(golden_dir)}
    vector = by_name["m2p_register_rsp"]
    serial_no, payload = split(bytes.fromhex(vector["frame_hex"]))
    response = master_pb2.RegisterResponseM2P.FromString(rpc.decode_response(serial_no, payload).data)
    assert list(response.brokerInfos) == vector["fields"]["brokerInfos"]
    assert response.authorizedInfo.visitAuthorizedToken == vector["fields"]["authorizedInfo.visitAuthorizedToken"]


def test_trailing_zero_padding_is_ignored_and_other_trailing_bytes_are_not():
    frame = rpc.encode_request(7, rpc.GET_MESSAGE, b"\x0a\x01x")
    serial_no, payload = split(frame)
    assert rpc.decode_request(serial_no, payload + b"\x00\x00\x00").body == b"\x0a\x01x"
    with pytest.raises(ProtocolError, match="not zero padding"):
        rpc.decode_request(serial_no, payload + b"\x00\x01")


def test_exception_responses_raise_and_a_standby_is_recognised():
    serial_no, payload = split(rpc.encode_exception(3, rpc.STANDBY_EXCEPTION, "master is standby\n at x"))
    with pytest.raises(StandbyError) as caught:
        rpc.decode_response(serial_no, payload)
    assert "master is standby" in str(caught.value)
    serial_no, payload = split(rpc.encode_exception(4, "java.lang.IllegalStateException"))
    with pytest.raises(RemoteException) as caught:
        rpc.decode_response(serial_no, payload)
    assert not isinstance(caught.value, StandbyError)


def test_a_request_is_not_a_response():
    serial_no, payload = split(rpc.encode_request(1, rpc.PRODUCER_REGISTER, b""))
    with pytest.raises(ProtocolError, match="flag"):
        rpc.decode_response(serial_no, payload)


def test_large_bodies_span_blocks():
    body = bytes(range(256)) * 80
    frame = rpc.encode_request(9, rpc.SEND_MESSAGE, body)
    assert int.from_bytes(frame[8:12], "big") == 3
    serial_no, payload = split(frame)
    assert rpc.decode_request(serial_no, payload).body == body


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_decoders_reject_garbage_cleanly(data):
    for decode in (rpc.decode_request, rpc.decode_response):
        try:
            decode(1, data)
        except (ProtocolError, RemoteException):
            pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(sorted(rpc.SERVICE_OF_METHOD)), st.binary(max_size=17000),
       st.one_of(st.none(), st.integers(0, 2**40)))
def test_requests_round_trip(serial_no, method, body, timeout_ms):
    frame = rpc.encode_request(serial_no, method, body, timeout_ms=timeout_ms)
    request = rpc.decode_request(*split(frame))
    assert request == rpc.Request(serial_no, method, rpc.SERVICE_OF_METHOD[method], rpc.PROTOCOL_VERSION,
                                  timeout_ms, body)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 4))
def test_inner_message_decoders_reject_garbage_cleanly(data, which):
    classes = [master_pb2.HeartResponseM2C, master_pb2.RegisterResponseM2P, broker_pb2.GetMessageResponseB2C,
               broker_pb2.SendMessageRequestP2B, master_pb2.HeartRequestC2M]
    try:
        rpc.decode_message(classes[which], data)
    except ProtocolError:
        pass
