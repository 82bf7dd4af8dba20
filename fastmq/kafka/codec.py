"""kafka-python's kafka.codec: codec availability and whole-buffer encode/decode helpers.

fastmq's codecs are hard dependencies, so every has_* is True; the compat record builders still consult
these functions when they build, so code that patches them (as kafka-python's own tests do) sees the same
UnsupportedCodecError.
"""
from __future__ import annotations

from fastmq._native.compression import compress, decompress

CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 1, 2, 3, 4


def has_gzip() -> bool:
    return True


def has_snappy() -> bool:
    return True


def has_lz4() -> bool:
    return True


def has_zstd() -> bool:
    return True


def gzip_encode(payload, compresslevel: int | None = None) -> bytes:
    return compress(CODEC_GZIP, payload, -1 if compresslevel is None else compresslevel)


def gzip_decode(payload) -> bytes:
    return bytes(decompress(CODEC_GZIP, payload))


def snappy_encode(payload, xerial_compatible: bool = True, xerial_blocksize: int = 32 * 1024) -> bytes:
    """Snappy with the xerial framing Kafka's Java client reads (the only framing fastmq writes)."""
    if not xerial_compatible or xerial_blocksize != 32 * 1024:
        raise ValueError("fastmq writes snappy only with xerial framing and 32 KiB blocks")
    return compress(CODEC_SNAPPY, payload)


def snappy_decode(payload) -> bytes:
    return bytes(decompress(CODEC_SNAPPY, payload))


def lz4_encode(payload) -> bytes:
    return compress(CODEC_LZ4, payload)


def lz4_decode(payload) -> bytes:
    return bytes(decompress(CODEC_LZ4, payload))


def zstd_encode(payload) -> bytes:
    return compress(CODEC_ZSTD, payload)


def zstd_decode(payload) -> bytes:
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
