"""fastmq/nsq/_native/codec.pyx: NSQ commands, frames and messages (vanilla and Youzan).

The expected bytes are built here with struct from the wire format in nsq.md (an oracle independent of the codec);
the server-side parser reads back what the client-side encoders write, and random bytes never crash either side.
"""
from __future__ import annotations

import gc
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import ProtocolError
from fastmq.nsq._native import codec
from fastmq.nsq.errors import NSQConfigurationError

NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=54).map(lambda s: s)
names_any = st.one_of(names, names.map(lambda s: s + "#ephemeral"))
bodies = st.binary(max_size=300)
ids = st.binary(min_size=16, max_size=16)
partitions = st.integers(0, 2**31 - 1)


def with_body(line: bytes, body: bytes) -> bytes:
    return line + struct.pack(">I", len(body)) + body


def test_golden_commands():
    assert codec.pub("t", b"hi") == b"PUB t\n\x00\x00\x00\x02hi"
    assert codec.pub("t", b"hi", 3) == b"PUB t 3\n\x00\x00\x00\x02hi"
    assert codec.dpub("t", 1500, b"x") == b"DPUB t 1500\n\x00\x00\x00\x01x"
    assert codec.mpub("t", [b"a", b"bc"]) == (b"MPUB t\n\x00\x00\x00\x0f\x00\x00\x00\x02"
                                              b"\x00\x00\x00\x01a\x00\x00\x00\x02bc")
    assert codec.sub("t", "c") == b"SUB t c\n"
    assert codec.sub("t", "c", 2) == b"SUB t c 2\n"
    assert codec.sub_ordered("t", "c", 0) == b"SUB_ORDERED t c 0\n"
    assert codec.sub_advanced("t", "c", 1, "timestamp:1700") == b"SUB_ADVANCED t c 1 timestamp:1700\n"
    assert codec.rdy(2500) == b"RDY 2500\n"
    assert codec.fin(b"0123456789abcdef") == b"FIN 0123456789abcdef\n"
    assert codec.req(b"0123456789abcdef", 0) == b"REQ 0123456789abcdef 0\n"
    assert codec.touch(b"0123456789abcdef") == b"TOUCH 0123456789abcdef\n"
    assert codec.auth("s3") == b"AUTH\n\x00\x00\x00\x02s3"
    assert codec.pub_trace("t", 0, 7, b"m") == with_body(b"PUB_TRACE t 0\n", struct.pack(">Q", 7) + b"m")
    assert codec.pub_ext("t", 1, {"k": "v"}, b"m") == with_body(b"PUB_EXT t 1\n", b"\x00\x09" + b'{"k":"v"}m')
    assert codec.mpub_trace("t", 0, [5], [b"ab"]) == with_body(
        b"MPUB_TRACE t 0\n", struct.pack(">II", 1, 10) + struct.pack(">Q", 5) + b"ab")
    identify = codec.identify({"feature_negotiation": True})
    assert identify.startswith(b"IDENTIFY\n")
    assert json.loads(identify[13:]) == {"feature_negotiation": True}


@pytest.mark.parametrize("bad", ["", "a" * 65, "a b", "t\n", "é", "#ephemeral", "a#other"])
def test_bad_names_are_refused(bad):
    assert not codec.is_valid_name(bad)
    with pytest.raises(NSQConfigurationError):
        codec.pub(bad, b"x")
    with pytest.raises(NSQConfigurationError):
        codec.sub("t", bad)


@pytest.mark.parametrize("call", [
    lambda: codec.rdy(-1), lambda: codec.rdy(True), lambda: codec.fin(b"short"), lambda: codec.req(b"x" * 16, -5),
    lambda: codec.dpub("t", -1, b"x"), lambda: codec.pub("t", "text"), lambda: codec.mpub("t", []),
    lambda: codec.sub_advanced("t", "c", 0, "bogus:1"), lambda: codec.sub_advanced("t", "c", 0, "msgcount:"),
    lambda: codec.mpub_trace("t", 0, [1, 2], [b"a"]), lambda: codec.pub_ext("t", 0, b"x" * 70000, b""),
])
def test_bad_arguments_are_refused(call):
    with pytest.raises(NSQConfigurationError):
        call()


@given(topic=names_any, body=bodies, partition=st.one_of(st.none(), partitions))
def test_pub_round_trip(topic, body, partition):
    wire = codec.pub(topic, body, partition)
    expected_params = [topic.encode()] + ([] if partition is None else [str(partition).encode()])
    assert codec.parse_command(wire) == (b"PUB", expected_params, body, len(wire))
    expected = with_body(b" ".join([b"PUB", *expected_params]) + b"\n", body)
    assert wire == expected
    # Short of its last byte it is not a whole command yet.
    assert codec.parse_command(wire[:-1]) is None


@given(topic=names, messages=st.lists(bodies, min_size=1, max_size=20), partition=st.one_of(st.none(), partitions))
def test_mpub_round_trip(topic, messages, partition):
    wire = codec.mpub(topic, messages, partition)
    name, params, body, used = codec.parse_command(wire)
    assert (name, used) == (b"MPUB", len(wire))
    expected = struct.pack(">I", len(messages)) + b"".join(struct.pack(">I", len(m)) + m for m in messages)
    assert body == expected
    assert codec.split_multi(body) == messages


@given(topic=names, pairs=st.lists(st.tuples(st.integers(0, 2**64 - 1), bodies), min_size=1, max_size=10),
       partition=partitions)
def test_mpub_trace_round_trip(topic, pairs, partition):
    wire = codec.mpub_trace(topic, partition, [t for t, _ in pairs], [b for _, b in pairs])
    _, params, body, _ = codec.parse_command(wire)
    assert params == [topic.encode(), str(partition).encode()]
    assert codec.split_multi(body, traced=True) == pairs


@given(message_id=ids, delay=st.integers(0, 2**31 - 1), tail=st.binary(max_size=20))
def test_fin_req_touch_take_binary_ids_by_position(message_id, delay, tail):
    # Youzan's ids are raw bytes and may contain \n or spaces: the parser must not split on them.
    for wire, name, params in ((codec.fin(message_id), b"FIN", [message_id]),
                               (codec.req(message_id, delay), b"REQ", [message_id, str(delay).encode()]),
                               (codec.touch(message_id), b"TOUCH", [message_id])):
        assert codec.parse_command(wire + tail) == (name, params, None, len(wire))


@given(topic=names, channel=names_any, partition=partitions,
       offset=st.one_of(st.none(), st.builds(lambda k, v: f"{k}:{v}",
                                             st.sampled_from(["timestamp", "virtual_queue", "special", "msgcount"]),
                                             st.integers(0, 2**62))))
def test_sub_commands_round_trip(topic, channel, partition, offset):
    wire = codec.sub_advanced(topic, channel, partition, offset)
    params = [topic.encode(), channel.encode(), str(partition).encode()] + ([] if offset is None else [offset.encode()])
    assert codec.parse_command(wire) == (b"SUB_ADVANCED", params, None, len(wire))
    assert codec.parse_command(codec.sub_ordered(topic, channel, partition))[:2] == (b"SUB_ORDERED", params[:3])


def test_line_commands_and_limits():
    assert codec.parse_command(b"NOP\nRDY 1\n") == (b"NOP", [], None, 4)
    assert codec.parse_command(b"CLS\r\n") == (b"CLS", [], None, 5)
    assert codec.parse_command(b"RDY 10") is None
    with pytest.raises(ProtocolError, match="no end"):
        codec.parse_command(b"X" * 2000)
    with pytest.raises(ProtocolError, match="exceeds"):
        codec.parse_command(b"PUB t\n" + struct.pack(">I", 5000), max_body_size=4096)
    with pytest.raises(ProtocolError):
        codec.split_multi(struct.pack(">I", 1000) + b"\x00" * 12)
    with pytest.raises(ProtocolError):
        codec.split_multi(struct.pack(">II", 1, 1) + b"ab")


@given(timestamp=st.integers(-2**63, 2**63 - 1), attempts=st.integers(0, 65535), message_id=ids, body=bodies,
       ext_version=st.sampled_from([0, 2, 4]), ext=st.binary(max_size=100),
       offset=st.integers(0, 2**63 - 1), raw_size=st.integers(0, 2**32 - 1), flags=st.sampled_from([0, 1, 2, 3]))
def test_message_round_trip(timestamp, attempts, message_id, body, ext_version, ext, offset, raw_size, flags):
    frame = codec.encode_message(timestamp, attempts, message_id, body, flags, ext_version, ext, offset, raw_size)
    # The oracle: the layout of nsq.md, built with struct.
    data = struct.pack(">qH", timestamp, attempts) + message_id
    if flags & codec.WITH_EXT:
        data += bytes([ext_version]) + (struct.pack(">H", len(ext)) + ext if ext_version else b"")
    if flags & codec.WITH_OFFSET:
        data += struct.pack(">qI", offset, raw_size)
    data += body
    assert frame == struct.pack(">II", len(data) + 4, codec.FRAME_MESSAGE) + data
    message = codec.decode_message(data, flags)
    assert (message.timestamp, message.attempts, message.id, message.body) == (timestamp, attempts, message_id, body)
    if flags & codec.WITH_EXT:
        assert message.ext_version == ext_version
        assert message.ext == (ext if ext_version else b"")
    if flags & codec.WITH_OFFSET:
        assert (message.queue_offset, message.raw_size) == (offset, raw_size)
    else:
        assert (message.queue_offset, message.raw_size) == (-1, -1)


def test_message_ids_vanilla_and_youzan():
    vanilla = codec.decode_message(struct.pack(">qH", 1, 1) + b"0a1b2c3d4e5f6789" + b"x")
    assert (vanilla.trace_id, vanilla.internal_id) == (0, 0x0a1b2c3d4e5f6789)
    youzan = codec.decode_message(struct.pack(">qHQQ", 1, 1, 42, 99) + b"x")
    assert (youzan.internal_id, youzan.trace_id) == (42, 99)
    ext = codec.decode_message(struct.pack(">qH", 1, 1) + b"0" * 16 + b"\x04\x00\x07{\"a\":1}body", codec.WITH_EXT)
    assert (ext.headers, ext.body) == ({"a": 1}, b"body")


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1))
def test_trace_reply_round_trip(message_id, trace_id, disk_offset, raw_size):
    reply = codec.encode_trace_reply(message_id, trace_id, disk_offset, raw_size)
    assert reply == b"OK" + struct.pack(">QQQI", message_id, trace_id, disk_offset, raw_size)
    assert codec.decode_trace_reply(reply) == (message_id, trace_id, disk_offset, raw_size)


def test_bad_trace_reply():
    with pytest.raises(ProtocolError):
        codec.decode_trace_reply(b"OK")


class Responder:
    def __init__(self):
        self.calls = []

    def finish(self, message):
        self.calls.append(("fin", message.id))

    def requeue(self, message, delay, backoff):
        self.calls.append(("req", delay, backoff))

    def touch(self, message):
        self.calls.append(("touch",))


def test_message_is_answered_once_through_its_responder():
    responder = Responder()
    message = codec.decode_message(struct.pack(">qH", 1, 1) + b"0" * 16, 0, responder)
    message.touch()
    message.finish()
    with pytest.raises(RuntimeError, match="already answered"):
        message.requeue()
    assert responder.calls == [("touch",), ("fin", b"0" * 16)]
    assert message.has_responded()
    # Messages stay out of the cycle collector (its collections cost a consumer more than decoding did)
    assert not gc.is_tracked(message)


@settings(max_examples=150)
@given(data=st.binary(max_size=120), flags=st.sampled_from([0, 1, 2, 3]))
def test_random_message_bytes_decode_or_raise_protocol_error(data, flags):
    try:
        message = codec.decode_message(data, flags)
    except ProtocolError:
        return
    assert len(message.body) <= len(data)


@settings(max_examples=200)
@given(data=st.one_of(st.binary(max_size=200),
                      st.builds(lambda name, rest: name + rest,
                                st.sampled_from([b"PUB ", b"MPUB ", b"FIN ", b"REQ ", b"TOUCH ", b"IDENTIFY\n",
                                                 b"SUB ", b"RDY "]), st.binary(max_size=60))))
def test_random_command_bytes_parse_or_raise_protocol_error(data):
    try:
        parsed = codec.parse_command(data, max_body_size=4096)
    except ProtocolError:
        return
    if parsed is not None:
        name, params, body, used = parsed
        assert 0 < used <= len(data)
        if body is not None:
            assert len(body) <= 4096


@settings(max_examples=150)
@given(data=st.binary(max_size=100), traced=st.booleans())
def test_random_multi_bodies_split_or_raise_protocol_error(data, traced):
    try:
        messages = codec.split_multi(data, traced)
    except ProtocolError:
        return
    assert messages


@settings(max_examples=100)
@given(frames=st.lists(st.tuples(st.sampled_from([codec.FRAME_RESPONSE, codec.FRAME_ERROR, codec.FRAME_MESSAGE]),
                                 st.binary(max_size=60)), max_size=30),
       cuts=st.lists(st.integers(1, 80), max_size=40))
def test_message_runs_keep_the_stream_order_of_frames(frames, cuts):
    # Whatever pieces the stream arrives in, the run splitter yields the frames in order, consecutive messages
    # joined into runs (never across another frame).
    stream = b"".join(struct.pack(">II", len(data) + 4, kind) + data for kind, data in frames)
    splitter = codec.MessageRunSplitter()
    got = []
    position = 0
    for size in cuts + [len(stream)]:
        splitter.feed(stream[position:position + size])
        position += size
        while (frame := splitter.next_frame()) is not None:
            got.append(frame)
    assert [frame for kind, run in got for frame in ([(codec.FRAME_MESSAGE, d) for d in run]
                                                     if kind == codec.FRAME_MESSAGES else [(kind, run)])] == frames
    assert all(run for kind, run in got if kind == codec.FRAME_MESSAGES)
    if not cuts:        # all bytes at once: every run is as long as it can be
        assert not any(a[0] == b[0] == codec.FRAME_MESSAGES for a, b in zip(got, got[1:]))

def test_answers_are_written_as_one_buffer():
    message_id = b"0123456789abcdef"
    assert codec.encode_answers([message_id, codec.touch(message_id), b"\n" * 16]) == (
        b"FIN " + message_id + b"\n" + b"TOUCH " + message_id + b"\n" + b"FIN " + b"\n" * 16 + b"\n")
    assert codec.encode_answers([]) == b""
    with pytest.raises(TypeError):
        codec.encode_answers(["FIN x"])


@given(messages=st.lists(st.binary(max_size=50), max_size=20))
def test_bodies_size_counts_bytes_or_flags_an_empty_body(messages):
    expected = -1 if not all(messages) else sum(map(len, messages))
    assert codec.bodies_size(messages) == expected
    assert codec.bodies_size([bytearray(m) for m in messages]) == expected
