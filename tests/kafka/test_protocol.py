"""Tests of fastmq.kafka.protocol (and the compiled interpreter fastmq/kafka/_native/kafka_protocol.pyx).

- Oracles: every (API, version, direction) is checked against kafka-python 3.0.12's JSON-driven protocol
  (encode with fastmq, decode with kafka-python and compare values; encode with kafka-python and compare
  bytes; decode kafka-python's bytes with fastmq), and against aiokafka's hand-written structs where it has
  them; whole frames are compared with kafka-python's framed encodings.
- Properties: hypothesis round trips for every API and version, with values generated from the schemas.
- Fuzzing: random, truncated and corrupted frames make every decoder raise fastmq's ProtocolError
  subclasses only, and forged counts allocate nothing.
"""
from __future__ import annotations

import copy
import importlib
import inspect
import pickle
import pkgutil
import struct
import tracemalloc
import uuid
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.kafka._native import kafka_protocol as native
from fastmq.errors import CorruptDataError, FastMQError, ProtocolError, TruncatedError
from fastmq.kafka import protocol as kp
from fastmq.kafka.errors import EncodeError, IncompatibleBrokerVersion, UnsupportedRequestError, UnsupportedVersionError
from fastmq.kafka.protocol.schema import ZERO_UUID, FieldSchema, StructSchema, parse_api

ORACLE_SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Per message version: with ~460 versions a run draws ~4.6k messages for each property (and ~3.7k fuzzed frames).
PROPERTY_SETTINGS = settings(max_examples=10, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ALL_MESSAGES = [
    pytest.param(api.key, version, kind, id=f"{api.name}{kind.capitalize()}-v{version}")
    for api in kp.APIS.values()
    for version in range(api.versions.lo, api.versions.hi + 1)
    for kind in ("request", "response")
]


def message_schema(api_key: int, kind: str):
    api = kp.APIS[api_key]
    return api.request if kind == "request" else api.response


def codec_of(api_key: int, version: int, kind: str):
    return kp.body_codec(api_key, version, kind == "response")


def encode_body(api_key: int, version: int, kind: str, obj) -> bytes:
    return bytes(native.encode_message(codec_of(api_key, version, kind), obj))


def decode_body(api_key: int, version: int, kind: str, data):
    return native.decode_message(codec_of(api_key, version, kind), data)


# ---------------------------------------------------------------------------------------------------------
# Values generated from the schemas
# ---------------------------------------------------------------------------------------------------------

INT_RANGES = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
              "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1)}


def _scalar(fs: FieldSchema, version: int, flexible: bool, tagged: bool) -> st.SearchStrategy:
    if fs.type == "struct":
        return struct_values(fs.struct, version, flexible, tagged)
    if fs.type in INT_RANGES:
        low, high = INT_RANGES[fs.type]
        return st.one_of(st.sampled_from([low, high, -1, 0, 1]).filter(lambda v: low <= v <= high),
                         st.integers(low, high))
    if fs.type == "bool":
        return st.booleans()
    if fs.type == "float64":
        return st.floats(allow_nan=False)
    if fs.type == "uuid":
        return st.one_of(st.just(ZERO_UUID), st.uuids())
    if fs.type == "string":
        return st.text(max_size=12)
    if fs.type == "bytes":
        return st.binary(max_size=16)
    if fs.type == "records":
        return st.binary(max_size=64)
    raise AssertionError(fs.type)


def field_values(fs: FieldSchema, version: int, flexible: bool, tagged: bool) -> st.SearchStrategy:
    values = _scalar(fs, version, flexible, tagged)
    if fs.is_array:
        values = st.lists(values, max_size=3)
    if fs.nullable_in(version):
        values = st.one_of(st.none(), values)
    return values


def struct_values(struct: StructSchema, version: int, flexible: bool, tagged: bool = True) -> st.SearchStrategy:
    """Instances of struct.cls with every field present in `version` drawn (tagged ones too when `tagged`),
    the others left at their defaults, so that a round trip must reproduce the instance exactly."""
    fields = {
        fs.name: field_values(fs, version, flexible, tagged)
        for fs in struct.fields
        if fs.present_in(version) and (tagged or fs.tag is None or not flexible)
    }
    return st.builds(struct.cls, **fields)


@lru_cache(maxsize=None)
def message_values(api_key: int, version: int, kind: str, tagged: bool = True) -> st.SearchStrategy:
    message = message_schema(api_key, kind)
    return struct_values(message.root, version, message.api.is_flexible(version), tagged)


# ---------------------------------------------------------------------------------------------------------
# Oracle 1: kafka-python 3.0.12 (its protocol is generated from Kafka's JSON specifications)
# ---------------------------------------------------------------------------------------------------------

def _kafka_python_classes() -> dict:
    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage
    found = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or "generate_stubs" in info.name:
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and getattr(obj, "_json", None):
                found[(obj.API_KEY, obj.type)] = obj
    return found


KAFKA_PYTHON = _kafka_python_classes()


def _bits(value: int) -> set[int] | None:
    # kafka-python reads the int32 "authorized operations" fields as sets of bit numbers; INT32_MIN is null.
    if value == -2**31:
        return None
    return {bit for bit in range(32) if (value & 0xFFFFFFFF) >> bit & 1}


def _from_bits(bits) -> int:
    if bits is None:
        return -2**31
    value = sum(1 << bit for bit in bits)
    return value - 2**32 if value >= 2**31 else value


def _their_fields(their_struct) -> list:
    return list(their_struct.fields.values())


def to_kafka_python(obj, ours: StructSchema, their_struct, version: int, flexible: bool, make):
    """Our instance -> kafka-python's, fields matched by position (kafka-python renames a few fields)."""
    theirs = _their_fields(their_struct)
    assert len(theirs) == len(ours.fields), (ours.name, [f.name for f in theirs], ours.field_names())
    kwargs = {}
    for fs, their_field in zip(ours.fields, theirs):
        if not fs.present_in(version):
            continue
        value = getattr(obj, fs.name)
        if fs.tag is not None and flexible and value == getattr(native.default_struct(ours.cls), fs.name):
            continue        # kafka-python writes a tagged field when it was given, fastmq when it is not default
        kwargs[their_field.name] = _value_to_kafka_python(value, fs, their_field, version, flexible)
    return make(**kwargs)


def _value_to_kafka_python(value, fs: FieldSchema, their_field, version: int, flexible: bool):
    if value is None:
        return None
    if fs.type == "struct":
        def convert(item):
            return to_kafka_python(item, fs.struct, their_field, version, flexible, their_field.data_class)
        return [convert(item) for item in value] if fs.is_array else convert(value)
    if their_field._type_str == "bitfield":
        return _bits(value)
    if fs.type == "records":
        return bytes(value)
    return list(value) if fs.is_array else value


def assert_matches_kafka_python(obj, theirs, ours: StructSchema, their_struct, version: int, path: str = ""):
    """Every field present in `version` of our instance equals kafka-python's decoded value."""
    for fs, their_field in zip(ours.fields, _their_fields(their_struct)):
        if not fs.present_in(version):
            continue
        mine = getattr(obj, fs.name)
        other = getattr(theirs, their_field.name)
        where = f"{path}.{fs.name}"
        if fs.type == "struct":
            if fs.is_array:
                if mine is None or other is None:
                    assert mine is None and other is None, where
                    continue
                assert len(mine) == len(other), where
                for i, (a, b) in enumerate(zip(mine, other)):
                    assert_matches_kafka_python(a, b, fs.struct, their_field, version, f"{where}[{i}]")
            else:
                if other is None and fs.nullable_in(version):
                    assert mine is None, where
                elif other is None:   # kafka-python leaves absent tagged structs unset
                    assert mine == native.default_struct(fs.struct.cls), where
                else:
                    assert_matches_kafka_python(mine, other, fs.struct, their_field, version, where)
            continue
        if their_field._type_str == "bitfield":
            other = _from_bits(other)
        elif fs.type == "uuid" and other is None:
            other = ZERO_UUID
        elif fs.type == "records" and mine is not None:
            mine = bytes(mine)
            other = bytes(other) if other is not None else None
        assert mine == other, f"{where}: fastmq {mine!r} != kafka-python {other!r}"


@pytest.mark.parametrize("api_key, version, kind", ALL_MESSAGES)
@ORACLE_SETTINGS
@given(data=st.data())
def test_kafka_python_oracle(api_key, version, kind, data):
    their_cls = KAFKA_PYTHON[(api_key, kind)]
    message = message_schema(api_key, kind)
    flexible = message.api.is_flexible(version)
    obj = data.draw(message_values(api_key, version, kind))
    if api_key == kp.ApiKey.API_VERSIONS and kind == "response":
        obj.error_code = 0   # kafka-python reads any ApiVersions error response as v0 (fastmq: only as a fallback)
    ours = encode_body(api_key, version, kind, obj)

    # fastmq -> kafka-python
    theirs = their_cls.decode(ours, version=version)
    assert_matches_kafka_python(obj, theirs, message.root, their_cls._struct, version)

    # kafka-python -> fastmq, and byte-identical encodings
    their_obj = to_kafka_python(obj, message.root, their_cls._struct, version, flexible, their_cls)
    their_bytes = bytes(their_obj.encode(version=version))
    assert their_bytes == ours
    assert decode_body(api_key, version, kind, their_bytes) == obj


@pytest.mark.parametrize("api_key, version, kind", ALL_MESSAGES)
def test_frames_match_kafka_python(api_key, version, kind):
    """Headers and size prefixes: a default message framed by both libraries gives the same bytes."""
    their_cls = KAFKA_PYTHON[(api_key, kind)]
    message = message_schema(api_key, kind)
    obj = native.default_struct(message.root.cls)
    their_obj = to_kafka_python(obj, message.root, their_cls._struct, version, message.api.is_flexible(version),
                                their_cls)
    their_obj.API_VERSION = version      # before with_header: kafka-python cannot re-version a response header
    if kind == "request":
        their_obj.with_header(correlation_id=123456, client_id="fastmq-\u00e9")
        ours = bytes(kp.encode_request(api_key, version, 123456, "fastmq-\u00e9", obj))
        header, decoded = kp.decode_request(ours[4:])
        assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
            api_key, version, 123456, "fastmq-\u00e9")
    else:
        their_obj.with_header(correlation_id=-7)
        ours = bytes(kp.encode_response(api_key, version, -7, obj))
        correlation_id, decoded = kp.decode_response(api_key, version, ours[4:])
        assert correlation_id == -7 == kp.peek_correlation_id(ours[4:])
    assert bytes(their_obj.encode(header=True, framed=True)) == ours
    assert decoded == obj


def test_schemas_match_kafka_python_json():
    """Field layout per version (names by position, wire types, nullability, tags) equals kafka-python's copy of
    Kafka's JSON specifications, for every version either side defines."""
    checked = 0
    for api in kp.APIS.values():
        for message in (api.request, api.response):
            their_cls = KAFKA_PYTHON[(api.key, message.kind)]
            assert their_cls.max_version == api.versions.hi, api.name
            for version in range(api.versions.lo, api.versions.hi + 1):
                assert their_cls.flexible_version_q(version) == api.is_flexible(version), (api.name, version)
                _compare_layout(message.root, their_cls._struct, version, api.name)
                checked += 1
    assert checked == len(ALL_MESSAGES)


def _compare_layout(ours: StructSchema, their_struct, version: int, where: str) -> None:
    theirs = _their_fields(their_struct)
    assert len(theirs) == len(ours.fields), where
    for fs, their_field in zip(ours.fields, theirs):
        here = f"{where}.{fs.name} v{version}"
        assert fs.present_in(version) == their_field.for_version_q(version), here
        if not fs.present_in(version):
            continue
        assert fs.nullable_in(version) == their_field.nullable_for_version_q(version), here
        assert (fs.tag if api_tagged(fs, their_field, version) else None) == (
            their_field.tag if their_field.tagged_field_q(version) else None), here
        type_text = their_field._type_str
        if type_text != "bitfield":
            expected = (f"[]{fs.struct.name}" if fs.is_array else fs.struct.name) if fs.struct else (
                f"[]{fs.type}" if fs.is_array else fs.type)
            assert type_text == expected, here
        if fs.struct is not None:
            _compare_layout(fs.struct, their_field, version, f"{where}.{fs.name}")


def api_tagged(fs: FieldSchema, their_field, version: int) -> bool:
    return fs.tag is not None and their_field.tagged_field_q(version)


# ---------------------------------------------------------------------------------------------------------
# Oracle 2: aiokafka 0.14's hand-written structs (mostly older versions)
# ---------------------------------------------------------------------------------------------------------

def _aiokafka_classes() -> dict:
    import aiokafka.protocol
    found = {}
    for info in pkgutil.walk_packages(aiokafka.protocol.__path__, "aiokafka.protocol."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if not (inspect.isclass(obj) and isinstance(getattr(obj, "API_KEY", None), int)
                    and isinstance(getattr(obj, "API_VERSION", None), int) and hasattr(obj, "SCHEMA")):
                continue
            kind = "request" if "Request" in name else "response"
            if obj.API_KEY in kp.APIS:
                found[(obj.API_KEY, obj.API_VERSION, kind)] = obj
    return found


AIOKAFKA = _aiokafka_classes()
AIOKAFKA_BUGS = {
    (kp.ApiKey.LIST_OFFSETS, 4, "request"): "aiokafka 0.14 declares current_leader_epoch as Int64 (Kafka: int32)",
    (kp.ApiKey.LIST_OFFSETS, 5, "request"): "aiokafka 0.14 declares current_leader_epoch as Int64 (Kafka: int32)",
    (kp.ApiKey.DESCRIBE_ACLS, 2, "request"): "aiokafka 0.14 reuses v1's non-flexible schema (Kafka: flexible from v2)",
    (kp.ApiKey.DESCRIBE_ACLS, 2, "response"): "aiokafka 0.14 reuses v1's non-flexible schema (Kafka: flexible from v2)",
}
AIOKAFKA_MESSAGES = [
    pytest.param(key, version, kind, id=f"{kp.APIS[key].name}{kind.capitalize()}-v{version}",
                 marks=[pytest.mark.xfail(strict=True, reason=AIOKAFKA_BUGS[(key, version, kind)])]
                 if (key, version, kind) in AIOKAFKA_BUGS else [])
    for (key, version, kind) in sorted(AIOKAFKA)
]


def wire_tokens(value, fs_or_struct, version: int, flexible: bool, out: list) -> list:
    """Our value as the sequence of what goes on the wire: ("value", v), ("array", count or None) before the
    elements of an array, ("tags",) for each tagged-field section. aiokafka nests and flattens structs
    differently (single-field structs become plain arrays, groups of fields become sub-schemas), but the
    sequence is the same."""
    if isinstance(fs_or_struct, StructSchema):
        for fs in fs_or_struct.fields:
            if fs.present_in(version) and not (fs.tag is not None and flexible):
                wire_tokens(getattr(value, fs.name), fs, version, flexible, out)
        if flexible:
            out.append(("tags",))
        return out
    fs = fs_or_struct
    if fs.is_array:
        out.append(("array", None if value is None else len(value)))
        for item in value or ():
            if fs.struct is not None:
                wire_tokens(item, fs.struct, version, flexible, out)
            else:
                out.append(("value", item))
    elif fs.struct is not None:
        wire_tokens(value, fs.struct, version, flexible, out)
    else:
        out.append(("value", bytes(value) if isinstance(value, memoryview) else value))
    return out


def aiokafka_value(their_type, tokens: list):
    """Builds aiokafka's nested value for their_type by consuming wire tokens."""
    types = _aiokafka_types()
    if isinstance(their_type, types.Schema):
        return tuple(aiokafka_value(field, tokens) for field in their_type.fields)
    if their_type is types.TaggedFields:
        assert tokens.pop(0) == ("tags",)
        return {}
    if isinstance(their_type, types.Array):
        kind, count = tokens.pop(0)
        assert kind == "array"
        return None if count is None else [aiokafka_value(their_type.array_of, tokens) for _ in range(count)]
    kind, value = tokens.pop(0)
    assert kind == "value", (their_type, kind)
    return value


def _aiokafka_types():
    from aiokafka.protocol import types
    return types


@pytest.mark.parametrize("api_key, version, kind", AIOKAFKA_MESSAGES)
@ORACLE_SETTINGS
@given(data=st.data())
def test_aiokafka_oracle(api_key, version, kind, data):
    their_cls = AIOKAFKA[(api_key, version, kind)]
    message = message_schema(api_key, kind)
    flexible = message.api.is_flexible(version)
    obj = data.draw(message_values(api_key, version, kind, tagged=False))
    ours = encode_body(api_key, version, kind, obj)
    tokens = wire_tokens(obj, message.root, version, flexible, [])
    values = aiokafka_value(their_cls.SCHEMA, list(tokens))
    assert bytes(their_cls.SCHEMA.encode(list(values))) == ours
    theirs = their_cls.decode(ours)
    assert _normalize(tuple(getattr(theirs, name) for name in their_cls.SCHEMA.names)) == _normalize(values)
    assert decode_body(api_key, version, kind, bytes(their_cls(*values).encode())) == obj


def _normalize(value):
    if isinstance(value, (list, tuple)):
        return [_normalize(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


# ---------------------------------------------------------------------------------------------------------
# Round trips and frames
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("api_key, version, kind", ALL_MESSAGES)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_round_trip(api_key, version, kind, data):
    obj = data.draw(message_values(api_key, version, kind))
    body = native.encode_message(codec_of(api_key, version, kind), obj)
    assert decode_body(api_key, version, kind, body) == obj
    if kind == "request":
        frame = kp.encode_request(api_key, version, 42, None, obj)
        header, decoded = kp.decode_request(memoryview(frame)[4:])
        assert header.client_id is None and header.correlation_id == 42
    else:
        frame = kp.encode_response(api_key, version, 42, obj)
        correlation_id, decoded = kp.decode_response(api_key, version, bytes(frame)[4:])
        assert correlation_id == 42
    assert decoded == obj
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    # Referencing every bytes and records value instead of copying it gives the same frame.
    spliced = kp.WriteBuffer(splice_min=1)
    if kind == "request":
        kp.encode_request(api_key, version, 42, None, obj, spliced)
    else:
        kp.encode_response(api_key, version, 42, obj, spliced)
    assert b"".join(bytes(part) for part in spliced.parts()) == spliced.getvalue() == bytes(frame)
    assert len(spliced) == len(frame)


def test_records_decode_as_views_of_the_frame():
    batch = bytes(range(256)) * 4
    response = kp.FetchResponse(responses=[kp.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[kp.FetchResponse.PartitionData(partition_index=p, records=batch) for p in range(3)])])
    frame = bytes(kp.encode_response(kp.ApiKey.FETCH, 11, 1, response))[4:]
    _, decoded = kp.decode_response(kp.ApiKey.FETCH, 11, frame)
    for partition in decoded.responses[0].partitions:
        assert isinstance(partition.records, memoryview)
        assert partition.records.obj is frame          # a view, not a copy
        assert partition.records == batch


def test_records_encode_from_any_bytes_like():
    payload = b"\x01" * 1000
    wb = kp.WriteBuffer()
    wb.write(payload)
    for records in (payload, bytearray(payload), memoryview(payload), wb):
        request = kp.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[kp.ProduceRequest.TopicProduceData(
            name="t", partition_data=[kp.ProduceRequest.PartitionProduceData(index=0, records=records)])])
        _, decoded = kp.decode_request(bytes(kp.encode_request(0, 9, 1, "c", request))[4:])
        assert decoded.topic_data[0].partition_data[0].records == payload


def test_requests_can_be_batched_into_one_buffer():
    out = kp.WriteBuffer()
    for correlation_id in range(3):
        kp.encode_request(kp.ApiKey.HEARTBEAT, 4, correlation_id, "c", kp.HeartbeatRequest(group_id="g"), out)
    data = bytes(out)
    offset, seen = 0, []
    while offset < len(data):
        (size,) = struct.unpack_from(">i", data, offset)
        header, _ = kp.decode_request(data[offset + 4:offset + 4 + size])
        seen.append(header.correlation_id)
        offset += 4 + size
    assert seen == [0, 1, 2]


def test_header_versions():
    assert kp.request_header_version(kp.ApiKey.METADATA, 8) == 1
    assert kp.request_header_version(kp.ApiKey.METADATA, 9) == 2
    assert kp.response_header_version(kp.ApiKey.METADATA, 9) == 1
    assert kp.response_header_version(kp.ApiKey.API_VERSIONS, 3) == 0   # always v0
    assert kp.request_header_version(kp.ApiKey.API_VERSIONS, 3) == 2


def test_api_versions_answer_to_an_unknown_version_is_read_as_v0():
    """A broker answers an ApiVersions version it does not know with a v0 body carrying UNSUPPORTED_VERSION."""
    answer = kp.ApiVersionsResponse(error_code=35, api_keys=[
        kp.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)])
    frame = bytes(kp.encode_response(kp.ApiKey.API_VERSIONS, 0, 9, answer))[4:]
    correlation_id, decoded = kp.decode_response(kp.ApiKey.API_VERSIONS, 3, frame)
    assert correlation_id == 9
    assert decoded.error_code == 35 and decoded.api_keys[0].max_version == 2


def test_unsupported_request_carries_its_header():
    frame = struct.pack(">hhih", kp.ApiKey.API_VERSIONS, 99, 77, -1)
    with pytest.raises(UnsupportedRequestError) as info:
        kp.decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (18, 99, 77)
    with pytest.raises(UnsupportedRequestError):
        kp.decode_request(struct.pack(">hhih", 1000, 0, 1, -1))
    with pytest.raises(UnsupportedVersionError):
        kp.encode_request(kp.ApiKey.METADATA, 99, 1, None, kp.MetadataRequest())


# ---------------------------------------------------------------------------------------------------------
# Encoding errors
# ---------------------------------------------------------------------------------------------------------

def _produce(index=0, records=b"", name="t"):
    return kp.ProduceRequest(acks=1, timeout_ms=100, topic_data=[kp.ProduceRequest.TopicProduceData(
        name=name, partition_data=[kp.ProduceRequest.PartitionProduceData(index=index, records=records)])])


@pytest.mark.parametrize("request_obj, path, words", [
    (_produce(index=2**31), "topic_data[0].partition_data[0].index", "does not fit in int32"),
    (_produce(index=-2**31 - 1), "topic_data[0].partition_data[0].index", "does not fit in int32"),
    (_produce(index="1"), "topic_data[0].partition_data[0].index", "needs an int"),
    (_produce(index=1.0), "topic_data[0].partition_data[0].index", "needs an int"),
    (_produce(records="text"), "topic_data[0].partition_data[0].records", "bytes-like"),
    (_produce(name=None), "topic_data[0].name", "null is not allowed"),
    (_produce(name=b"t"), "topic_data[0].name", "needs a str"),
    (_produce(name="\ud800"), "topic_data[0].name", "UTF-8"),
    (kp.ProduceRequest(acks=1, timeout_ms=1, topic_data="abc"), "topic_data", "list or tuple"),
    (kp.ProduceRequest(acks=1, timeout_ms=1, topic_data=[kp.MetadataRequest()]), "topic_data[0]",
     "needs a ProduceRequest.TopicProduceData"),
    (kp.ProduceRequest(acks=2**15), "acks", "int16"),
])
def test_encode_errors_name_the_field(request_obj, path, words):
    with pytest.raises(EncodeError) as info:
        kp.encode_request(kp.ApiKey.PRODUCE, 8, 1, "c", request_obj)
    assert info.value.path == path
    assert words in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, FastMQError)


def test_encode_error_leaves_the_buffer_as_it_was():
    out = kp.WriteBuffer()
    kp.encode_request(kp.ApiKey.HEARTBEAT, 0, 1, "c", kp.HeartbeatRequest(group_id="g"), out)
    size = len(out)
    with pytest.raises(EncodeError):
        kp.encode_request(kp.ApiKey.PRODUCE, 8, 2, "c", _produce(index=2**40), out)
    assert len(out) == size


def test_encode_error_drops_the_values_it_referenced():
    out = kp.WriteBuffer(splice_min=100)
    kp.encode_request(kp.ApiKey.PRODUCE, 8, 1, "c", _produce(records=b"a" * 100), out)
    before = out.getvalue()
    failing = kp.ProduceRequest(acks=1, timeout_ms=100, topic_data=[kp.ProduceRequest.TopicProduceData(
        name="t", partition_data=[kp.ProduceRequest.PartitionProduceData(index=0, records=b"b" * 200),
                                  kp.ProduceRequest.PartitionProduceData(index=2**40, records=b"c")])])
    with pytest.raises(EncodeError):
        kp.encode_request(kp.ApiKey.PRODUCE, 8, 2, "c", failing, out)
    assert out.getvalue() == before and len(out) == len(before)
    assert [bytes(part) for part in out.parts()][1] == b"a" * 100


def test_nullability_follows_the_version():
    request = kp.MetadataRequest(topics=None)
    with pytest.raises(EncodeError, match="null is not allowed"):
        kp.encode_request(kp.ApiKey.METADATA, 0, 1, "c", request)     # v0 has no null topics
    header, decoded = kp.decode_request(bytes(kp.encode_request(kp.ApiKey.METADATA, 1, 1, "c", request))[4:])
    assert decoded.topics is None


def test_other_integer_types_are_range_checked():
    cases = [
        (kp.FindCoordinatorRequest(key_type=128), 1, "int8"),
        (kp.DescribeConfigsRequest(resources=[kp.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name="t", configuration_keys=[1])]), 1, "needs a str"),
        (kp.InitProducerIdRequest(producer_id=2**63), 3, "int64"),
        (kp.EndTxnRequest(committed="yes"), 0, "bool"),
        (kp.EndTxnRequest(committed=2), 0, "bool"),
        (kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(topic_id="x")]), 10, "uuid"),
    ]
    for request, version, words in cases:
        with pytest.raises(EncodeError, match=words):
            kp.encode_request(request.API_KEY, version, 1, "c", request)


def test_classic_strings_are_limited_to_int16_lengths():
    kp.encode_request(kp.ApiKey.HEARTBEAT, 3, 1, "c", kp.HeartbeatRequest(group_id="x" * 32767))
    with pytest.raises(EncodeError, match="int16 length"):
        kp.encode_request(kp.ApiKey.HEARTBEAT, 3, 1, "c", kp.HeartbeatRequest(group_id="x" * 32768))
    # compact strings have no such limit
    frame = kp.encode_request(kp.ApiKey.HEARTBEAT, 4, 1, "c", kp.HeartbeatRequest(group_id="x" * 40000))
    assert kp.decode_request(bytes(frame)[4:])[1].group_id == "x" * 40000


def test_tagged_fields_of_any_size():
    """A tagged value longer than 127 bytes needs a multi-byte size varint (the encoder shifts the value)."""
    for count in (0, 1, 20, 200, 3000):
        response = kp.FetchResponse(node_endpoints=[
            kp.FetchResponse.NodeEndpoint(node_id=i, host="host-%d" % i, port=9092, rack=None) for i in range(count)])
        frame = bytes(kp.encode_response(kp.ApiKey.FETCH, 16, 1, response))[4:]
        assert kp.decode_response(kp.ApiKey.FETCH, 16, frame)[1] == response


# ---------------------------------------------------------------------------------------------------------
# Struct classes
# ---------------------------------------------------------------------------------------------------------

def test_struct_classes_behave_like_records():
    topic = kp.MetadataRequest.MetadataRequestTopic
    a, b = kp.MetadataRequest(), kp.MetadataRequest()
    assert a == b and a.topics == [] and a.topics is not b.topics          # fresh mutable defaults
    assert a.allow_auto_topic_creation is True                              # the schema's default
    a.topics.append(topic(name="x"))
    assert a != b
    assert "MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(" in repr(a)
    assert kp.MetadataRequest(topics=[topic(name="x")]) == a
    with pytest.raises(TypeError, match="unexpected field.*nope"):
        kp.MetadataRequest(nope=1)
    assert not hasattr(a, "__dict__")
    with pytest.raises(AttributeError):
        a.nope = 1
    with pytest.raises(TypeError):
        hash(a)
    assert kp.FetchResponse.PartitionData().current_leader == kp.FetchResponse.LeaderIdAndEpoch(leader_id=-1,
                                                                                                leader_epoch=-1)
    assert a.to_dict() == {"topics": [{"topic_id": ZERO_UUID, "name": "x"}], "allow_auto_topic_creation": True,
                           "include_cluster_authorized_operations": False,
                           "include_topic_authorized_operations": False}
    assert kp.ProduceRequest.API_KEY == 0 and kp.MetadataResponse.API_NAME == "Metadata"


def test_structs_copy_and_pickle():
    request = kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(name="x", topic_id=uuid.uuid4())])
    deep = copy.deepcopy(request)
    assert deep == request and deep.topics is not request.topics
    assert copy.copy(request).topics is request.topics
    assert pickle.loads(pickle.dumps(request)) == request


def test_fields_absent_from_a_version_decode_to_defaults():
    response = kp.MetadataResponse(throttle_time_ms=5, cluster_id="c", brokers=[
        kp.MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1, rack="r")])
    frame = bytes(kp.encode_response(kp.ApiKey.METADATA, 0, 1, response))[4:]
    decoded = kp.decode_response(kp.ApiKey.METADATA, 0, frame)[1]
    assert decoded.throttle_time_ms == 0 and decoded.cluster_id is None and decoded.controller_id == -1
    assert decoded.brokers[0].rack is None and decoded.brokers[0].host == "h"


def test_unknown_tagged_fields_are_skipped():
    body = bytes(native.encode_message(kp.body_codec(kp.ApiKey.HEARTBEAT, 4, True),
                                       kp.HeartbeatResponse(error_code=27)))
    assert body[-1] == 0                                 # empty tagged-field section
    extended = body[:-1] + bytes([2, 5, 3]) + b"abc" + bytes([200, 1, 1]) + b"z"   # tags 5 and 200
    decoded = native.decode_message(kp.body_codec(kp.ApiKey.HEARTBEAT, 4, True), extended)
    assert decoded == kp.HeartbeatResponse(error_code=27)


def test_versions_table_and_negotiation():
    assert kp.SUPPORTED_VERSIONS[kp.ApiKey.PRODUCE] == (0, 13)
    assert kp.SUPPORTED_VERSIONS[kp.ApiKey.FETCH] == (0, 18)
    assert kp.highest_common_version(kp.ApiKey.FETCH, 4, 17) == 17
    assert kp.highest_common_version(kp.ApiKey.FETCH, 4, 99) == 18
    with pytest.raises(IncompatibleBrokerVersion, match="no common version of Fetch"):
        kp.highest_common_version(kp.ApiKey.FETCH, 19, 20)
    with pytest.raises(IncompatibleBrokerVersion):
        kp.highest_common_version(1000, 0, 1)
    answer = kp.ApiVersionsResponse(api_keys=[
        kp.ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=11),
        kp.ApiVersionsResponse.ApiVersion(api_key=1, min_version=19, max_version=20),
        kp.ApiVersionsResponse.ApiVersion(api_key=1000, min_version=0, max_version=0)])
    assert kp.negotiate_versions(answer) == {0: 11}


TANSU_0_6_0 = {  # advertised by Tansu 0.6.0 (shared/docs/protocols/kafka.md)
    18: 4, 0: 11, 1: 17, 2: 9, 3: 12, 8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5, 16: 5, 17: 1,
    36: 2, 19: 7, 20: 6, 21: 2, 22: 5, 24: 5, 25: 4, 26: 4, 28: 4, 32: 4, 42: 2, 60: 1,
}


def test_supported_versions_cover_tansu_and_kafka_python():
    for api_key, (low, high) in kp.SUPPORTED_VERSIONS.items():
        assert low == 0
        assert high >= TANSU_0_6_0.get(api_key, 0)
        assert high >= KAFKA_PYTHON[(api_key, "request")].max_version


def test_schema_notation_errors():
    from fastmq.kafka.protocol.schema import SchemaSyntaxError
    good = "X 99 versions=0-1 flexible=1+\nrequest\n  a: int32 0+\nresponse\n  b: []S 0+\n    c: string 0+\n"
    api = parse_api(good)
    assert api.response.root.fields[0].struct.name == "S"
    for bad in (good.replace("int32", "int33"), good.replace("  c: string 0+\n", ""),
                good.replace("a: int32 0+", "a: int32 0+ nullable"), good.replace("a: int32 0+", "a: int32 0+ tag=1"),
                good.replace("request\n", "")):
        with pytest.raises(SchemaSyntaxError):
            parse_api(bad)


# ---------------------------------------------------------------------------------------------------------
# Bad input: only fastmq's ProtocolError subclasses, never a large allocation
# ---------------------------------------------------------------------------------------------------------

def _decode_frame(api_key, version, kind, frame):
    if kind == "request":
        return kp.decode_request(frame)
    return kp.decode_response(api_key, version, frame)


def _valid_frame(api_key, version, kind, obj) -> bytes:
    if kind == "request":
        return bytes(kp.encode_request(api_key, version, 5, "fuzz", obj))[4:]
    return bytes(kp.encode_response(api_key, version, 5, obj))[4:]


@pytest.mark.parametrize("api_key, version, kind", ALL_MESSAGES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_fuzz_decoders(api_key, version, kind, data):
    obj = data.draw(message_values(api_key, version, kind))
    frame = _valid_frame(api_key, version, kind, obj)
    mode = data.draw(st.sampled_from(["truncate", "flip", "overwrite", "random", "append"]))
    if mode == "truncate":
        cut = data.draw(st.integers(0, len(frame) - 1))
        damaged = frame[:cut]
    elif mode == "flip":
        position = data.draw(st.integers(0, len(frame) - 1))
        damaged = frame[:position] + bytes([frame[position] ^ data.draw(st.integers(1, 255))]) + frame[position + 1:]
    elif mode == "overwrite":
        position = data.draw(st.integers(0, len(frame) - 1))
        damaged = frame[:position] + data.draw(st.binary(min_size=1, max_size=8)) + frame[position + 8:]
    elif mode == "append":
        damaged = frame + data.draw(st.binary(min_size=1, max_size=8))
    else:
        prefix = frame[:8] if kind == "request" else frame[:4]   # keep the header so the body decoder runs
        damaged = prefix + data.draw(st.binary(max_size=64))
    try:
        _decode_frame(api_key, version, kind, damaged)
    except ProtocolError:
        pass
    if mode == "truncate":
        try:
            _, body = _decode_frame(api_key, version, kind, damaged)
        except ProtocolError:
            pass
        else:
            # Only a whole v0 UNSUPPORTED_VERSION-style answer may hide in a cut ApiVersions response: the
            # decoder reads a failed answer as v0, as Kafka's clients do (decode_response).
            assert api_key == kp.ApiKey.API_VERSIONS and kind == "response" and body.error_code != 0
            assert kp.decode_response(api_key, 0, damaged)[1] == body
    if mode == "append" and not (api_key == kp.ApiKey.API_VERSIONS and kind == "response"):
        with pytest.raises(CorruptDataError, match="left after the end"):
            _decode_frame(api_key, version, kind, damaged)


@pytest.mark.parametrize("compact", [False, True])
def test_forged_counts_allocate_nothing(compact):
    # MetadataResponse with a brokers array claiming 2**31-2 elements, and nothing after it.
    version = 9 if compact else 1
    count = b"\xff\xff\xff\xff\x07" if compact else struct.pack(">i", 2**31 - 1)
    prefix = struct.pack(">i", 1) + (b"\x00" if compact else b"") + (struct.pack(">i", 0) if version >= 3 else b"")
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedError, match="array brokers"):
            kp.decode_response(kp.ApiKey.METADATA, version, prefix + count + b"\x00" * 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_forged_lengths_and_nulls():
    # SaslHandshakeResponse v0: correlation id | error_code int16 | mechanisms: int32 count, int16-length strings
    head = struct.pack(">ih", 1, 0)
    cases = [
        (head + struct.pack(">ih", 1, 1000) + b"ab", TruncatedError),       # string longer than the frame
        (head + struct.pack(">ih", 1, -2), CorruptDataError),               # negative length
        (head + struct.pack(">ih", 1, -1), CorruptDataError),               # null element
        (head + struct.pack(">i", -5), CorruptDataError),                   # negative count
        (head + struct.pack(">i", -1), CorruptDataError),                   # null array, not nullable
        (head + struct.pack(">ih", 1, 2) + b"\xff\xfe", CorruptDataError),   # not UTF-8
    ]
    for frame, error in cases:
        with pytest.raises(error):
            kp.decode_response(kp.ApiKey.SASL_HANDSHAKE, 0, frame)


def test_tagged_field_size_must_match_its_value():
    body = bytes(native.encode_message(kp.body_codec(kp.ApiKey.API_VERSIONS, 3, True),
                                       kp.ApiVersionsResponse(finalized_features_epoch=5)))
    # the last tagged field is finalized_features_epoch (tag 1, int64): announce 9 bytes instead of 8
    index = body.index(bytes([1, 8]) + struct.pack(">q", 5))
    forged = body[:index] + bytes([1, 9]) + struct.pack(">q", 5) + b"\x00" + body[index + 10:]
    with pytest.raises(CorruptDataError, match="announces 9 bytes"):
        native.decode_message(kp.body_codec(kp.ApiKey.API_VERSIONS, 3, True), forged)


def test_decoders_refuse_non_buffers():
    with pytest.raises(TypeError):
        kp.decode_response(kp.ApiKey.METADATA, 1, "not bytes")


SYNTHETIC = parse_api("""
Synthetic 999 versions=0-2 flexible=1+
request
  a_bool: bool 0+
  an_int8: int8 0+
  an_int16: int16 0+ =-1
  a_uint16: uint16 0+
  an_int32: int32 0+
  a_uint32: uint32 0+
  an_int64: int64 0+
  a_float: float64 0+
  an_id: uuid 0+
  a_string: string 0+ nullable=0+ =null
  some_bytes: bytes 0+ nullable=1+
  some_records: records 0+ nullable=0+
  ints: []int64 0+ nullable=2+
  names: []string 0+
  ids: []uuid 1+
  items: []Item 0+
    key: string 0+
    inner: Inner 1+ tag=3
      level: int16 1+ =7
  late: string 2+ tag=0 =null
response
  error_code: int16 0+
""")


def _synthetic_codec(version: int):
    from fastmq.kafka.protocol.compiler import compile_message
    from fastmq.kafka.protocol.structs import make_message_classes
    if SYNTHETIC.request.root.cls is None:
        make_message_classes(SYNTHETIC.request, module=__name__)
        make_message_classes(SYNTHETIC.response, module=__name__)
    return compile_message(SYNTHETIC.request, version)


@pytest.mark.parametrize("version", [0, 1, 2])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_every_wire_type_round_trips(version, data):
    codec = _synthetic_codec(version)
    obj = data.draw(struct_values(SYNTHETIC.request.root, version, SYNTHETIC.is_flexible(version)))
    encoded = native.encode_message(codec, obj)
    assert native.decode_message(codec, encoded) == obj
    for cut in range(0, len(encoded), max(1, len(encoded) // 7)):
        with pytest.raises(ProtocolError):
            native.decode_message(codec, bytes(encoded)[:cut])


def test_synthetic_defaults_and_ranges():
    codec = _synthetic_codec(2)
    cls = SYNTHETIC.request.root.cls
    obj = cls()
    assert (obj.an_int16, obj.a_string, obj.some_bytes, obj.some_records, obj.a_float) == (-1, None, b"", None, 0.0)
    assert cls.Item().inner == cls.Inner(level=7)
    assert native.decode_message(codec, native.encode_message(codec, obj)) == obj
    for field_name, value, words in [("a_uint16", -1, "uint16"), ("a_uint16", 65536, "uint16"),
                                     ("a_uint32", 2**32, "uint32"), ("a_float", "1.5", "float64"),
                                     ("ids", [b"x" * 16], "uuid"), ("some_bytes", 5, "bytes-like")]:
        with pytest.raises(EncodeError, match=words):
            native.encode_message(codec, cls(**{field_name: value}))
    assert native.decode_message(codec, native.encode_message(codec, cls(a_float=3))).a_float == 3.0


def test_short_frames():
    for frame in (b"", b"\x00\x01\x00", b"\x00" * 7):
        with pytest.raises(TruncatedError):
            kp.decode_request(frame)
    with pytest.raises(TruncatedError):
        kp.peek_correlation_id(b"\x00\x00\x01")
    with pytest.raises(TruncatedError):
        kp.decode_response(kp.ApiKey.HEARTBEAT, 4, b"\x00\x00\x00\x01")
