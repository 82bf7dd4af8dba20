"""kafka-python's kafka.codec: codec availability and whole-buffer encode/decode helpers.

fastmq's codecs are hard dependencies, so every has_* is True; the compat record builders still consult
these functions when they build, so code that patches them (as kafka-python's own tests do) sees the same
UnsupportedCodecError.
"""
from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from fastmq._native.compression import compress, decompress
from fastmq._native.hashing import xxhash32

if TYPE_CHECKING:
    from typing_extensions import Buffer

CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 1, 2, 3, 4
PYPY = platform.python_implementation() == "PyPy"
# kafka-python's bound on one zstd-decoded buffer (its name is public; fastmq bounds decoding per batch).
ZSTD_MAX_OUTPUT_SIZE = 1024 * 1024
# kafka-python's slots for optional LZ4 libraries it may import; fastmq uses its own LZ4 and none of them.
lz4f = lz4framed = None


def has_gzip() -> bool:
    return True


def has_snappy() -> bool:
    return True


def has_lz4() -> bool:
    return True


def has_zstd() -> bool:
    return True


def gzip_encode(payload: Buffer, compresslevel: int | None = None) -> bytes:
    return compress(CODEC_GZIP, payload, -1 if compresslevel is None else compresslevel)


def gzip_decode(payload: Buffer) -> bytes:
    return bytes(decompress(CODEC_GZIP, payload))


def snappy_encode(payload: Buffer, xerial_compatible: bool = True, xerial_blocksize: int = 32 * 1024) -> bytes:
    """Snappy with the xerial framing Kafka's Java client reads (the only framing fastmq writes)."""
    if not xerial_compatible or xerial_blocksize != 32 * 1024:
        raise ValueError("fastmq writes snappy only with xerial framing and 32 KiB blocks")
    return compress(CODEC_SNAPPY, payload)


def snappy_decode(payload: Buffer) -> bytes:
    return bytes(decompress(CODEC_SNAPPY, payload))


def lz4_encode(payload: Buffer, **kwargs: int | bool) -> bytes:
    """One LZ4 frame of independent blocks. kwargs are lz4.frame's options as kafka-python passes them on:
    compression_level is honoured, block_linked may only be False (what Kafka reads), others are refused."""
    level = kwargs.pop("compression_level", -1)
    if kwargs.pop("block_linked", False):
        raise ValueError("Kafka reads LZ4 frames of independent blocks only (block_linked=False)")
    if kwargs:
        raise TypeError(f"lz4_encode takes no {', '.join(sorted(kwargs))} option")
    return compress(CODEC_LZ4, payload, level)


def lz4_decode(payload: Buffer) -> bytes:
    return bytes(decompress(CODEC_LZ4, payload))


def lz4f_decode(payload: Buffer) -> bytes:
    """Decode one LZ4 frame (the interoperable framing of Kafka >= 0.10)."""
    return lz4_decode(payload)


# Kafka 0.8/0.9 wrote LZ4 frames whose header checksum covered the 4 magic bytes too (not just the frame
# descriptor) and read no content-size field. Frame: magic(4) FLG(1) BD(1) [content size(8)] HC(1) blocks.
_LZ4_DESCRIPTOR_AT, _LZ4_CONTENT_SIZE_FLAG = 4, 0x08


def _lz4_header_checksum(header: bytes) -> int:
    return (xxhash32(header) >> 8) & 0xFF


def lz4_encode_old_kafka(payload: Buffer) -> bytes:
    """LZ4 for 0.8/0.9 brokers (message format v0): no content size, the checksum as those brokers compute it."""
    data = lz4_encode(payload)
    flags = data[_LZ4_DESCRIPTOR_AT]
    blocks_at = _LZ4_DESCRIPTOR_AT + 3 + (8 if flags & _LZ4_CONTENT_SIZE_FLAG else 0)
    header = data[:_LZ4_DESCRIPTOR_AT] + bytes([flags & ~_LZ4_CONTENT_SIZE_FLAG, data[_LZ4_DESCRIPTOR_AT + 1]])
    return header + bytes([_lz4_header_checksum(header)]) + data[blocks_at:]


def lz4_decode_old_kafka(payload: Buffer) -> bytes:
    """Decode LZ4 written by 0.8/0.9 brokers: the header checksum is recomputed as the LZ4 format has it."""
    data = bytes(payload)
    if len(data) <= _LZ4_DESCRIPTOR_AT:
        raise ValueError(f"an LZ4 frame needs more than {len(data)} bytes")
    flags = data[_LZ4_DESCRIPTOR_AT]
    checksum_at = _LZ4_DESCRIPTOR_AT + 2 + (8 if flags & _LZ4_CONTENT_SIZE_FLAG else 0)
    checksum = _lz4_header_checksum(data[_LZ4_DESCRIPTOR_AT:checksum_at])
    return lz4_decode(data[:checksum_at] + bytes([checksum]) + data[checksum_at + 1:])


def zstd_encode(payload: Buffer) -> bytes:
    return compress(CODEC_ZSTD, payload)


def zstd_decode(payload: Buffer) -> bytes:
    return bytes(decompress(CODEC_ZSTD, payload))


_AVAILABILITY = {CODEC_GZIP: ("gzip", "has_gzip"), CODEC_SNAPPY: ("snappy", "has_snappy"),
                 CODEC_LZ4: ("lz4", "has_lz4"), CODEC_ZSTD: ("zstd", "has_zstd")}


def assert_has_codec(codec: int) -> None:
    """Raise UnsupportedCodecError unless `codec` (a batch attribute value) is none or available."""
    from fastmq.kafka.errors import UnsupportedCodecError

    codec &= 0x07
    if codec == 0:
        return
    if codec not in _AVAILABILITY:
        raise UnsupportedCodecError(f"Unrecognized compression type: {codec}")
    name, checker = _AVAILABILITY[codec]
    if not globals()[checker]():
        raise UnsupportedCodecError(f"Libraries for {name} compression codec not found")
