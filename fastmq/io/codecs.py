"""Stream codecs: layers that transform a connection's bytes below the frame splitter, switched on in the
middle of a live connection (NSQ turns on snappy or deflate after IDENTIFY; Stream.start_compression).

A codec encodes what is sent (each encode() call's output can be decoded at once by the peer: deflate is
sync-flushed, snappy chunks are whole) and decodes what is received incrementally: feed() the received bytes,
then read() the decoded bytes back in pieces of at most MAX_PIECE bytes until it returns b"". Taking them in
bounded pieces lets the connection frame and dispatch each piece before decoding the next, so a small input
that inflates hugely (a decompression bomb) never sits decoded in memory at once.

Snappy framing format (github.com/google/snappy framing_format.txt), every chunk: [type u8][length u24 LE][data]
    0xff stream identifier, data "sNaPpY" (first chunk of the stream)
    0x00 compressed data:   [masked CRC-32C of the uncompressed data u32 LE][snappy block]
    0x01 uncompressed data: [masked CRC-32C u32 LE][the data]      at most 65536 uncompressed bytes per chunk
    0x02-0x7f reserved, unskippable (an error); 0x80-0xfe skippable (0xfe padding)
    masked CRC = ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32
Deflate: raw DEFLATE (RFC 1951, no zlib header), each encode() ending with a sync flush (what Go's flate writer
sends after Flush(), as nsqd and its clients do).
"""
from __future__ import annotations

import zlib
from typing import Any

import cramjam

from fastmq._native.checksum import crc32c
from fastmq.errors import CompressionError

MAX_PIECE = 65536               # the most one read() returns

SNAPPY_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
SNAPPY_MAX_UNCOMPRESSED = 65536  # the most one data chunk carries, uncompressed
_SNAPPY_COMPRESSED = 0x00
_SNAPPY_UNCOMPRESSED = 0x01
_SNAPPY_SKIPPABLE_FIRST = 0x80
_SNAPPY_IDENTIFIER_TYPE = 0xFF
_SNAPPY_HEADER = 4               # [type u8][length u24 LE]
_SNAPPY_CRC = 4
# The longest legal data chunk: the checksum and the worst-case snappy block of 65536 bytes.
_SNAPPY_MAX_CHUNK = _SNAPPY_CRC + cramjam.snappy.compress_raw_max_len(b"\0" * SNAPPY_MAX_UNCOMPRESSED)
_CRC_MASK_DELTA = 0xA282EAD8


class StreamCodec:
    """One direction pair of a byte-stream transformation; one instance per connection (it keeps state)."""

    name = ""

    def encode(self, data: Any) -> bytes:
        """The wire bytes for data (bytes-like), decodable by the peer without waiting for more."""
        raise NotImplementedError

    def feed(self, data: Any) -> None:
        """Received wire bytes (bytes-like; copied)."""
        raise NotImplementedError

    def read(self) -> bytes:
        """The next decoded bytes (at most MAX_PIECE), or b"" until more input is fed.

        Raises CompressionError (a ProtocolError: the connection is closed) for input that does not decode.
        """
        raise NotImplementedError


def masked_crc32c(data: Any) -> int:
    """The snappy framing format's checksum of data."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF


class SnappyStream(StreamCodec):
    """The snappy framing format (NSQ's "snappy" feature)."""

    name = "snappy"

    def __init__(self) -> None:
        self._identifier_sent = False
        self._input = bytearray()
        self._identifier_seen = False
        self._skipping = 0            # bytes of a skippable chunk still to drop

    def encode(self, data: Any) -> bytes:
        view = memoryview(data).cast("B")
        out: list[bytes | memoryview] = []    # uncompressed chunks go out as views of `data`
        if not self._identifier_sent:
            self._identifier_sent = True
            out.append(SNAPPY_IDENTIFIER)
        for start in range(0, len(view), SNAPPY_MAX_UNCOMPRESSED):
            chunk = view[start:start + SNAPPY_MAX_UNCOMPRESSED]
            compressed = bytes(cramjam.snappy.compress_raw(chunk))
            kind, body = ((_SNAPPY_COMPRESSED, compressed) if len(compressed) < len(chunk)
                          else (_SNAPPY_UNCOMPRESSED, chunk))
            out.append(bytes((kind,)) + (_SNAPPY_CRC + len(body)).to_bytes(3, "little")
                       + masked_crc32c(chunk).to_bytes(4, "little"))
            out.append(body)
        return b"".join(out)

    def feed(self, data: Any) -> None:
        self._input += data

    def read(self) -> bytes:
        buffer = self._input
        while True:
            if self._skipping:
                dropped = min(self._skipping, len(buffer))
                del buffer[:dropped]
                self._skipping -= dropped
                if self._skipping:
                    return b""
            if len(buffer) < _SNAPPY_HEADER:
                return b""
            kind = buffer[0]
            length = int.from_bytes(buffer[1:4], "little")
            if kind == _SNAPPY_IDENTIFIER_TYPE:
                if len(buffer) < len(SNAPPY_IDENTIFIER):
                    return b""
                if buffer[:len(SNAPPY_IDENTIFIER)] != SNAPPY_IDENTIFIER:
                    raise CompressionError("malformed snappy stream identifier chunk")
                del buffer[:len(SNAPPY_IDENTIFIER)]
                self._identifier_seen = True
                continue
            if not self._identifier_seen:
                raise CompressionError(f"the snappy stream starts with chunk type 0x{kind:02x}, "
                                       f"not the stream identifier")
            if kind >= _SNAPPY_SKIPPABLE_FIRST:
                del buffer[:_SNAPPY_HEADER]
                self._skipping = length
                continue
            if kind not in (_SNAPPY_COMPRESSED, _SNAPPY_UNCOMPRESSED):
                raise CompressionError(f"reserved unskippable snappy chunk type 0x{kind:02x}")
            limit = _SNAPPY_MAX_CHUNK if kind == _SNAPPY_COMPRESSED else _SNAPPY_CRC + SNAPPY_MAX_UNCOMPRESSED
            if not _SNAPPY_CRC <= length <= limit:
                raise CompressionError(f"snappy data chunk of {length} bytes, outside {_SNAPPY_CRC}..{limit}")
            if len(buffer) < _SNAPPY_HEADER + length:
                return b""
            expected_crc = int.from_bytes(buffer[4:8], "little")
            body = bytes(buffer[_SNAPPY_HEADER + _SNAPPY_CRC:_SNAPPY_HEADER + length])
            del buffer[:_SNAPPY_HEADER + length]
            data = self._uncompress(body) if kind == _SNAPPY_COMPRESSED else body
            if masked_crc32c(data) != expected_crc:
                raise CompressionError("snappy chunk checksum mismatch: the stream is corrupt")
            if data:
                return data

    @staticmethod
    def _uncompress(block: bytes) -> bytes:
        # The block's declared size is checked before anything is allocated for it.
        try:
            size = cramjam.snappy.decompress_raw_len(block)
            if size > SNAPPY_MAX_UNCOMPRESSED:
                raise CompressionError(f"snappy chunk declares {size} bytes, more than {SNAPPY_MAX_UNCOMPRESSED}")
            return bytes(cramjam.snappy.decompress_raw(block))
        except cramjam.DecompressionError as exc:
            raise CompressionError(f"corrupt snappy chunk: {exc}") from None


class DeflateStream(StreamCodec):
    """Raw DEFLATE with a sync flush after every encode() (NSQ's "deflate" feature)."""

    name = "deflate"

    def __init__(self, level: int = 6) -> None:
        if not -1 <= level <= 9:
            raise ValueError(f"deflate level must be in -1..9, got {level}")
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        self._input = b""
        self._output_pending = False   # the last read() stopped at MAX_PIECE: zlib may hold more output

    def encode(self, data: Any) -> bytes:
        compressor = self._compressor
        return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)

    def feed(self, data: Any) -> None:
        self._input += data

    def read(self) -> bytes:
        if not self._input and not self._output_pending:
            return b""
        decompressor = self._decompressor
        try:
            out = decompressor.decompress(self._input, MAX_PIECE)
        except zlib.error as exc:
            raise CompressionError(f"corrupt deflate stream: {exc}") from None
        self._input = decompressor.unconsumed_tail
        self._output_pending = len(out) == MAX_PIECE
        if decompressor.eof:
            raise CompressionError("the peer ended its deflate stream, which this connection does not allow")
        return out
