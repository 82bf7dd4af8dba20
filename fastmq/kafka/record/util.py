"""kafka-python's kafka.record.util: zigzag varints and checksums, compiled."""
from __future__ import annotations

from typing import TYPE_CHECKING

from fastmq._native.checksum import crc32, crc32c
from fastmq._native.varint import decode_varint, encode_varint, size_of_varint

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["calc_crc32", "calc_crc32c", "decode_varint", "encode_varint", "size_of_varint"]

# kafka-python's two CRC-32C implementations (pure Python, and the crc32c package's); fastmq has one.
crc32c_py = crc32c_c = crc32c


def calc_crc32c(memview: Buffer) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object."""
    return crc32c(memview)


def calc_crc32(memview: Buffer) -> int:
    """zlib's CRC-32 of a bytes-like object, as an unsigned int."""
    return crc32(memview)
