# cython: language_level=3
"""Kafka's four codecs, with the framings Kafka's Java client reads and writes.

gzip:   RFC 1952 members (the Java client writes one GZIPOutputStream); concatenated members are read.
snappy: xerial "blocking" framing, as Java's SnappyOutputStream writes it:
            [0x82 'SNAPPY' 0x00][i32 version=1][i32 compatible=1] then ([i32 length][raw snappy block])*,
        each block compressing at most 32 KiB. Plain raw snappy (librdkafka may write it) is read too.
lz4:    the LZ4 frame format: [u32le 0x184D2204][FLG][BD][content size u64le?][dict id u32le?][HC]
        ([u32le block size, high bit = stored][data][u32le xxh32 if FLG.block checksum])* [u32le 0]
        [u32le xxh32(content) if FLG.content checksum]. HC = (xxh32(FLG..last descriptor byte) >> 8) & 0xFF;
        Kafka 0.8-0.9 (magic 0) computed it over the magic too, so both are accepted. We write independent
        64 KiB blocks and no checksums, as Java's KafkaLZ4BlockOutputStream does; linked blocks are refused
        as Java refuses them.
zstd:   standard zstd frames.

Decompression is bounded: every codec stops with CompressionError before producing more than max_size
bytes, and sizes announced inside the data (snappy preambles, lz4 block sizes, zstd content sizes) are
checked against that bound before anything is allocated. The codec kernels (zlib, cramjam, zstandard)
release the GIL while they run.
"""
import threading
import zlib

import cramjam
import zstandard

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from fastmq._native.buffer cimport load_u32be, load_u32le, load_u64le, store_u32be, store_u32le
from fastmq._native.hashing cimport xxh32_nogil as xxh32
from fastmq.errors import CompressionError, UnsupportedCodecError

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char* mem, Py_ssize_t size, int flags)
    int PyBUF_READ
    int PyBUF_WRITE

cdef enum:
    XERIAL_HEADER_SIZE = 16
    XERIAL_BLOCK_SIZE = 32768
    LZ4_MAGIC = 0x184D2204
    LZ4_BLOCK_SIZE = 65536
    LZ4_BD_64KB = 0x40               # block max size code 4 in bits 4-6
    LZ4_FLG_VERSION_1 = 0x40
    LZ4_FLG_BLOCK_INDEPENDENT = 0x20
    LZ4_FLG_BLOCK_CHECKSUM = 0x10
    LZ4_FLG_CONTENT_SIZE = 0x08
    LZ4_FLG_CONTENT_CHECKSUM = 0x04
    LZ4_FLG_DICT_ID = 0x01
    LZ4_STORED_BIT = 0x80000000
    ZSTD_READ_CHUNK = 262144
    ZSTD_MAGIC = 0xFD2FB528
    ZSTD_SKIPPABLE_MAGIC = 0x184D2A50

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4",
               CODEC_ZSTD: "zstd"}

cdef bytes XERIAL_HEADER = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
cdef object _zstd_local = threading.local()     # ZstdCompressor contexts are not thread-safe


cdef int check_codec(int codec) except -1:
    if codec < CODEC_NONE or codec > CODEC_ZSTD:
        raise UnsupportedCodecError(f"unknown compression codec {codec}")
    return 0


cdef inline object readable(const char* data, Py_ssize_t size):
    return PyMemoryView_FromMemory(<char*>data, size, PyBUF_READ)


cdef inline object writable_tail(WriteBuffer out, Py_ssize_t size):
    # A view of `size` free bytes after what `out` holds; commit what was written with out.claim(n).
    out.ensure(size)
    return PyMemoryView_FromMemory(out.pointer_at(out.size()), size, PyBUF_WRITE)


# ---------------------------------------------------------------------------------------------------------
# compression
# ---------------------------------------------------------------------------------------------------------

cdef int compress_into(int codec, const char* data, Py_ssize_t size, WriteBuffer out, int level) except -1:
    if codec == CODEC_GZIP:
        _gzip_compress(data, size, out, level)
    elif codec == CODEC_SNAPPY:
        _snappy_compress(data, size, out)
    elif codec == CODEC_LZ4:
        _lz4_compress(data, size, out)
    elif codec == CODEC_ZSTD:
        _zstd_compress(data, size, out, level)
    else:
        check_codec(codec)
        raise UnsupportedCodecError("codec 'none' does not compress")
    return 0


cdef int _gzip_compress(const char* data, Py_ssize_t size, WriteBuffer out, int level) except -1:
    compressor = zlib.compressobj(6 if level < 0 else level, zlib.DEFLATED, 31)
    out.write_from(compressor.compress(readable(data, size)))
    out.write_from(compressor.flush())
    return 0


cdef int _snappy_compress(const char* data, Py_ssize_t size, WriteBuffer out) except -1:
    cdef Py_ssize_t pos = 0, chunk, bound, written, length_at
    out.put_bytes(XERIAL_HEADER, XERIAL_HEADER_SIZE)
    while pos < size:
        chunk = min(size - pos, <Py_ssize_t>XERIAL_BLOCK_SIZE)
        bound = cramjam.snappy.compress_raw_max_len(readable(data + pos, chunk))
        length_at = out.size()
        out.claim(4)
        written = cramjam.snappy.compress_raw_into(readable(data + pos, chunk), writable_tail(out, bound))
        out.claim(written)
        store_u32be(out.pointer_at(length_at), <uint32_t>written)
        pos += chunk
    return 0


cdef int _lz4_compress(const char* data, Py_ssize_t size, WriteBuffer out) except -1:
    cdef Py_ssize_t pos = 0, chunk, written, size_at
    cdef char header[7]
    cdef char* p
    store_u32le(header, LZ4_MAGIC)
    header[4] = <char>(LZ4_FLG_VERSION_1 | LZ4_FLG_BLOCK_INDEPENDENT)
    header[5] = <char>LZ4_BD_64KB
    header[6] = <char>((xxh32(header + 4, 2, 0) >> 8) & 0xFF)
    out.put_bytes(header, 7)
    while pos < size:
        chunk = min(size - pos, <Py_ssize_t>LZ4_BLOCK_SIZE)
        size_at = out.size()
        out.claim(4)
        written = cramjam.lz4.compress_block_into(
            readable(data + pos, chunk), writable_tail(out, chunk + chunk // 255 + 16), store_size=False)
        if written >= chunk:
            # Incompressible: the frame format lets a block be stored as is.
            memcpy(out.pointer_at(out.size()), data + pos, chunk)
            out.claim(chunk)
            store_u32le(out.pointer_at(size_at), <uint32_t>chunk | LZ4_STORED_BIT)
        else:
            out.claim(written)
            store_u32le(out.pointer_at(size_at), <uint32_t>written)
        pos += chunk
    p = out.claim(4)
    store_u32le(p, 0)
    return 0


cdef int _zstd_compress(const char* data, Py_ssize_t size, WriteBuffer out, int level) except -1:
    cdef int chosen = 3 if level < 0 else level
    compressors = getattr(_zstd_local, "compressors", None)
    if compressors is None:
        compressors = _zstd_local.compressors = {}
    compressor = compressors.get(chosen)
    if compressor is None:
        compressor = compressors[chosen] = zstandard.ZstdCompressor(level=chosen)
    out.write_from(compressor.compress(readable(data, size)))
    return 0


# ---------------------------------------------------------------------------------------------------------
# decompression
# ---------------------------------------------------------------------------------------------------------

cdef int decompress_into(int codec, const char* data, Py_ssize_t size, WriteBuffer out,
                         Py_ssize_t max_size) except -1:
    cdef Py_ssize_t start = out.size()
    try:
        if codec == CODEC_GZIP:
            _gzip_decompress(data, size, out, max_size)
        elif codec == CODEC_SNAPPY:
            _snappy_decompress(data, size, out, max_size)
        elif codec == CODEC_LZ4:
            _lz4_decompress(data, size, out, max_size)
        elif codec == CODEC_ZSTD:
            _zstd_decompress(data, size, out, max_size)
        else:
            check_codec(codec)
            raise UnsupportedCodecError("codec 'none' does not decompress")
    except (CompressionError, UnsupportedCodecError):
        out.truncate_to(start)
        raise
    except (zlib.error, cramjam.DecompressionError, zstandard.ZstdError, ValueError) as exc:
        out.truncate_to(start)
        raise CompressionError(f"corrupt {CODEC_NAMES[codec]} data: {exc}") from exc
    return 0


cdef int _too_large(Py_ssize_t max_size) except -1:
    raise CompressionError(f"data decompresses to more than the allowed {max_size} bytes")


cdef int _gzip_decompress(const char* data, Py_ssize_t size, WriteBuffer out, Py_ssize_t max_size) except -1:
    cdef Py_ssize_t produced = 0
    pending = readable(data, size)
    while True:
        inflater = zlib.decompressobj(47)       # 32 + 15: gzip or zlib header, full window
        chunk = inflater.decompress(pending, max_size - produced + 1)
        produced += len(chunk)
        if produced > max_size:
            _too_large(max_size)
        out.write_from(chunk)
        if not inflater.eof:
            raise CompressionError("gzip data is truncated")
        pending = inflater.unused_data
        if not pending:
            return 0


cdef int _snappy_block(const char* data, Py_ssize_t size, WriteBuffer out, Py_ssize_t budget) except -1:
    # Raw snappy starts with its uncompressed length: check it before letting cramjam allocate.
    block = readable(data, size)
    cdef Py_ssize_t length = cramjam.snappy.decompress_raw_len(block)
    if length > budget:
        _too_large(budget)
    written = cramjam.snappy.decompress_raw_into(block, writable_tail(out, length))
    if written != length:
        raise CompressionError("snappy block length does not match its preamble")
    out.claim(length)
    return 0


cdef int _snappy_decompress(const char* data, Py_ssize_t size, WriteBuffer out, Py_ssize_t max_size) except -1:
    cdef Py_ssize_t pos = XERIAL_HEADER_SIZE, start = out.size()
    cdef int32_t block_size
    if size < XERIAL_HEADER_SIZE or memcmp(data, <const char*>XERIAL_HEADER, 8) != 0:
        return _snappy_block(data, size, out, max_size)
    # The version fields after the marker are ignored: some producers write them little-endian.
    while pos < size:
        if size - pos < 4:
            raise CompressionError("xerial snappy block header is truncated")
        block_size = <int32_t>load_u32be(data + pos)
        pos += 4
        if block_size < 0 or block_size > size - pos:
            raise CompressionError(f"xerial snappy block of {block_size} bytes overruns the data")
        _snappy_block(data + pos, block_size, out, max_size - (out.size() - start))
        pos += block_size
    return 0


cdef int _lz4_decompress(const char* data, Py_ssize_t size, WriteBuffer out, Py_ssize_t max_size) except -1:
    cdef Py_ssize_t pos = 0
    while pos < size:
        pos += _lz4_frame(data + pos, size - pos, out, max_size)
    return 0


cdef Py_ssize_t _lz4_frame(const char* data, Py_ssize_t size, WriteBuffer out, Py_ssize_t max_size) except -1:
    # Decodes one frame; returns the bytes it occupied.
    cdef Py_ssize_t pos, descriptor_end, block_max, start = out.size(), produced
    cdef uint8_t flg, bd, hc
    cdef uint32_t block_word, block_size
    cdef bint stored
    if size < 7 or load_u32le(data) != LZ4_MAGIC:
        raise CompressionError("not an LZ4 frame (bad magic)")
    flg = <uint8_t>data[4]
    bd = <uint8_t>data[5]
    if (flg & 0xC0) != LZ4_FLG_VERSION_1 or (flg & 0x02) or (bd & 0x8F):
        raise CompressionError("unsupported LZ4 frame descriptor")
    if not (flg & LZ4_FLG_BLOCK_INDEPENDENT):
        raise CompressionError("LZ4 frames with linked blocks are not used by Kafka and not supported")
    block_max = 1 << (8 + 2 * ((bd >> 4) & 0x7))
    if block_max < 65536:
        raise CompressionError("LZ4 frame announces a reserved block size")
    descriptor_end = 6 + (8 if flg & LZ4_FLG_CONTENT_SIZE else 0) + (4 if flg & LZ4_FLG_DICT_ID else 0)
    if size < descriptor_end + 1:
        raise CompressionError("LZ4 frame header is truncated")
    if flg & LZ4_FLG_DICT_ID:
        raise CompressionError("LZ4 frames with a dictionary are not supported")
    if flg & LZ4_FLG_CONTENT_SIZE and load_u64le(data + 6) > <uint64_t>max_size:
        _too_large(max_size)
    hc = <uint8_t>data[descriptor_end]
    if hc != ((xxh32(data + 4, descriptor_end - 4, 0) >> 8) & 0xFF) and \
            hc != ((xxh32(data, descriptor_end, 0) >> 8) & 0xFF):
        raise CompressionError("LZ4 frame header checksum mismatch")
    pos = descriptor_end + 1
    while True:
        if size - pos < 4:
            raise CompressionError("LZ4 frame is truncated")
        block_word = load_u32le(data + pos)
        pos += 4
        if block_word == 0:
            break
        stored = (block_word & LZ4_STORED_BIT) != 0
        block_size = block_word & ~LZ4_STORED_BIT
        if block_size > <uint32_t>block_max or block_size > <uint64_t>(size - pos):
            raise CompressionError(f"LZ4 block of {block_size} bytes overruns the frame")
        produced = out.size() - start
        if stored:
            if block_size > max_size - produced:
                _too_large(max_size)
            out.put_bytes(data + pos, block_size)
        else:
            try:
                written = cramjam.lz4.decompress_block_into(
                    readable(data + pos, block_size), writable_tail(out, min(block_max, max_size - produced)))
            except cramjam.DecompressionError:
                if max_size - produced < block_max:
                    _too_large(max_size)     # the block may simply not fit in what the bound leaves
                raise
            out.claim(written)
        pos += block_size
        if flg & LZ4_FLG_BLOCK_CHECKSUM:
            if size - pos < 4:
                raise CompressionError("LZ4 block checksum is truncated")
            if load_u32le(data + pos) != xxh32(data + pos - block_size, block_size, 0):
                raise CompressionError("LZ4 block checksum mismatch")
            pos += 4
    if flg & LZ4_FLG_CONTENT_CHECKSUM:
        if size - pos < 4:
            raise CompressionError("LZ4 content checksum is truncated")
        if load_u32le(data + pos) != xxh32(out.pointer_at(start), out.size() - start, 0):
            raise CompressionError("LZ4 content checksum mismatch")
        pos += 4
    if flg & LZ4_FLG_CONTENT_SIZE and load_u64le(data + 6) != <uint64_t>(out.size() - start):
        raise CompressionError("LZ4 content size does not match the frame header")
    return pos


cdef Py_ssize_t _zstd_frame_extent(const char* data, Py_ssize_t size, int64_t* content_size) except -1:
    # Walks one frame's block headers to find where it ends (the decoder alone cannot tell a truncated
    # frame from a short one); sets content_size to the announced size or -1. Skippable frames give 0 bytes.
    cdef Py_ssize_t pos, fcs_size, did_size
    cdef uint32_t magic, block_header, block_size
    cdef uint8_t fhd
    cdef bint last = False
    if size < 4:
        raise CompressionError("zstd frame is truncated")
    magic = load_u32le(data)
    if (magic & 0xFFFFFFF0) == ZSTD_SKIPPABLE_MAGIC:
        if size < 8 or load_u32le(data + 4) > <uint64_t>(size - 8):
            raise CompressionError("zstd skippable frame is truncated")
        content_size[0] = 0
        return 8 + load_u32le(data + 4)
    if magic != ZSTD_MAGIC:
        raise CompressionError("not a zstd frame (bad magic)")
    if size < 5:
        raise CompressionError("zstd frame header is truncated")
    fhd = <uint8_t>data[4]
    if fhd & 0x08:
        raise CompressionError("zstd frame header sets a reserved bit")
    did_size = (0, 1, 2, 4)[fhd & 0x03]
    fcs_size = (1 if fhd & 0x20 else 0, 2, 4, 8)[fhd >> 6]
    pos = 5 + (0 if fhd & 0x20 else 1) + did_size
    if size < pos + fcs_size:
        raise CompressionError("zstd frame header is truncated")
    if fcs_size == 1:
        content_size[0] = <uint8_t>data[pos]
    elif fcs_size == 2:
        content_size[0] = (<uint8_t>data[pos] | (<uint8_t>data[pos + 1] << 8)) + 256
    elif fcs_size == 4:
        content_size[0] = load_u32le(data + pos)
    elif fcs_size == 8:
        content_size[0] = <int64_t>(load_u64le(data + pos) & 0x7FFFFFFFFFFFFFFF)
    else:
        content_size[0] = -1
    pos += fcs_size
    while not last:
        if size - pos < 3:
            raise CompressionError("zstd frame is truncated")
        block_header = <uint8_t>data[pos] | (<uint8_t>data[pos + 1] << 8) | (<uint8_t>data[pos + 2] << 16)
        pos += 3
        last = block_header & 1
        block_size = 1 if (block_header >> 1) & 3 == 1 else block_header >> 3   # an RLE block stores one byte
        if (block_header >> 1) & 3 == 3:
            raise CompressionError("zstd block of reserved type")
        if block_size > <uint64_t>(size - pos):
            raise CompressionError("zstd frame is truncated")
        pos += block_size
    if fhd & 0x04:
        if size - pos < 4:
            raise CompressionError("zstd content checksum is truncated")
        pos += 4
    return pos


cdef int _zstd_decompress(const char* data, Py_ssize_t size, WriteBuffer out, Py_ssize_t max_size) except -1:
    cdef Py_ssize_t pos = 0, extent, start = out.size(), budget
    cdef int64_t content_size
    decompressor = zstandard.ZstdDecompressor()
    while pos < size:
        extent = _zstd_frame_extent(data + pos, size - pos, &content_size)
        budget = max_size - (out.size() - start)
        if content_size > budget:
            _too_large(max_size)
        frame = readable(data + pos, extent)
        if content_size >= 0:
            # The size is announced and within bounds: one exact allocation, checked by the decoder.
            out.write_from(decompressor.decompress(frame))
        else:
            reader = decompressor.stream_reader(frame)
            while True:
                chunk = reader.read(ZSTD_READ_CHUNK)
                if not chunk:
                    break
                if len(chunk) > budget:
                    _too_large(max_size)
                budget -= len(chunk)
                out.write_from(chunk)
        pos += extent
    return 0


# ---------------------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------------------

def compress(int codec, data, int level=-1) -> bytes:
    """Compress with Kafka's framing for `codec` (1 gzip, 2 snappy, 3 lz4, 4 zstd); level -1 = codec default."""
    cdef WriteBuffer out = WriteBuffer(len(data) // 2 + 64)
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        compress_into(codec, <const char*>view.buf, view.len, out, level)
    finally:
        PyBuffer_Release(&view)
    return out.getvalue()


def decompress(int codec, data, Py_ssize_t max_size=DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytearray:
    """Decompress Kafka-framed data, refusing to produce more than max_size bytes."""
    cdef WriteBuffer out = WriteBuffer(len(data) * 4 + 64)
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        decompress_into(codec, <const char*>view.buf, view.len, out, max_size)
    finally:
        PyBuffer_Release(&view)
    return out.take()

