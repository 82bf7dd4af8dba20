"""Micro-benchmarks of fastmq/_native/frames.pyx.

- 100k Kafka frames of 100 B fed in 64 KiB chunks (the per-frame overhead of small frames);
- one 8 MiB Kafka frame through writable()/commit() in 64 KiB receives (the in-place path; copying into
  the view stands in for the kernel's copy in recv_into).
The baseline is a straightforward pure-Python splitter (bytearray + struct), as asyncio-style clients
write it; it is there to put the numbers in proportion, not as a peer library.
"""
from __future__ import annotations

import struct

import pytest

from fastmq._native.frames import KafkaFrameSplitter

PROTOCOL = "kafka"
SMALL_COUNT = 100_000
SMALL_SIZE = 100
CHUNK = 64 * 1024
LARGE_SIZE = 8 * 1024 * 1024


class BytearraySplitter:
    """Baseline: append to a bytearray, cut frames with struct, one bytes copy per frame."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data) -> None:
        self.buffer += data

    def frames(self) -> list[bytes]:
        buffer, pos, out = self.buffer, 0, []
        view = memoryview(buffer)
        while len(buffer) - pos >= 4:
            (size,) = struct.unpack_from(">i", buffer, pos)
            if len(buffer) - pos - 4 < size:
                break
            out.append(bytes(view[pos + 4:pos + 4 + size]))
            pos += 4 + size
        view.release()
        del buffer[:pos]
        return out


@pytest.fixture(scope="module")
def small_chunks():
    frame = struct.pack(">i", SMALL_SIZE) + bytes(range(SMALL_SIZE))
    stream = frame * SMALL_COUNT
    view = memoryview(stream)
    return len(stream), [view[i:i + CHUNK] for i in range(0, len(stream), CHUNK)]


@pytest.fixture(scope="module")
def large_frame():
    return memoryview(struct.pack(">i", LARGE_SIZE) + bytes(LARGE_SIZE))


def split_small_fastmq(chunks) -> int:
    splitter = KafkaFrameSplitter()
    count = 0
    for chunk in chunks:
        splitter.feed(chunk)
        count += len(list(splitter))
    return count


def split_small_baseline(chunks) -> int:
    splitter = BytearraySplitter()
    count = 0
    for chunk in chunks:
        splitter.feed(chunk)
        count += len(splitter.frames())
    return count


def receive_large_fastmq(wire) -> int:
    splitter = KafkaFrameSplitter()
    pos, frame = 0, None
    while frame is None:
        view = splitter.writable(CHUNK)
        n = min(len(view), CHUNK, len(wire) - pos)
        view[:n] = wire[pos:pos + n]
        splitter.commit(n)
        pos += n
        frame = splitter.next_frame()
    return len(frame)


def receive_large_baseline(wire) -> int:
    splitter = BytearraySplitter()
    pos, frames = 0, []
    while not frames:
        splitter.feed(wire[pos:pos + CHUNK])
        pos += CHUNK
        frames = splitter.frames()
    return len(frames[0])


@pytest.mark.parametrize("impl, split", [("fastmq", split_small_fastmq),
                                         ("python-bytearray-baseline", split_small_baseline)])
def test_split_small_kafka_frames(compare, small_chunks, impl, split):
    total, chunks = small_chunks
    bench = compare("frames-kafka-100k-x-100B-in-64KiB-chunks", impl, items=SMALL_COUNT, nbytes=total)
    assert bench(split, chunks) == SMALL_COUNT


@pytest.mark.parametrize("impl, receive", [("fastmq", receive_large_fastmq),
                                           ("python-bytearray-baseline", receive_large_baseline)])
def test_receive_one_8MiB_kafka_frame(compare, large_frame, impl, receive):
    bench = compare("frames-kafka-1-x-8MiB-recv-into-64KiB", impl, items=1, nbytes=len(large_frame))
    assert bench(receive, large_frame) == LARGE_SIZE
