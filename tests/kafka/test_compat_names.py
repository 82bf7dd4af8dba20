"""kafka-python code imports kafka.errors, kafka.codec, kafka.structs and kafka.record: each public name of
those modules (kafka-python 3.x, installed as the oracle) exists in fastmq's module of the same role, with the
same meaning."""
from __future__ import annotations

import importlib
import inspect
import types

import pytest

import kafka
from fastmq.kafka import codec as our_codec
from fastmq.kafka import errors as our_errors
from fastmq.kafka import structs as our_structs

# kafka-python's module -> fastmq's.
FACES = {
    "kafka.errors": "fastmq.kafka.errors",
    "kafka.codec": "fastmq.kafka.codec",
    "kafka.structs": "fastmq.kafka.structs",
    "kafka.record": "fastmq.kafka.record",
    "kafka.record.abc": "fastmq.kafka.record.abc",
    "kafka.record.default_records": "fastmq.kafka.record.default_records",
    "kafka.record.legacy_records": "fastmq.kafka.record.legacy_records",
    "kafka.record.memory_records": "fastmq.kafka.record.memory_records",
    "kafka.record.util": "fastmq.kafka.record.util",
}


def public_names(module: types.ModuleType) -> list[str]:
    """Names a user can import from the module: not private, not a module it imported."""
    return sorted(name for name, value in vars(module).items()
                  if not name.startswith("_") and not isinstance(value, types.ModuleType))


def exception_classes(module: types.ModuleType) -> dict[str, type]:
    return {name: value for name in public_names(module)
            if isinstance(value := getattr(module, name), type) and issubclass(value, BaseException)}


def test_kafka_python_major_version_is_3():
    assert kafka.__version__.split(".")[0] == "3"


@pytest.mark.parametrize("theirs", sorted(FACES))
def test_every_public_name_exists(theirs):
    their_module = importlib.import_module(theirs)
    our_module = importlib.import_module(FACES[theirs])
    names = public_names(their_module)
    assert names, f"{theirs} lists no public name: the enumeration is broken"
    assert [name for name in names if not hasattr(our_module, name)] == []


def test_errors_have_kafka_pythons_codes_flags_and_hierarchy():
    import kafka.errors as their_errors

    theirs = exception_classes(their_errors)
    assert len(theirs) > 100
    for name, their_class in theirs.items():
        ours = getattr(our_errors, name)
        for attribute in ("errno", "retriable", "invalid_metadata", "message"):
            assert getattr(ours, attribute, None) == getattr(their_class, attribute, None), (name, attribute)
        for other_name, other in theirs.items():
            assert issubclass(ours, getattr(our_errors, other_name)) == issubclass(their_class, other), \
                f"{name} subclass of {other_name}"
    # kafka-python's table also files its code-less AuthorizationError under None (how it collects the
    # table); no broker answer has that code.
    their_table = {code: cls for code, cls in their_errors.kafka_errors.items() if code is not None}
    assert {code: cls.__name__ for code, cls in our_errors.kafka_errors.items()} == \
        {code: cls.__name__ for code, cls in their_table.items()}
    for code, their_class in their_table.items():
        assert our_errors.for_code(code).__name__ == their_class.__name__


def test_structs_have_the_same_fields_and_defaults():
    import kafka.structs as their_structs

    for name in public_names(their_structs):
        theirs, ours = getattr(their_structs, name), getattr(our_structs, name)
        if hasattr(theirs, "_fields"):
            assert ours._fields == theirs._fields, name
            assert ours._field_defaults == theirs._field_defaults, name
    members = [n for n in vars(their_structs.MemberState) if not n.startswith("_")]
    assert members and all(getattr(our_structs.MemberState, n) == getattr(their_structs.MemberState, n)
                           for n in members)


def test_codec_functions_take_the_same_arguments_and_interoperate():
    import kafka.codec as their_codec

    functions = [n for n in public_names(their_codec) if inspect.isfunction(getattr(their_codec, n))]
    assert "lz4_encode_old_kafka" in functions
    for name in functions:
        their_parameters = list(inspect.signature(getattr(their_codec, name)).parameters)
        assert list(inspect.signature(getattr(our_codec, name)).parameters) == their_parameters, name
    assert our_codec.ZSTD_MAX_OUTPUT_SIZE == their_codec.ZSTD_MAX_OUTPUT_SIZE
    assert our_codec.PYPY == their_codec.PYPY
    payloads = [b"", b"x", bytes(range(256)) * 300, b"kafka " * 10_000]
    pairs = [("gzip_encode", "gzip_decode"), ("snappy_encode", "snappy_decode"), ("lz4_encode", "lz4_decode"),
             ("zstd_encode", "zstd_decode"), ("lz4_encode_old_kafka", "lz4_decode_old_kafka"),
             ("lz4_encode", "lz4f_decode")]
    for encode, decode in pairs:
        for payload in payloads:
            ours_encoded = getattr(our_codec, encode)(payload)
            assert getattr(our_codec, decode)(ours_encoded) == payload, (encode, payload[:8])
            assert getattr(our_codec, decode)(getattr(their_codec, encode)(payload)) == payload, encode
            # kafka-python's lz4f_decode needs the lz4f package; both write the same bytes for an empty snappy
            # payload, which kafka-python cannot read back.
            if decode != "lz4f_decode" and not (encode == "snappy_encode" and payload == b""):
                assert getattr(their_codec, decode)(ours_encoded) == payload, (encode, payload[:8])


def test_old_kafka_lz4_is_refused_cleanly_when_cut():
    with pytest.raises(ValueError):
        our_codec.lz4_decode_old_kafka(b"\x04\x22")
    with pytest.raises(Exception) as caught:
        our_codec.lz4_decode_old_kafka(our_codec.lz4_encode_old_kafka(b"abc" * 100)[:9])
    assert not isinstance(caught.value, (SystemError, MemoryError))
