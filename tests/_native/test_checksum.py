"""CRC-32C and CRC-32 against their standard check values and independent implementations."""
from __future__ import annotations

import zlib

import crc32c as crc32c_package
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq._native.checksum import (
    crc32, crc32_portable, crc32_uses_hardware, crc32c, crc32c_portable, crc32c_uses_hardware,
)


def test_check_values():
    # The "check" values of the CRC catalogue: CRC of the ASCII digits 1..9.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c_portable(b"123456789") == 0xE3069283
    assert crc32(b"123456789") == 0xCBF43926
    assert crc32_portable(b"123456789") == 0xCBF43926
    assert crc32c(b"") == 0 and crc32(b"") == 0


def test_hardware_path_is_used_where_available():
    flags = open("/proc/cpuinfo").read()
    assert crc32c_uses_hardware() == (" sse4_2" in flags)
    assert crc32_uses_hardware() == (" pclmulqdq" in flags and " sse4_1" in flags)


# Lengths around CRC-32C's 3-way interleaving blocks (3 x 256 and 3 x 8192 bytes), CRC-32's folds (64 bytes to
# start, 64 at a time, then 16 at a time, then a table-driven tail) and alignment edges.
EDGE_LENGTHS = [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 79, 80, 127, 128, 129, 143, 255, 767, 768, 769, 24575, 24576,
                24577, 65535, 65536, 65537, 200003]


@pytest.mark.parametrize("length", EDGE_LENGTHS)
@pytest.mark.parametrize("misalign", [0, 1, 3, 7])
def test_against_the_crc32c_package_and_zlib(length, misalign):
    data = memoryview(bytes(range(256)) * (length // 256 + 2))[misalign:misalign + length]
    assert crc32c(data) == crc32c_package.crc32c(data) == crc32c_portable(data)
    assert crc32(data) == zlib.crc32(data) == crc32_portable(data)


@given(st.binary(max_size=30000), st.integers(min_value=0, max_value=2**32 - 1), st.data())
def test_random_data_and_chaining(data, seed, draw):
    cut = draw.draw(st.integers(min_value=0, max_value=len(data)))
    assert crc32c(data) == crc32c_package.crc32c(data)
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)
    assert crc32c(data, seed) == crc32c_portable(data, seed)
    assert crc32(data, seed) == zlib.crc32(data, seed) == crc32_portable(data, seed)
    assert crc32(data[cut:], crc32(data[:cut])) == crc32(data)


def test_accepts_every_buffer_type():
    data = b"fastmq" * 100
    expected = crc32c(data)
    assert crc32c(bytearray(data)) == crc32c(memoryview(data)) == expected
    with pytest.raises(TypeError):
        crc32c("not bytes")
