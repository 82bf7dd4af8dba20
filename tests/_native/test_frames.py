"""fastmq/_native/frames.pyx: the incremental frame splitters of Kafka, RocketMQ, NSQ and TubeMQ.

The expected frames come from an independent oracle: the wire bytes are built here with struct, and
TubeMQ's against the golden frames generated from the upstream protos.
"""
from __future__ import annotations

import random
import struct
import tracemalloc
from dataclasses import dataclass
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq._native.frames import (
    FrameSplitter,
    KafkaFrameSplitter,
    NSQFrameSplitter,
    RocketMQFrameSplitter,
    TubeMQFrameSplitter,
    encode_tubemq_frame,
)
from fastmq.errors import ConfigurationError, FastMQError, FrameTooLargeError, ProtocolError
from tests.support.shared import golden_params, golden_path

TUBEMQ_VECTORS = golden_params("tubemq/vectors.json", "vectors")

TUBEMQ_TOKEN = 0xFF7FF4FE
TUBEMQ_BLOCK = 8192
TUBEMQ_MAX_BLOCKS = 3584
SMALL_PEAK = 64 * 1024           # allocation allowed while rejecting a forged header (exception objects)


# --- independent encoders: (wire bytes, the frame next_frame() must return) ------------------------------------

def kafka_wire(body: bytes) -> tuple[bytes, bytes]:
    return struct.pack(">i", len(body)) + body, body


def rocketmq_wire(serialize_type: int, header: bytes, body: bytes) -> tuple[bytes, bytes]:
    rest = struct.pack(">I", (serialize_type << 24) | len(header)) + header + body
    return struct.pack(">i", len(rest)) + rest, rest


def nsq_wire(frame_type: int, data: bytes) -> tuple[bytes, tuple[int, bytes]]:
    return struct.pack(">II", 4 + len(data), frame_type) + data, (frame_type, data)


def tubemq_wire(serial_no: int, blocks: list[bytes]) -> tuple[bytes, tuple[int, bytes]]:
    wire = struct.pack(">Iii", TUBEMQ_TOKEN, serial_no, len(blocks))
    wire += b"".join(struct.pack(">i", len(block)) + block for block in blocks)
    return wire, (serial_no, b"".join(blocks))


def pseudo_random_bytes(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def sized(n: int):
    """Bytes of length n whose content hypothesis controls through a seed (fast for large n)."""
    return st.integers(0, 2**32).map(lambda seed: pseudo_random_bytes(seed, n))


# Mostly short blocks, sometimes full ones: full blocks everywhere would make byte-sized chunks slow.
block_lengths = st.one_of(st.integers(0, 300), st.integers(TUBEMQ_BLOCK - 2, TUBEMQ_BLOCK))


@dataclass(frozen=True)
class Protocol:
    name: str
    splitter: Callable[..., FrameSplitter]
    frames: st.SearchStrategy          # of (wire, expected frame)
    large: Callable[[bytes], tuple]    # (wire, expected) of a frame carrying the given bytes


PROTOCOLS = [
    Protocol("kafka", KafkaFrameSplitter,
             st.binary(max_size=300).map(kafka_wire),
             kafka_wire),
    Protocol("rocketmq", RocketMQFrameSplitter,
             st.builds(rocketmq_wire, st.integers(0, 255), st.binary(max_size=100), st.binary(max_size=200)),
             lambda body: rocketmq_wire(1, body[:30], body[30:])),
    Protocol("nsq", NSQFrameSplitter,
             st.builds(nsq_wire, st.sampled_from([0, 1, 2]), st.binary(max_size=300)),
             lambda body: nsq_wire(2, body)),
    Protocol("tubemq", TubeMQFrameSplitter,
             st.builds(tubemq_wire, st.integers(-2**31, 2**31 - 1),
                       st.lists(block_lengths.flatmap(sized), min_size=1, max_size=3)),
             lambda body: tubemq_wire(7, [body[i:i + TUBEMQ_BLOCK] for i in range(0, len(body), TUBEMQ_BLOCK)])),
]
protocols = pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
contiguous_protocols = pytest.mark.parametrize("proto", [p for p in PROTOCOLS if p.name != "tubemq"],
                                               ids=lambda p: p.name)


# --- drivers ---------------------------------------------------------------------------------------------------

BYTES_LIKE = (bytes, bytearray, memoryview)


def split_by_feed(splitter: FrameSplitter, data: bytes, chunk_sizes: list[int]) -> list:
    frames, pos, step = [], 0, 0
    source = memoryview(data)
    while pos < len(data):
        n = chunk_sizes[step % len(chunk_sizes)]
        chunk = source[pos:pos + n]
        splitter.feed(BYTES_LIKE[step % 3](chunk))
        pos += n
        step += 1
        frames.extend(splitter)
    return frames


def split_by_recv(splitter: FrameSplitter, data: bytes, chunk_sizes: list[int], min_size: int = 65536) -> list:
    """Imitates the I/O engine: recv_into(writable()) of at most chunk bytes, commit, drain."""
    frames, pos, step = [], 0, 0
    source = memoryview(data)
    while pos < len(data):
        view = splitter.writable(min_size)
        n = min(len(view), chunk_sizes[step % len(chunk_sizes)], len(data) - pos)
        assert n > 0, "writable() handed out an empty view"
        view[:n] = source[pos:pos + n]
        del view
        splitter.commit(n)
        pos += n
        step += 1
        frames.extend(splitter)
    return frames


DRIVERS = pytest.mark.parametrize("split", [split_by_feed, split_by_recv], ids=["feed", "recv_into"])


def frame_blocks(frame: bytes, block_lens: list[int]) -> list[bytes]:
    """Walks a TubeMQ frame with the block lengths it is expected to have; asserts every length field."""
    token, _, list_size = struct.unpack_from(">Iii", frame)
    assert token == TUBEMQ_TOKEN and list_size == len(block_lens)
    blocks, pos = [], 12
    for length in block_lens:
        assert struct.unpack_from(">i", frame, pos)[0] == length
        blocks.append(frame[pos + 4:pos + 4 + length])
        pos += 4 + length
    assert pos == len(frame)
    return blocks


# --- TubeMQ golden frames --------------------------------------------------------------------------------------

@pytest.mark.parametrize("vector", TUBEMQ_VECTORS, ids=lambda v: v and v["name"])
def test_tubemq_golden_frame_split_whole_and_in_pieces(vector):
    frame = bytes.fromhex(vector["frame_hex"])
    assert len(frame) == vector["frame_len"]
    expected_payload = b"".join(frame_blocks(frame, vector["block_lens"]))
    assert len(expected_payload) == vector["stream_len"] == sum(vector["block_lens"])
    assert bytes.fromhex(vector["inner_hex"]) in expected_payload   # the inner message travels in the payload

    whole = TubeMQFrameSplitter()
    whole.feed(frame)
    assert whole.next_frame() == (vector["serialNo"], expected_payload)
    assert whole.next_frame() is None and whole.buffered == 0

    rng = random.Random(vector["name"])
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(frame)), rng.randint(1, 12)))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [len(frame)])]
        assert split_by_feed(TubeMQFrameSplitter(), frame, sizes) == [(vector["serialNo"], expected_payload)]
        assert split_by_recv(TubeMQFrameSplitter(), frame, sizes) == [(vector["serialNo"], expected_payload)]
    assert split_by_feed(TubeMQFrameSplitter(), frame, [1]) == [(vector["serialNo"], expected_payload)]


@pytest.mark.parametrize("vector", TUBEMQ_VECTORS, ids=lambda v: v and v["name"])
def test_tubemq_golden_frame_encodes_byte_for_byte(vector):
    frame = bytes.fromhex(vector["frame_hex"])
    payload = b"".join(frame_blocks(frame, vector["block_lens"]))
    assert encode_tubemq_frame(vector["serialNo"], payload).hex() == vector["frame_hex"]
    assert encode_tubemq_frame(vector["serialNo"], memoryview(bytearray(payload))).hex() == vector["frame_hex"]


def test_tubemq_golden_frames_back_to_back_come_out_in_order():
    golden_path("tubemq", "vectors.json")
    stream = b"".join(bytes.fromhex(v["frame_hex"]) for v in TUBEMQ_VECTORS)
    frames = split_by_recv(TubeMQFrameSplitter(), stream, [37, 1000, 3])
    assert [serial for serial, _ in frames] == [v["serialNo"] for v in TUBEMQ_VECTORS]
    assert [len(payload) for _, payload in frames] == [v["stream_len"] for v in TUBEMQ_VECTORS]


# --- TubeMQ encoder --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 8191, 8192, 8193, 3 * 8192, 3 * 8192 + 5])
def test_tubemq_encoder_fills_every_block_but_the_last(size):
    payload = pseudo_random_bytes(size, size)
    frame = encode_tubemq_frame(-5, payload)
    expected_lens = [TUBEMQ_BLOCK] * (size // TUBEMQ_BLOCK)
    if size % TUBEMQ_BLOCK or size == 0:
        expected_lens.append(size % TUBEMQ_BLOCK)
    assert struct.unpack_from(">i", frame, 4)[0] == -5
    assert b"".join(frame_blocks(frame, expected_lens)) == payload
    splitter = TubeMQFrameSplitter()
    splitter.feed(frame)
    assert splitter.next_frame() == (-5, payload)


def test_tubemq_encoder_and_default_splitter_accept_the_java_maximum_and_nothing_more():
    largest = bytes(TUBEMQ_MAX_BLOCKS * TUBEMQ_BLOCK)
    frame = encode_tubemq_frame(1, largest)
    splitter = TubeMQFrameSplitter()
    splitter.feed(frame)
    assert splitter.next_frame() == (1, largest)
    del frame
    with pytest.raises(FrameTooLargeError):
        encode_tubemq_frame(1, largest + b"x")


@settings(max_examples=150, deadline=None)
@given(serial_no=st.integers(-2**31, 2**31 - 1), payload=st.integers(0, 40000).flatmap(sized),
       chunks=st.lists(st.integers(1, 9000), min_size=1, max_size=8))
def test_tubemq_encoder_round_trips_through_the_splitter(serial_no, payload, chunks):
    frame = encode_tubemq_frame(serial_no, payload)
    assert split_by_feed(TubeMQFrameSplitter(), frame, chunks) == [(serial_no, payload)]


# --- round trips -----------------------------------------------------------------------------------------------

@protocols
@DRIVERS
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_frame_sequences_round_trip_in_random_chunks(proto, split, data):
    frames = data.draw(st.lists(proto.frames, max_size=8), label="frames")
    chunks = data.draw(st.lists(st.integers(1, 600), min_size=1, max_size=10), label="chunks")
    stream = b"".join(wire for wire, _ in frames)
    splitter = proto.splitter()
    assert split(splitter, stream, chunks) == [expected for _, expected in frames]
    assert splitter.buffered == 0 and splitter.next_frame() is None


@protocols
@DRIVERS
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_large_and_small_frames_mixed_round_trip(proto, split, data):
    sizes = [65535, 65536, 65540, 70000, 200_000, 1 << 20]
    large = data.draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=3), label="large sizes")
    frames = []
    for i, size in enumerate(large):
        frames.append(proto.large(pseudo_random_bytes(i, size)))
        frames.extend(data.draw(st.lists(proto.frames, max_size=3), label="small frames"))
    chunks = data.draw(st.lists(st.integers(500, 300_000), min_size=1, max_size=5), label="chunks")
    stream = b"".join(wire for wire, _ in frames)
    splitter = proto.splitter()
    assert split(splitter, stream, chunks) == [expected for _, expected in frames]
    assert splitter.buffered == 0


# --- large frames are received in place ------------------------------------------------------------------------

@contiguous_protocols
def test_large_frame_is_received_into_its_own_bytes_object(proto):
    body = pseudo_random_bytes(1, 8 << 20)
    wire, expected = proto.large(body)
    trailer, trailer_frame = proto.large(b"after the large one" * 3)
    stream = memoryview(wire + trailer)
    splitter = proto.splitter()

    view = splitter.writable()
    view[:65536] = stream[:65536]
    del view
    splitter.commit(65536)
    assert splitter.next_frame() is None
    assert splitter.buffered == 65536
    # From here on recv_into writes straight into the frame: the view is exactly what the frame still lacks.
    pos = 65536
    tracemalloc.start()
    try:
        while pos < len(wire):
            view = splitter.writable()
            assert len(view) == len(wire) - pos
            n = min(len(view), 1 << 20)
            view[:n] = stream[pos:pos + n]
            del view
            splitter.commit(n)
            pos += n
            assert splitter.buffered == pos
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < SMALL_PEAK    # nothing was allocated or grown while the body arrived
    frame = splitter.next_frame()
    assert frame == expected
    assert splitter.buffered == 0
    splitter.feed(stream[pos:])
    assert list(splitter) == [trailer_frame]


@contiguous_protocols
def test_large_frame_takes_one_allocation_of_its_size(proto):
    body = pseudo_random_bytes(2, 8 << 20)
    wire, expected = proto.large(body)
    splitter = proto.splitter()
    tracemalloc.start()
    try:
        frames = split_by_recv(splitter, wire, [65536])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert frames == [expected]
    # The buffered path would grow the shared buffer past the frame and then copy it out (>= 2x).
    assert peak < len(body) + 256 * 1024


def test_feed_splits_a_chunk_between_the_in_place_frame_and_the_frames_after_it():
    body = pseudo_random_bytes(3, 300_000)
    wire, _ = kafka_wire(body)
    small = [kafka_wire(bytes([i]) * i) for i in range(5)]
    splitter = KafkaFrameSplitter()
    splitter.feed(wire[:1000])
    assert splitter.next_frame() is None
    assert len(splitter.writable(1)) == len(wire) - 1000      # in place now
    splitter.feed(wire[1000:] + b"".join(w for w, _ in small))
    assert list(splitter) == [body] + [f for _, f in small]


def test_tubemq_large_payload_through_recv_into():
    payload = pseudo_random_bytes(4, 3 << 20)
    frame = encode_tubemq_frame(99, payload)
    assert split_by_recv(TubeMQFrameSplitter(), frame, [65536, 1000, 12345]) == [(99, payload)]


def test_lenient_tubemq_blocks_that_are_not_full_are_joined():
    blocks = [b"a" * 10, b"", b"b" * TUBEMQ_BLOCK, b"c"]
    wire, expected = tubemq_wire(3, blocks)
    assert split_by_feed(TubeMQFrameSplitter(), wire, [5]) == [expected]


# --- limits and bad headers ------------------------------------------------------------------------------------

def raises_from_header(splitter: FrameSplitter, header: bytes, error: type[Exception]) -> Exception:
    """Feeds only the header, expects `error` from next_frame(), and checks nothing large was allocated."""
    tracemalloc.start()
    try:
        splitter.feed(header)
        with pytest.raises(error) as info:
            splitter.next_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < SMALL_PEAK
    return info.value


@pytest.mark.parametrize("size", [-1, -2**31])
def test_kafka_negative_size_is_a_protocol_error(size):
    error = raises_from_header(KafkaFrameSplitter(), struct.pack(">i", size), ProtocolError)
    assert not isinstance(error, FrameTooLargeError)


@pytest.mark.parametrize("size", [100 * 1024 * 1024 + 1, 2**31 - 1])
def test_kafka_forged_huge_size_is_rejected_before_the_body(size):
    raises_from_header(KafkaFrameSplitter(), struct.pack(">i", size), FrameTooLargeError)


def test_kafka_frame_of_exactly_max_frame_size_passes():
    wire, body = kafka_wire(b"z" * 1000)
    splitter = KafkaFrameSplitter(max_frame_size=1000)
    splitter.feed(wire)
    assert splitter.next_frame() == body
    raises_from_header(KafkaFrameSplitter(max_frame_size=999), wire, FrameTooLargeError)


@pytest.mark.parametrize("total, word", [(-1, 0), (0, 0), (3, 0), (4, 1), (10, 7), (10, (1 << 24) | 0xFFFFFF)])
def test_rocketmq_bad_total_or_header_length_is_a_protocol_error(total, word):
    error = raises_from_header(RocketMQFrameSplitter(), struct.pack(">iI", total, word), ProtocolError)
    assert not isinstance(error, FrameTooLargeError)


@pytest.mark.parametrize("total", [16 * 1024 * 1024 + 1, 2**31 - 1])
def test_rocketmq_forged_huge_total_is_rejected_before_the_body(total):
    raises_from_header(RocketMQFrameSplitter(), struct.pack(">iI", total, 0), FrameTooLargeError)


def test_rocketmq_accepts_any_serialize_type_and_an_empty_body():
    wire, frame = rocketmq_wire(0xFF, b"h" * 6, b"")
    splitter = RocketMQFrameSplitter()
    splitter.feed(wire)
    assert splitter.next_frame() == frame


@pytest.mark.parametrize("size", [0, 1, 3])
def test_nsq_size_below_the_frame_type_is_a_protocol_error(size):
    error = raises_from_header(NSQFrameSplitter(), struct.pack(">II", size, 0), ProtocolError)
    assert not isinstance(error, FrameTooLargeError)


@pytest.mark.parametrize("frame_type", [3, 0x7FFFFFFF, 0xFFFFFFFF])
def test_nsq_unknown_frame_type_is_a_protocol_error(frame_type):
    error = raises_from_header(NSQFrameSplitter(), struct.pack(">II", 100, frame_type), ProtocolError)
    assert not isinstance(error, FrameTooLargeError)


@pytest.mark.parametrize("size", [16 * 1024 * 1024 + 1, 0x80000000, 0xFFFFFFFF])
def test_nsq_forged_huge_size_is_rejected_before_the_body(size):
    raises_from_header(NSQFrameSplitter(), struct.pack(">II", size, 2), FrameTooLargeError)


@pytest.mark.parametrize("token", [0, 0xFF7FF4FF, 0xFEF47FFF])
def test_tubemq_wrong_token_is_a_protocol_error(token):
    raises_from_header(TubeMQFrameSplitter(), struct.pack(">Iii", token, 1, 1), ProtocolError)


@pytest.mark.parametrize("list_size", [0, -1, TUBEMQ_MAX_BLOCKS + 1, 2**31 - 1])
def test_tubemq_block_count_outside_1_to_3584_is_a_protocol_error(list_size):
    error = raises_from_header(TubeMQFrameSplitter(), struct.pack(">Iii", TUBEMQ_TOKEN, 1, list_size),
                               ProtocolError)
    assert not isinstance(error, FrameTooLargeError)


def test_tubemq_header_with_3584_blocks_waits_for_them():
    splitter = TubeMQFrameSplitter()
    splitter.feed(struct.pack(">Iiii", TUBEMQ_TOKEN, 1, TUBEMQ_MAX_BLOCKS, TUBEMQ_BLOCK) + b"x" * 100)
    assert splitter.next_frame() is None


@pytest.mark.parametrize("block_len", [-1, TUBEMQ_BLOCK + 1, 2**31 - 1])
def test_tubemq_block_length_outside_0_to_8192_is_a_protocol_error(block_len):
    header = struct.pack(">Iiii", TUBEMQ_TOKEN, 1, 2, block_len)
    error = raises_from_header(TubeMQFrameSplitter(), header, ProtocolError)
    assert not isinstance(error, FrameTooLargeError)


def test_tubemq_payload_beyond_max_frame_size_is_rejected_at_the_block_header():
    first = struct.pack(">Iiii", TUBEMQ_TOKEN, 1, 3, TUBEMQ_BLOCK) + bytes(TUBEMQ_BLOCK)
    splitter = TubeMQFrameSplitter(max_frame_size=10_000)
    splitter.feed(first)
    assert splitter.next_frame() is None
    # The second block's header pushes the payload past 10000 bytes: rejected before its bytes arrive.
    raises_from_header(splitter, struct.pack(">i", TUBEMQ_BLOCK), FrameTooLargeError)


def test_negative_max_frame_size_is_a_configuration_error():
    with pytest.raises(ConfigurationError):
        KafkaFrameSplitter(max_frame_size=-1)


def test_the_base_class_is_abstract():
    with pytest.raises(TypeError):
        FrameSplitter()
    assert all(issubclass(p.splitter, FrameSplitter) for p in PROTOCOLS)


BAD_HEADERS = {
    "kafka": (struct.pack(">i", -7), ProtocolError),
    "rocketmq": (struct.pack(">iI", 2**31 - 1, 0), FrameTooLargeError),
    "nsq": (struct.pack(">II", 10, 9), ProtocolError),
    "tubemq": (b"GET / HTTP/1.1\r\n", ProtocolError),
}


@protocols
def test_errors_are_sticky(proto):
    header, error = BAD_HEADERS[proto.name]
    splitter = proto.splitter()
    splitter.feed(header)
    with pytest.raises(error):
        list(splitter)
    good_wire, _ = proto.large(b"fine")
    for call in (lambda: splitter.next_frame(), lambda: splitter.feed(good_wire), lambda: splitter.writable(),
                 lambda: splitter.commit(0), lambda: next(splitter), lambda: list(splitter)):
        with pytest.raises(error) as info:
            call()
        assert type(info.value) is error
        assert "close the connection" in str(info.value)


def test_commit_beyond_the_view_is_refused_without_breaking_the_stream():
    wire, body = kafka_wire(pseudo_random_bytes(5, 200_000))
    splitter = KafkaFrameSplitter()
    splitter.feed(wire[:100])
    assert splitter.next_frame() is None
    with pytest.raises(ValueError):
        splitter.commit(len(wire))          # in place: more than the frame lacks
    splitter.feed(wire[100:])
    assert splitter.next_frame() == body
    with pytest.raises(ValueError):
        splitter.commit(1 << 30)            # shared buffer: more than its free space
    splitter.feed(wire)
    assert list(splitter) == [body]


def test_buffered_counts_bytes_not_yet_returned():
    wire, body = kafka_wire(pseudo_random_bytes(6, 100_000))
    splitter = KafkaFrameSplitter()
    assert splitter.buffered == 0 and splitter.next_frame() is None
    assert len(splitter.writable(200_000)) >= 200_000     # the shared buffer honours min_size
    splitter.commit(0)
    splitter.feed(wire[:3])
    assert splitter.next_frame() is None and splitter.buffered == 3
    splitter.feed(wire[3:500])
    assert splitter.next_frame() is None and splitter.buffered == 500    # now in place
    splitter.feed(wire[500:] + wire[:10])
    assert splitter.buffered == len(wire) + 10
    assert splitter.next_frame() == body
    assert splitter.buffered == 10
    assert iter(splitter) is splitter


# --- garbage ---------------------------------------------------------------------------------------------------

def garbage_for(proto: Protocol):
    """Random bytes, alone or after valid frames (so that later headers get parsed too)."""
    prefix = st.lists(proto.frames, max_size=2).map(lambda frames: b"".join(w for w, _ in frames))
    tail = st.binary(min_size=1, max_size=400)
    token_tail = tail.map(lambda b: struct.pack(">I", TUBEMQ_TOKEN) + b)
    return st.tuples(prefix, st.one_of(tail, token_tail) if proto.name == "tubemq" else tail).map(b"".join)


@protocols
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_garbage_only_raises_fastmq_errors(proto, data):
    stream = data.draw(garbage_for(proto), label="stream")
    chunks = data.draw(st.lists(st.integers(1, 64), min_size=1, max_size=6), label="chunks")
    max_frame_size = data.draw(st.sampled_from([None, 0, 100, 70_000]), label="max_frame_size")
    splitter = proto.splitter() if max_frame_size is None else proto.splitter(max_frame_size=max_frame_size)
    split = data.draw(st.sampled_from([split_by_feed, split_by_recv]), label="driver")
    try:
        split(splitter, stream, chunks)
    except FastMQError as error:
        assert isinstance(error, ProtocolError)
        with pytest.raises(ProtocolError):
            splitter.next_frame()
    assert splitter.buffered <= len(stream)


# --- take_buffered: the stream changes below the splitter after a frame ----------------------------------------

@protocols
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_take_buffered_after_a_frame_returns_exactly_the_bytes_past_it(proto, data):
    frames = data.draw(st.lists(proto.frames, min_size=1, max_size=4))
    wire = b"".join(w for w, _ in frames)
    first_end = len(frames[0][0])
    rest = wire[first_end:]
    cut = data.draw(st.integers(first_end, len(wire)))   # how far the last recv read past the first frame
    splitter = proto.splitter()
    splitter.feed(wire[:cut])
    assert splitter.next_frame() == frames[0][1]
    assert splitter.take_buffered() == rest[:cut - first_end]
    assert splitter.buffered == 0 and splitter.next_frame() is None
    # The splitter takes the following bytes as a fresh stream: whatever remained of the frames comes out.
    splitter.feed(rest)
    assert list(splitter) == [expected for _, expected in frames[1:]]


def test_take_buffered_refuses_inside_a_frame_received_in_place():
    body = pseudo_random_bytes(3, 300_000)
    splitter = KafkaFrameSplitter()
    splitter.feed(kafka_wire(body)[0][:1000])
    assert splitter.next_frame() is None          # header validated, the frame is received in place
    with pytest.raises(ValueError, match="not at a frame boundary"):
        splitter.take_buffered()
