"""The buffer core through its Python face: WriteBuffer, ReadBuffer and the zigzag varint table."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq._native.buffer import ReadBuffer, WriteBuffer
from fastmq._native.varint import decode_varint, encode_varint, size_of_varint
from fastmq.errors import TruncatedError

# Zigzag varints (protobuf sint64 / Kafka record fields): value -> encoding.
ZIGZAG_TABLE = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), ZIGZAG_TABLE)
def test_zigzag_table(value, encoded):
    out = bytearray()
    assert encode_varint(value, out.append) == len(encoded) // 2
    assert out.hex() == encoded
    assert size_of_varint(value) == len(out)
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(out))
    buf = WriteBuffer()
    buf.write_varint(value)
    assert buf.getvalue().hex() == encoded


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.binary(max_size=8))
def test_varint_round_trip_after_prefix(value, prefix):
    buf = WriteBuffer()
    buf.write(prefix)
    buf.write_varint(value)
    data = buf.getvalue()
    assert decode_varint(data, len(prefix)) == (value, len(data))


@pytest.mark.parametrize("bits", range(64))
def test_varint_sizes_at_every_width(bits):
    # Each value where one more 7-bit group starts, and its neighbours.
    for value in {2**bits - 1, 2**bits, 2**bits + 1, -(2**bits), -(2**bits) - 1}:
        if -(2**63) <= value < 2**63:
            out = bytearray()
            encode_varint(value, out.append)
            assert size_of_varint(value) == len(out)


def test_decode_varint_errors_match_kafka_python():
    with pytest.raises(IndexError):
        decode_varint(b"\x80\x80")
    with pytest.raises(ValueError):
        decode_varint(b"\xff" * 11)


@given(st.lists(st.tuples(st.sampled_from(["i8", "i16", "i32", "u32", "i64", "uvarint", "bytes"]),
                          st.integers(min_value=0, max_value=2**63 - 1), st.binary(max_size=300)),
                max_size=50))
def test_write_buffer_matches_struct(ops):
    import struct

    buf = WriteBuffer(16)
    expected = bytearray()
    formats = {"i8": ">b", "i16": ">h", "i32": ">i", "u32": ">I", "i64": ">q"}
    limits = {"i8": 8, "i16": 16, "i32": 32, "u32": 32, "i64": 64}
    for kind, number, blob in ops:
        if kind == "bytes":
            buf.write(blob)
            expected += blob
        elif kind == "uvarint":
            buf.write_uvarint(number)
            n = number
            while n >= 0x80:
                expected.append((n & 0x7F) | 0x80)
                n >>= 7
            expected.append(n)
        else:
            bits = limits[kind]
            value = number % (2**bits)
            if kind != "u32" and value >= 2 ** (bits - 1):
                value -= 2**bits
            getattr(buf, f"write_{dict(i8='int8', i16='int16', i32='int32', u32='uint32', i64='int64')[kind]}")(value)
            expected += struct.pack(formats[kind], value)
    assert len(buf) == len(expected)
    assert buf.getvalue() == bytes(expected)
    assert bytes(memoryview(buf)) == bytes(expected)
    assert buf.detach() == expected
    assert len(buf) == 0


@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(min_value=1, max_value=30))
def test_spliced_parts_read_back_in_order(blobs, splice_min):
    buf = WriteBuffer(16, splice_min=splice_min)
    for blob in blobs:
        buf.write(blob)
        buf.write_int8(7)
    expected = b"".join(blob + b"\x07" for blob in blobs)
    assert len(buf) == len(expected)
    assert b"".join(bytes(part) for part in buf.parts()) == buf.getvalue() == expected
    # Large blobs are referenced, not copied.
    referenced = [part for part in buf.parts() if not isinstance(part, memoryview)]
    assert referenced == [blob for blob in blobs if len(blob) >= splice_min]


def test_a_buffer_with_references_is_read_only_through_its_parts():
    blob = bytearray(b"z" * 64)
    buf = WriteBuffer(16, splice_min=32)
    buf.write(b"head")
    buf.write(blob)
    for refused in (memoryview, lambda b: b.detach()):
        with pytest.raises(BufferError, match="parts"):
            refused(buf)
    assert buf.parts()[1] is blob
    buf.reset()
    buf.write(b"plain")
    assert bytes(memoryview(buf)) == b"plain"


def test_detach_hands_the_storage_over_and_the_next_write_starts_afresh():
    buf = WriteBuffer(64)
    buf.write(b"first")
    first = buf.detach()
    assert first == b"first" and len(buf) == 0
    assert buf.detach() == b""
    buf.write(b"x" * 200)
    assert buf.detach() == b"x" * 200 and first == b"first"


def test_write_buffer_refuses_to_grow_under_a_view():
    buf = WriteBuffer(16)
    buf.write(b"x" * 16)
    view = memoryview(buf)
    with pytest.raises(BufferError):
        buf.write(b"more")
    assert bytes(view) == b"x" * 16
    view.release()
    buf.write(b"more")
    assert buf.getvalue() == b"x" * 16 + b"more"


@given(st.lists(st.binary(max_size=5000), max_size=30), st.data())
def test_read_buffer_preserves_the_stream(chunks, data):
    buf = ReadBuffer(64)
    stream = b"".join(chunks)
    received = bytearray()
    for chunk in chunks:
        if data.draw(st.booleans()):
            buf.feed(chunk)
        else:
            view = buf.writable(max(len(chunk), 1))
            view[: len(chunk)] = chunk
            buf.commit(len(chunk))
        take = data.draw(st.integers(min_value=0, max_value=len(buf)))
        assert buf.peek(take) == stream[len(received):len(received) + take]
        received += buf.read(take)
    received += buf.read(len(buf))
    assert bytes(received) == stream


def test_read_buffer_underflow_and_bad_commit():
    buf = ReadBuffer()
    buf.feed(b"abc")
    with pytest.raises(TruncatedError):
        buf.read(4)
    with pytest.raises(ValueError):
        buf.commit(10**9)
    assert buf.read(3) == b"abc"
