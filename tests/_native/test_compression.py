"""Kafka's codecs: round trips, kafka-python's codec as an oracle both ways, bounded decompression, fuzz."""
from __future__ import annotations

import os
import tracemalloc

import cramjam
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from fastmq._native.compression import compress, decompress
from fastmq.errors import CompressionError, UnsupportedCodecError

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
ORACLE = {
    GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
    SNAPPY: (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
    LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
    ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
}
# Mixed content: compressible runs around incompressible noise, spanning several 32/64 KiB blocks.
SAMPLE = os.urandom(1000) + b"fastmq record payload " * 9000 + os.urandom(70000)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_ours_and_we_read_theirs(codec):
    encode, decode = ORACLE[codec]
    assert bytes(decode(compress(codec, SAMPLE))) == SAMPLE
    assert decompress(codec, encode(SAMPLE)) == SAMPLE


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=200000))
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


def test_alternative_framings_are_read():
    # librdkafka-style raw snappy, Kafka 0.8's broken LZ4 header checksum, zstd without a content size,
    # several gzip members back to back.
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(SAMPLE))) == SAMPLE
    assert decompress(LZ4, kafka_codec.lz4_encode_old_kafka(SAMPLE)) == SAMPLE
    assert decompress(ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)) == SAMPLE
    assert decompress(GZIP, compress(GZIP, b"one") + compress(GZIP, b"two")) == b"onetwo"


def test_lz4_blocks_are_independent_and_incompressible_blocks_stored():
    frame = compress(LZ4, os.urandom(200000))
    assert frame[4] & 0x20          # FLG: block independence, as Java's KafkaLZ4BlockInputStream requires
    assert decompress(LZ4, frame) == decompress(LZ4, frame)
    linked = bytearray(frame)
    linked[4] &= ~0x20
    with pytest.raises(CompressionError):
        decompress(LZ4, bytes(linked))


@pytest.mark.parametrize("codec", CODECS)
def test_output_bound_is_enforced_without_allocating(codec):
    bomb = compress(codec, bytes(8 * 1024 * 1024))
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError):
            decompress(codec, bomb, max_size=64 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024


def test_forged_sizes_are_refused_before_allocation():
    forged_snappy = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10           # preamble: 4 GiB
    forged_zstd = bytearray(zstandard.ZstdCompressor().compress(b"x" * 100))
    forged_zstd[4] = 0xE0                                             # FCS field of 8 bytes, single segment
    forged_zstd[5:13] = (2**40).to_bytes(8, "little")
    tracemalloc.start()
    try:
        for codec, data in ((SNAPPY, forged_snappy), (ZSTD, bytes(forged_zstd))):
            with pytest.raises(CompressionError):
                decompress(codec, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


@pytest.mark.parametrize("codec", CODECS)
def test_truncation_is_an_error(codec):
    data = compress(codec, SAMPLE)
    for cut in (1, 5, 17, len(data) // 2, len(data) - 1):
        with pytest.raises(CompressionError):
            decompress(codec, data[:cut])


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=3000), flips=st.lists(st.integers(min_value=0), max_size=4))
def test_garbage_and_corruption_raise_only_compression_errors(codec, data, flips):
    corrupted = bytearray(compress(codec, data))
    for flip in flips:
        corrupted[flip % len(corrupted)] ^= 0x5A
    for candidate in (bytes(corrupted), data):
        try:
            out = decompress(codec, candidate, max_size=1 << 20)
        except CompressionError:
            continue
        assert len(out) <= 1 << 20


def test_unknown_codecs():
    with pytest.raises(UnsupportedCodecError):
        compress(7, b"x")
    with pytest.raises(UnsupportedCodecError):
        decompress(0, b"x")
