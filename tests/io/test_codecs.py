"""Stream codecs (fastmq.io.codecs) against independent implementations: cramjam's own snappy framing and zlib."""
from __future__ import annotations

import random
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.errors import CompressionError, ProtocolError
from fastmq.io.codecs import MAX_PIECE, SNAPPY_IDENTIFIER, DeflateStream, SnappyStream, masked_crc32c

CODECS = pytest.mark.parametrize("codec_cls", [SnappyStream, DeflateStream], ids=["snappy", "deflate"])


def decode_all(codec, wire: bytes, cuts: list[int] = ()) -> bytes:
    """Feed wire cut at the given positions, reading every piece after each feed."""
    out = []
    start = 0
    for end in sorted(set(cuts)) + [len(wire)]:
        codec.feed(wire[start:end])
        start = end
        while piece := codec.read():
            assert len(piece) <= MAX_PIECE
            out.append(piece)
    return b"".join(out)


def compressible(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(1, 8)) for _ in range(16)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


payloads = st.builds(compressible, st.integers(0, 1000), st.integers(0, 200_000)) | st.binary(max_size=2000)


@settings(max_examples=40, deadline=None)
@given(messages=st.lists(payloads, min_size=1, max_size=4), data=st.data())
def test_snappy_encoding_is_cramjam_framing_and_decodes_in_any_chunking(messages, data):
    encoder = SnappyStream()
    wire = b"".join(encoder.encode(message) for message in messages)
    assert wire.startswith(SNAPPY_IDENTIFIER)
    assert bytes(cramjam.snappy.decompress(wire)) == b"".join(messages)        # the independent decoder
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=8))
    assert decode_all(SnappyStream(), wire, cuts) == b"".join(messages)


@settings(max_examples=40, deadline=None)
@given(message=payloads, data=st.data())
def test_snappy_decodes_what_cramjam_encodes(message, data):
    wire = bytes(cramjam.snappy.compress(message))
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=8))
    assert decode_all(SnappyStream(), wire, cuts) == message


@settings(max_examples=40, deadline=None)
@given(messages=st.lists(payloads, min_size=1, max_size=4), data=st.data())
def test_deflate_is_raw_deflate_sync_flushed_and_decodes_in_any_chunking(messages, data):
    encoder = DeflateStream()
    independent = zlib.decompressobj(-15)
    wire = b""
    for message in messages:
        chunk = encoder.encode(message)
        assert chunk.endswith(b"\x00\x00\xff\xff")                  # a sync flush ends every write
        assert independent.decompress(chunk) == message             # decodable at once, by zlib
        wire += chunk
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=8))
    assert decode_all(DeflateStream(), wire, cuts) == b"".join(messages)


@CODECS
def test_a_small_input_that_inflates_hugely_comes_out_in_bounded_pieces(codec_cls):
    wire = codec_cls().encode(b"\0" * 5_000_000)
    decoder = codec_cls()
    decoder.feed(wire)
    pieces = 0
    total = 0
    while piece := decoder.read():
        assert len(piece) <= MAX_PIECE
        total += len(piece)
        pieces += 1
    assert total == 5_000_000 and pieces >= 5_000_000 // MAX_PIECE


def snappy_chunk(kind: int, body: bytes) -> bytes:
    return bytes((kind,)) + len(body).to_bytes(3, "little") + body


def test_snappy_skippable_chunks_are_skipped_even_across_feeds():
    data = b"payload after padding"
    chunk = snappy_chunk(0x01, masked_crc32c(data).to_bytes(4, "little") + data)
    wire = SNAPPY_IDENTIFIER + snappy_chunk(0xFE, b"\0" * 1000) + snappy_chunk(0x80, b"x" * 70_000) + chunk
    for cut in (5, 14, 500, 1014, 1018, 40_000, len(wire) - 3):
        assert decode_all(SnappyStream(), wire, [cut]) == data


@pytest.mark.parametrize("wire, match", [
    (snappy_chunk(0x01, b"\0" * 8), "not the stream identifier"),
    (SNAPPY_IDENTIFIER + snappy_chunk(0x02, b"xyz"), "reserved unskippable"),
    (SNAPPY_IDENTIFIER + snappy_chunk(0x01, b"\0\0\0\0data"), "checksum mismatch"),
    (SNAPPY_IDENTIFIER + snappy_chunk(0x00, b"\0\0\0\0" + b"\xff\xff\xff\xff\x0f"), "declares|corrupt"),
    (SNAPPY_IDENTIFIER + snappy_chunk(0x01, b"\0" * (65536 + 5)), "outside"),
    (SNAPPY_IDENTIFIER + snappy_chunk(0x00, b"\0\0"), "outside"),
    (b"\xff\x06\x00\x00sNaPpX", "identifier"),
])
def test_snappy_refuses_malformed_streams(wire, match):
    decoder = SnappyStream()
    decoder.feed(wire)
    with pytest.raises(CompressionError, match=match):
        while decoder.read():
            pass


def test_deflate_refuses_corrupt_and_ended_streams():
    decoder = DeflateStream()
    decoder.feed(b"\xff\xff\xff\xff")
    with pytest.raises(CompressionError, match="corrupt"):
        decoder.read()
    ended = zlib.compressobj(6, zlib.DEFLATED, -15)
    decoder = DeflateStream()
    decoder.feed(ended.compress(b"last") + ended.flush())
    with pytest.raises(CompressionError, match="ended"):
        decoder.read()


@CODECS
@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=300), prefix=st.booleans())
def test_random_input_decodes_or_raises_a_protocol_error_only(codec_cls, garbage, prefix):
    decoder = codec_cls()
    decoder.feed((SNAPPY_IDENTIFIER if prefix and codec_cls is SnappyStream else b"") + garbage)
    try:
        for _ in range(len(garbage) + 2):       # bounded: every read consumes input or ends
            if not decoder.read():
                break
    except ProtocolError:
        pass
