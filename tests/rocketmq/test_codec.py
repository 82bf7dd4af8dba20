"""fastmq/rocketmq/_native (remoting.pyx, messages.pyx): remoting commands and messages.

The oracles are independent: frames built here with struct and json as RocketMQ's RemotingCommand and
RocketMQSerializable lay them out, records laid out by hand as MessageDecoder does, and the records a real broker
returned to ali-ons (golden files).
"""
from __future__ import annotations

import json
import struct
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq._native.frames import RocketMQFrameSplitter
from fastmq.errors import CompressionError, CorruptDataError, ProtocolError, TruncatedError
from fastmq.rocketmq._native.messages import (
    SYSFLAG_COMPRESSED_ZLIB,
    SendEncoder,
    UniqueIdGenerator,
    compress_body,
    decode_batch_body,
    decode_send_result,
    decode_messages,
    message_properties,
)
from fastmq.rocketmq._native.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    decode_command,
    encode_frame,
    response_opaque,
)
from fastmq.rocketmq.message import Message, SendResult, SendStatus
from fastmq.rocketmq.route import MessageQueue
from tests.support.shared import golden_path

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477

texts = st.text(max_size=20)
ext_fields = st.dictionaries(st.text(min_size=1, max_size=10), texts, max_size=6)
i32 = st.integers(-2**31, 2**31 - 1)


# --- independent encoders ------------------------------------------------------------------------------------

def frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """The bytes after `total`, as the splitter returns them."""
    return struct.pack(">I", (serialize_type << 24) | len(header)) + header + body


def binary_header(code: int, language: int, version: int, opaque: int, flag: int, remark: str | None,
                  fields: dict[str, str]) -> bytes:
    ext = b"".join(struct.pack(">h", len(k.encode())) + k.encode() + struct.pack(">i", len(v.encode())) + v.encode()
                   for k, v in fields.items())
    remark_bytes = b"" if remark is None else remark.encode()
    return (struct.pack(">hBhii", code, language, version, opaque, flag) + struct.pack(">i", len(remark_bytes))
            + remark_bytes + struct.pack(">i", len(ext)) + ext)


def record(topic: str, body: bytes, properties: bytes, *, queue_id: int = 1, queue_offset: int = 5,
           physical_offset: int = 1000, sys_flag: int = 0, crc: int | None = None, v6: bool = False) -> bytes:
    host = (b"\x7f\x00\x00\x01" if not v6 else b"\x00" * 15 + b"\x01") + struct.pack(">i", 10911)
    if v6:
        sys_flag |= 0x30
    topic_bytes = topic.encode()
    long_topic = len(topic_bytes) > 127
    rest = (struct.pack(">iiqqiq", queue_id, 7, queue_offset, physical_offset, sys_flag, 1700000000000) + host
            + struct.pack(">q", 1700000000001) + host + struct.pack(">iq", 2, 0) + struct.pack(">i", len(body)) + body
            + (struct.pack(">h", len(topic_bytes)) if long_topic else bytes([len(topic_bytes)])) + topic_bytes
            + struct.pack(">h", len(properties)) + properties)
    crc = zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc
    head = struct.pack(">ii", MAGIC_V2 if long_topic else MAGIC_V1, crc)
    return struct.pack(">i", 4 + len(head) + len(rest)) + head + rest


# --- remoting commands ---------------------------------------------------------------------------------------

@given(code=st.integers(-2**15, 2**15 - 1), opaque=i32, flag=st.integers(0, 3), remark=st.none() | texts,
       fields=ext_fields, body=st.none() | st.binary(min_size=1, max_size=50), language=st.integers(0, 13))
@settings(max_examples=60, deadline=None)
def test_binary_header_matches_rocketmq_serializable(code, opaque, flag, remark, fields, body, language):
    wire = encode_frame(code, opaque, fields, body, flag, SERIALIZE_ROCKETMQ, language, 453, remark)
    expected = frame(SERIALIZE_ROCKETMQ, binary_header(code, language, 453, opaque, flag, remark or None, fields),
                     body or b"")
    assert wire == struct.pack(">i", len(expected)) + expected
    cmd = decode_command(expected)
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version) == (code, opaque, flag, language, 453)
    assert cmd.remark == (remark or None) and cmd.ext_fields == fields and cmd.body == body
    assert cmd.serialize_type == SERIALIZE_ROCKETMQ
    assert response_opaque(expected) == (opaque if flag & FLAG_RESPONSE else None)


@given(code=st.integers(0, 400), opaque=st.integers(0, 2**31 - 1), flag=st.integers(0, 3), remark=st.none() | texts,
       fields=ext_fields, body=st.none() | st.binary(min_size=1, max_size=50))
@settings(max_examples=60, deadline=None)
def test_json_header_round_trips_through_json(code, opaque, flag, remark, fields, body):
    wire = encode_frame(code, opaque, fields, body, flag, SERIALIZE_JSON, remark=remark)
    total, word = struct.unpack_from(">iI", wire)
    assert total == len(wire) - 4 and word >> 24 == SERIALIZE_JSON
    header = json.loads(wire[8:8 + (word & 0xFFFFFF)])
    assert header["code"] == code and header["opaque"] == opaque and header["flag"] == flag
    assert header["language"] == "PYTHON" and header.get("extFields", {}) == fields and header.get("remark") == remark
    assert wire[8 + (word & 0xFFFFFF):] == (body or b"")
    cmd = decode_command(wire, with_total=True)
    assert cmd == RemotingCommand(code, opaque, flag=flag, ext_fields=fields, body=body, remark=remark)
    assert response_opaque(wire[4:]) == (opaque if flag & FLAG_RESPONSE else None)


LANGUAGE_NUMBERS = {"JAVA": 0, "CPP": 1, "PYTHON": 3, "GO": 9, "NODE_JS": 13}
# extFields values as real peers write them: plain strings (Java), strings with escapes or any character, numbers and
# booleans (the C++ client, ali-ons), nulls (dropped)
ext_values = texts | st.sampled_from(["7F000001", "DefaultRegion", "caf\u00e9", 'a"b\\c', "\x01\x02"]) \
    | st.integers(-2**40, 2**40) | st.booleans() | st.none()


def java_text(value):
    """An extFields value as the decoder keeps it: what Java's String.valueOf prints."""
    return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


@given(code=st.integers(-2**31, 2**31 - 1), opaque=i32, flag=st.integers(0, 3), version=st.integers(0, 600),
       language=st.sampled_from(list(LANGUAGE_NUMBERS)) | st.integers(0, 255) | st.just("COBOL"),
       remark=st.none() | texts, fields=st.none() | st.dictionaries(st.text(max_size=8), ext_values, max_size=6),
       order=st.randoms(use_true_random=False), spaced=st.booleans(), ascii_only=st.booleans())
@settings(max_examples=300, deadline=None)
def test_json_headers_as_peers_write_them_decode_to_their_fields(code, opaque, flag, version, language, remark,
                                                                 fields, order, spaced, ascii_only):
    # Java brokers write fastjson's order without spaces; other peers their own order, spaces, escapes: whatever the
    # shape (read in one pass, or by the json module), the fields are the ones written.
    header = {"code": code, "flag": flag, "language": language, "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
              "version": version, "remark": remark}
    if fields is not None:
        header["extFields"] = fields
    items = list(header.items())
    order.shuffle(items)
    text = json.dumps(dict(items), ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"))
    cmd = decode_command(frame(SERIALIZE_JSON, text.encode(), b"body"))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.remark) == (code, opaque, flag, version, remark)
    assert cmd.language == (language if isinstance(language, int) else LANGUAGE_NUMBERS.get(language, 7))
    assert cmd.ext_fields == {k: java_text(v) for k, v in (fields or {}).items() if v is not None}
    assert cmd.body == b"body" and cmd.serialize_type == SERIALIZE_JSON


@pytest.mark.parametrize("header, expected", [
    (b"{}", (0, 0, 0, 7, None, {})),
    (b' { "code" : -2147483648 , "extFields" : { } } ', (-2147483648, 0, 0, 7, None, {})),
    (b'{"code":1,"extFields":{"a":"1","a":null}}', (1, 0, 0, 7, None, {})),
    (b'{"code":1,"extFields":{"a":null,"a":"2"},"remark":"r","remark":null}', (1, 0, 0, 7, None, {"a": "2"})),
    (b'{"code":1,"opaque":2,"opaque":3,"code":"4"}', (4, 3, 0, 7, None, {})),     # the last one counts
    (b'{"code":1,"unknown":[1,{"x":2}],"flag":2}', (1, 0, 2, 7, None, {})),
])
def test_json_header_corner_cases_decode_as_json_reads_them(header, expected):
    cmd = decode_command(frame(SERIALIZE_JSON, header))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.remark, cmd.ext_fields) == expected


def test_the_frame_splitter_cuts_what_the_encoder_writes():
    splitter = RocketMQFrameSplitter()
    wires = [encode_frame(105, i, {"topic": "t"}, b"x" * i, FLAG_RESPONSE, i % 2) for i in range(4)]
    splitter.feed(b"".join(wires))
    assert [decode_command(f).opaque for f in splitter] == [0, 1, 2, 3]


def test_a_java_json_header_with_sloppy_fields_decodes():
    # The key order fastjson writes, numbers and booleans as extFields values (C++ client, ali-ons), a raw
    # control character inside a string (.NET), the language as a number and as an unknown name.
    header = ('{"code":0,"extFields":{"queueId":3,"batch":true,"props":"a\x01b\x02"},"flag":1,'
              '"language":1,"opaque":42,"remark":null,"serializeTypeCurrentRPC":"JSON","version":399}').encode()
    cmd = decode_command(frame(SERIALIZE_JSON, header, b"payload"))
    assert cmd.ext_fields == {"queueId": "3", "batch": "true", "props": "a\x01b\x02"}
    assert (cmd.code, cmd.flag, cmd.opaque, cmd.language, cmd.version, cmd.remark) == (0, 1, 42, 1, 399, None)
    assert cmd.language_name == "CPP" and cmd.is_response and not cmd.is_oneway and cmd.body == b"payload"
    assert response_opaque(frame(SERIALIZE_JSON, header)) == 42
    assert decode_command(frame(SERIALIZE_JSON, b'{"code":1,"language":"COBOL","flag":2}')).language_name == "OTHER"
    assert decode_command(frame(SERIALIZE_JSON, b'{"code":1,"flag":2}')).is_oneway


def test_response_opaque_reads_only_the_top_level():
    header = b'{"extFields":{"opaque":"9","flag":"1","x":{"opaque":5}},"remark":"\\"opaque\\":7","flag":1,"opaque":3}'
    assert response_opaque(frame(SERIALIZE_JSON, header)) == 3
    request = b'{"extFields":{"flag":"1"},"opaque":3,"flag":0}'
    assert response_opaque(frame(SERIALIZE_JSON, request)) is None
    with pytest.raises(CorruptDataError, match="opaque"):
        response_opaque(frame(SERIALIZE_JSON, b'{"extFields":{"opaque":3},"flag":1}'))


@pytest.mark.parametrize("wire, error, message", [
    (b"\x00\x00", TruncatedError, "header-length"),
    (frame(SERIALIZE_JSON, b"{}")[:-1], TruncatedError, "only 1 follow"),
    (frame(SERIALIZE_ROCKETMQ, b"\x00" * 20), TruncatedError, "at least 21"),
    (frame(2, b"{}"), ProtocolError, "serialize type 2"),
])
def test_frames_without_a_readable_header_are_refused(wire, error, message):
    with pytest.raises(error, match=message):
        response_opaque(wire)
    with pytest.raises(error, match=message):
        decode_command(wire)


@pytest.mark.parametrize("header, message", [
    (b"[1, 2]", "not an object"),
    (b'{"code": "ten"}', "expected an integer"),
    (b'{"code": 1, "opaque": 4294967296}', "32 bits"),
    (b'{"code": 1, "extFields": [1]}', "not an object"),
    (b'{"code": 1, "extFields": {"a": [1]}}', "expected a string or a number"),
    (b'{"code": 1, "remark": 5}', "remark"),
    (b'{"code": 1', "does not parse"),
    (b'{"code": "\xff"}', "UTF-8"),
    (b'{"code": 1, "serializeTypeCurrentRPC": "\xff"}', "UTF-8"),
    (b'{"code": 01}', "does not parse"),
    (b'{"code": 1.5}', "expected an integer"),
    (b'{"code": 2147483648}', "32 bits"),
    (b'{"code": 1, "language": 256}', "language"),
    (b'{"code": 1, "flag": true}', "expected an integer"),
    (b'{"code": 1} x', "does not parse"),
    (b'{"code": 1,}', "does not parse"),
])
def test_bad_json_headers_are_refused(header, message):
    with pytest.raises(CorruptDataError, match=message):
        decode_command(frame(SERIALIZE_JSON, header))


@pytest.mark.parametrize("header, error, message", [
    (binary_header(1, 0, 1, 1, 0, None, {})[:-4] + struct.pack(">i", -1), CorruptDataError, "negative"),
    (binary_header(1, 0, 1, 1, 0, None, {})[:-4] + struct.pack(">i", 100), TruncatedError, "needed"),
    (binary_header(1, 0, 1, 1, 0, None, {"k": "v"})[:-1], TruncatedError, "needed"),
    (struct.pack(">hBhiii", 1, 0, 1, 1, 0, -5) + struct.pack(">i", 0), CorruptDataError, "negative"),
    (binary_header(1, 0, 1, 1, 0, None, {}) + b"x", CorruptDataError, "after the ROCKETMQ"),
    (struct.pack(">hBhiii", 1, 0, 1, 1, 0, 1) + b"\xff" + struct.pack(">i", 0), CorruptDataError, "UTF-8"),
    (struct.pack(">hBhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", 9) + struct.pack(">h", 2) + b"qo"
     + struct.pack(">i", 1) + b"\xff", CorruptDataError, r"extFields\['qo'\] is not valid UTF-8"),
])
def test_bad_binary_headers_are_refused(header, error, message):
    with pytest.raises(error, match=message):
        decode_command(frame(SERIALIZE_ROCKETMQ, header))


@given(st.binary(max_size=200), st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ, 5]))
@settings(max_examples=150, deadline=None)
def test_arbitrary_headers_decode_or_raise_protocol_errors(data, serialize_type):
    wire = frame(serialize_type, data)
    for parse in (decode_command, response_opaque):
        try:
            parse(wire)
        except ProtocolError:
            pass


@given(st.binary(min_size=1, max_size=120))
@settings(max_examples=200, deadline=None)
def test_truncated_frames_raise(data):
    wire = encode_frame(11, 1, {"topic": "t", "queueId": "1"}, data, FLAG_RESPONSE, SERIALIZE_ROCKETMQ)[4:]
    for cut in range(0, 25):
        with pytest.raises(ProtocolError):
            decode_command(wire[:cut])


def test_encoding_refuses_what_does_not_fit():
    with pytest.raises(CorruptDataError, match="expected a string or a number"):
        encode_frame(1, 1, {"k": [1]})
    with pytest.raises(ValueError, match="32767"):
        encode_frame(1, 1, {"k" * 40000: "v"}, serialize_type=SERIALIZE_ROCKETMQ)
    with pytest.raises(ValueError, match="serialize type"):
        encode_frame(1, 1, serialize_type=3)
    assert RemotingCommand(1, flag=FLAG_ONEWAY).is_oneway


# --- messages ------------------------------------------------------------------------------------------------

def test_golden_records_pulled_by_ali_ons_decode():
    data = golden_path("rocketmq/ali-ons-message.bin").read_bytes()
    (size,) = struct.unpack_from(">i", data)
    [msg] = decode_messages(data[:size])
    assert (msg.topic, msg.queue_id, msg.queue_offset, msg.tags) == ("TopicTest", 0, 276, "TagA")
    assert json.loads(msg.body) == {"room": "1", "msg": "1"}
    assert msg.born_host == "10.62.60.82:54073" and msg.store_host == "10.218.145.166:10700"
    assert msg.msg_id == msg.offset_msg_id == (data[64:72] + data[28:36]).hex().upper()
    batch = golden_path("rocketmq/ali-ons-batch_message.bin").read_bytes()
    messages = decode_messages(batch[:3 * 125])
    assert [m.queue_offset for m in messages] == [278, 279, 280]
    assert all(m.body == b"Hello MetaQ !!!" and m.store_size == 125 for m in messages)


@given(topic=st.text(min_size=1, max_size=200).filter(lambda t: len(t.encode()) < 32767),
       body=st.binary(max_size=300), props=st.dictionaries(st.text("abcXYZ", min_size=1, max_size=5),
                                                           st.text("xyz 123", max_size=8), max_size=4),
       v6=st.booleans())
@settings(max_examples=100, deadline=None)
def test_records_decode_like_message_decoder(topic, body, props, v6):
    encoded = "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
    data = record(topic, body, encoded, v6=v6) * 2
    messages = decode_messages(data)
    assert len(messages) == 2
    msg = messages[0]
    assert (msg.topic, msg.body, msg.properties, msg.queue_id, msg.queue_offset) == (topic, body, props, 1, 5)
    assert (msg.commitlog_offset, msg.flag, msg.reconsume_times, msg.store_size) == (1000, 7, 2, len(data) // 2)
    assert msg.born_timestamp == 1700000000000 and msg.store_timestamp == 1700000000001
    assert msg.store_host.endswith(":10911")


def test_compressed_bodies_inflate():
    body = b"compress me " * 1000
    sent, sys_flag = compress_body(body)
    assert sys_flag == SYSFLAG_COMPRESSED_ZLIB and zlib.decompress(sent) == body
    assert compress_body(b"small") == (b"small", 0)
    [msg] = decode_messages(record("t", sent, b"", sys_flag=sys_flag))
    assert msg.body == body
    [old] = decode_messages(record("t", sent, b"", sys_flag=1))     # before 5.x: no codec bits, zlib
    assert old.body == body
    with pytest.raises(CompressionError, match="inflates past"):
        decode_messages(record("t", sent, b"", sys_flag=1), max_body_size=100)
    with pytest.raises(CompressionError, match="does not inflate"):
        decode_messages(record("t", b"not zlib", b"", sys_flag=1))
    with pytest.raises(CompressionError, match="unknown message compression type 5"):
        decode_messages(record("t", sent, b"", sys_flag=1 | 5 << 8))


def test_bad_records_are_refused():
    good = record("t", b"body", b"TAGS\x01a\x02")
    with pytest.raises(CorruptDataError, match="CRC"):
        decode_messages(record("t", b"body", b"", crc=1))
    assert decode_messages(record("t", b"body", b"", crc=1), check_crc=False)[0].body == b"body"
    with pytest.raises(TruncatedError, match="runs past"):
        decode_messages(good + good[:30])
    with pytest.raises(CorruptDataError, match="zero total size"):
        decode_messages(good + b"\x00" * 40)
    with pytest.raises(CorruptDataError, match="magic"):
        decode_messages(good[:4] + b"\x00\x00\x00\x01" + good[8:])
    with pytest.raises(CorruptDataError, match="UTF-8"):
        decode_messages(record("t", b"b", b"TAGS\x01\xff\x02"))


@given(st.binary(max_size=300))
@settings(max_examples=150, deadline=None)
def test_arbitrary_pull_bodies_decode_or_raise(data):
    try:
        decode_messages(data)
    except ProtocolError:
        pass


@given(st.integers(0, 120))
def test_every_truncation_of_a_pull_body_raises(cut):
    data = record("topic", b"0123456789", b"KEYS\x01k\x02")
    if cut < len(data):
        with pytest.raises(ProtocolError):
            decode_messages(data[:cut] if cut else b"\x00")


def test_message_properties():
    props = message_properties("TagA", ["k1", "k2"], {"user": "v"}, delay_level=3, uniq_key="AB")
    assert props == b"user\x01v\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02DELAY\x013\x02WAIT\x01true\x02UNIQ_KEY\x01AB\x02"
    with pytest.raises(ValueError, match="separators"):
        message_properties("bad\x01tag")
    with pytest.raises(ValueError, match="32767"):
        message_properties(properties={"k": "v" * 40000})


PREFIX = "7F0000010ABC12345678"
MONTH_START = 1_700_000_000_000


def send_request(code: int, opaque: int, flag: int, fields: list[tuple[str, str]], body: bytes) -> bytes:
    """A SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE frame as the Java client writes it, `total` included."""
    data = frame(SERIALIZE_ROCKETMQ, binary_header(code, 3, 453, opaque, flag, None, dict(fields)), body)
    return struct.pack(">i", len(data)) + data


def send_fields(topic: str, queue_id: int, sys_flag: int, born: int, flag: int, properties: bytes, batch: bool,
                broker: str) -> list[tuple[str, str]]:
    return [("a", "group"), ("b", topic), ("c", "TBW102"), ("d", "4"), ("e", str(queue_id)), ("f", str(sys_flag)),
            ("g", str(born)), ("h", str(flag)), ("i", properties.decode()), ("j", "0"), ("k", "false"),
            ("m", "true" if batch else "false"), ("n", broker)]


plain = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)
messages = st.builds(
    lambda body, tags, keys, props, delay, wait, flag: Message("topic", body, tags=tags, keys=keys,
                                                               properties=props, delay_level=delay,
                                                               wait_store=wait, flag=flag),
    st.binary(max_size=60), st.none() | plain, st.none() | plain | st.lists(plain, max_size=3),
    st.none() | st.dictionaries(plain.filter(bool), plain, max_size=3), st.integers(0, 18), st.booleans(), i32)


@given(message=messages, opaque=st.integers(0, 2**31 - 1), queue_id=st.integers(0, 1000),
       born=st.integers(MONTH_START, MONTH_START + 2**33), counter=st.integers(0, 2**16 - 1), oneway=st.booleans())
@settings(max_examples=60, deadline=None)
def test_send_requests_are_what_the_java_client_writes(message, opaque, queue_id, born, counter, oneway):
    encoder = SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, counter), compress_threshold=40)
    wire, uniq = encoder.encode_message(opaque, message, "topic", queue_id, "broker-a", 4, born, oneway)
    assert uniq == f"{PREFIX}{(born - MONTH_START) & 0xFFFFFFFF:08X}{counter:04X}"
    body, compressed = compress_body(message.body, 40)
    properties = message_properties(message.tags, message.keys, message.properties, message.delay_level,
                                    message.wait_store, uniq)
    assert wire == send_request(310, opaque, 2 if oneway else 0,
                                send_fields("topic", queue_id, 4 | compressed, born, message.flag, properties,
                                            False, "broker-a"), body)


@given(batch=st.lists(messages, min_size=1, max_size=5), counter=st.integers(0, 2**16 - 1))
@settings(max_examples=40, deadline=None)
def test_batches_are_what_message_decoder_encode_messages_writes(batch, counter):
    encoder = SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, counter))
    wire, ids = encoder.encode_batch(7, batch, "topic", 2, "broker-a", MONTH_START + 5)
    assert ids == [f"{PREFIX}00000005{(counter + i) & 0xFFFF:04X}" for i in range(len(batch))]
    items = [(m.body, message_properties(m.tags, m.keys, m.properties, 0, m.wait_store, uniq), m.flag)
             for m, uniq in zip(batch, ids)]
    body = b"".join(struct.pack(">iiiii", 22 + len(b) + len(p), 0, 0, f, len(b)) + b + struct.pack(">h", len(p)) + p
                    for b, p, f in items)
    assert wire == send_request(320, 7, 0, send_fields("topic", 2, 0, MONTH_START + 5, 0, b"WAIT\x01true\x02", True,
                                                       "broker-a"), body)
    assert decode_batch_body(decode_command(wire, with_total=True).body) == [
        (b, dict(part.split("\x01") for part in p.decode().split("\x02") if part), f) for b, p, f in items]


def test_a_producers_request_is_written_from_its_queue_born_now():
    """encode_request: what encode_message and encode_batch write, for the queue's topic, id and broker, born at
    the time of the call; a half message (TRAN_MSG "true") goes PREPARED; a batch's ids come joined."""
    queue = MessageQueue("topic", "broker-a", 3)
    for properties, sys_flag in ((None, 0), ({"TRAN_MSG": "true"}, 4), ({"TRAN_MSG": "false", "k": "v"}, 0)):
        before = int(time.time() * 1000)
        wire, uniq = SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, 9)).encode_request(
            5, [Message("topic", b"body", properties=properties)], False, queue, True)
        born = int(decode_command(wire, with_total=True).ext_fields["g"])
        assert before <= born <= int(time.time() * 1000)
        expected, expected_uniq = SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, 9)).encode_message(
            5, Message("topic", b"body", properties=properties), "topic", 3, "broker-a", sys_flag, born, True)
        assert (wire, uniq) == (expected, expected_uniq)
    batch = [Message("topic", b"a"), Message("topic", b"b")]
    wire, joined = SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, 0)).encode_request(
        6, batch, True, queue)
    born = int(decode_command(wire, with_total=True).ext_fields["g"])
    assert (wire, joined.split(",")) == SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, 0)).encode_batch(
        6, batch, "topic", 3, "broker-a", born)


def test_send_requests_refuse_separators_and_oversized_properties():
    encoder = SendEncoder("group", UniqueIdGenerator(PREFIX, MONTH_START, 0))
    for bad in (Message("t", b"", tags="a\x02b"), Message("t", b"", keys=["k", "x\x01"]),
                Message("t", b"", properties={"k": "v\x01"})):
        with pytest.raises(ValueError, match="separators"):
            encoder.encode_message(1, bad, "t", 0, "b", 0, MONTH_START)
        with pytest.raises(ValueError, match="separators"):
            encoder.encode_batch(1, [bad], "t", 0, "b", MONTH_START)
    with pytest.raises(ValueError, match="32767"):
        encoder.encode_message(1, Message("t", b"", tags="t" * 40000), "t", 0, "b", 0, MONTH_START)
    with pytest.raises(ValueError, match="prefix"):
        UniqueIdGenerator("short", MONTH_START, 0)


@given(st.binary(max_size=100))
@settings(max_examples=200, deadline=None)
def test_arbitrary_batch_bodies_decode_or_raise(data):
    try:
        decode_batch_body(data)
    except ProtocolError:
        pass


def test_bad_batch_bodies_are_refused():
    good = struct.pack(">iiiii", 22 + 4 + 4, 0, 0, 0, 4) + b"body" + struct.pack(">h", 4) + b"a\x01b\x02"
    assert decode_batch_body(good) == [(b"body", {"a": "b"}, 0)]
    with pytest.raises(TruncatedError):
        decode_batch_body(good[:-1])
    with pytest.raises(CorruptDataError, match="announces 3"):
        decode_batch_body(struct.pack(">i", 3) + good[4:])
    with pytest.raises(CorruptDataError, match="body length"):
        decode_batch_body(good[:16] + struct.pack(">i", 999) + good[20:])


# --- send responses read straight into a SendResult ------------------------------------------------------------

STATUSES = {status.value: status for status in SendStatus}
decimal_texts = st.integers(-2**40, 2**40).map(str)
number_texts = decimal_texts | st.sampled_from(["", "+5", " 5", "0x1F", "1_000", "12345678901234567890", "-", "\u0663"])
send_response_fields = st.fixed_dictionaries(
    {}, optional={"msgId": texts, "queueId": number_texts | st.integers(0, 7).map(str), "queueOffset": number_texts,
                  "transactionId": texts, "MSG_REGION": st.just("DefaultRegion"), "TRACE_ON": st.just("true")})


def send_result_as_read(wire: bytes, queue: MessageQueue) -> SendResult | None:
    """What a send response says through the general decoder (None: no SendResult of this queue)."""
    response = decode_command(wire)
    fields = response.ext_fields
    if response.code not in STATUSES:
        return None
    try:
        queue_id, offset = int(fields.get("queueId", queue.queue_id)), int(fields.get("queueOffset", -1))
    except ValueError:
        return None
    if queue_id != queue.queue_id or not -2**63 <= offset < 2**63:
        return None
    return SendResult(STATUSES[response.code], "UNIQ", fields.get("msgId", ""), queue, offset,
                      fields.get("transactionId"))


@given(code=st.sampled_from([0, 10, 11, 12, 1, 14, 17, 215]), fields=send_response_fields, remark=st.none() | texts,
       serialize_type=st.sampled_from([SERIALIZE_ROCKETMQ, SERIALIZE_JSON]), queue_id=st.integers(0, 7))
@settings(max_examples=300, deadline=None)
def test_send_results_read_from_the_header_as_the_general_decoder_reads_them(code, fields, remark, serialize_type,
                                                                            queue_id):
    wire = encode_frame(code, 9, fields, None, FLAG_RESPONSE, serialize_type, remark=remark)[4:]
    queue = MessageQueue("topic", "broker-a", queue_id)
    read = decode_send_result(wire, "UNIQ", queue, queue_id, STATUSES)
    expected = send_result_as_read(wire, queue)
    if read is not None:
        assert read == expected
    plain = all(fields.get(name, "0").lstrip("-").isdigit() and fields.get(name, "0").isascii()
                and len(fields.get(name, "0").lstrip("-")) <= 18 for name in ("queueId", "queueOffset"))
    if serialize_type == SERIALIZE_ROCKETMQ and expected is not None and plain:
        assert read is not None         # the usual answer never takes the general decoder


@given(st.binary(max_size=200), st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ, 5]))
@settings(max_examples=200, deadline=None)
def test_send_results_of_arbitrary_frames_are_read_or_left_to_the_general_decoder(data, serialize_type):
    queue = MessageQueue("topic", "broker-a", 1)
    for wire in (frame(serialize_type, data), data):
        read = decode_send_result(wire, "UNIQ", queue, 1, STATUSES)
        assert read is None or read == send_result_as_read(wire, queue)


def test_a_truncated_send_response_is_left_to_the_general_decoder():
    wire = encode_frame(0, 9, {"msgId": "7F00", "queueId": "1", "queueOffset": "42"}, None, FLAG_RESPONSE,
                        SERIALIZE_ROCKETMQ)[4:]
    queue = MessageQueue("topic", "broker-a", 1)
    assert decode_send_result(wire, "UNIQ", queue, 1, STATUSES) == SendResult(SendStatus.SEND_OK, "UNIQ", "7F00",
                                                                             queue, 42, None)
    for cut in range(len(wire)):
        assert decode_send_result(wire[:cut], "UNIQ", queue, 1, STATUSES) is None
