"""The compiled store codec (fastmq/_native/store_codec.pyx): records, ConsumeQueue units, index entries, hashes.
Independent oracles: struct for layouts, zlib for BODYCRC, Java hashCode values known from the JDK."""
from __future__ import annotations

import struct
import zlib
from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastmq._native import index_codec, queue_codec, store_codec
from fastmq.errors import CorruptDataError, TruncatedError
from fastmq.store.message import pack_host

HOST = pack_host(("127.0.0.1", 10911))
HOST6 = pack_host(("::1", 10911))


def encode(topic="TopicTest", body=b"hello", properties=b"", queue_id=3, queue_offset=7, physical_offset=0,
           born_host=HOST, store_host=HOST, sys_flag=0, size=4096, position=0):
    buf = bytearray(size)
    written = store_codec.encode_message(buf, position, topic, queue_id, 11, queue_offset, physical_offset, sys_flag,
                                         1_600_000_000_123, born_host, 1_600_000_000_456, store_host, 2, 99, body,
                                         properties, end_of_file_blank=False)
    return buf, written


class TestRecordLayout:
    def test_fields_at_rocketmq_offsets(self):
        buf, size = encode(properties=b"TAGS\x01TagA\x02")
        assert size == store_codec.message_length(5, 9, 10) == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 \
            + 4 + 5 + 1 + 9 + 2 + 10
        total, magic, crc, queue_id, flag, queue_offset, physical, sys_flag, born = struct.unpack_from(
            ">iiiiiqqiq", buf)
        assert (total, magic, queue_id, flag, queue_offset, physical, sys_flag, born) == (
            size, store_codec.MESSAGE_MAGIC, 3, 11, 7, 0, 0, 1_600_000_000_123)
        assert store_codec.MESSAGE_MAGIC == -626843481      # 0xDAA320A7
        assert crc == zlib.crc32(b"hello") & 0x7FFFFFFF
        assert buf[48:56] == HOST
        assert struct.unpack_from(">q", buf, 56)[0] == 1_600_000_000_456
        assert buf[64:72] == HOST
        assert struct.unpack_from(">iqi", buf, 72) == (2, 99, 5)
        assert buf[88:93] == b"hello"
        assert buf[93] == 9 and buf[94:103] == b"TopicTest"
        assert struct.unpack_from(">h", buf, 103)[0] == 10 and buf[105:115] == b"TAGS\x01TagA\x02"
        assert not any(buf[size:])

    def test_long_topic_uses_v2_magic_and_short_length(self):
        topic = "t" * 200
        buf, size = encode(topic=topic)
        assert struct.unpack_from(">i", buf, 4)[0] == store_codec.MESSAGE_MAGIC_V2 == -626843477
        assert struct.unpack_from(">h", buf, 88 + 5)[0] == 200
        assert store_codec.decode_message(buf, 0, size)[0] == topic

    def test_ipv6_hosts_set_sysflag_bits(self):
        buf, size = encode(born_host=HOST6, store_host=HOST6)
        assert struct.unpack_from(">i", buf, 36)[0] == 0x30
        fields = store_codec.decode_message(buf, 0, size)
        assert fields[8] == HOST6 and fields[9] == HOST6 and fields[11] == 0x30

    def test_round_trip(self):
        properties = store_codec.encode_properties({"KEYS": "a b", "TAGS": "T", "x": "中文"})
        buf, size = encode(body=b"\x00\xff" * 100, properties=properties, physical_offset=123)
        fields = store_codec.decode_message(buf, 0, size)
        assert fields[:5] == ("TopicTest", 3, 7, 123, b"\x00\xff" * 100)
        assert fields[5] == {"KEYS": "a b", "TAGS": "T", "x": "中文"}
        assert fields[6:8] == (1_600_000_000_123, 1_600_000_000_456)
        assert fields[10:16] == (11, 0, 2, 99, zlib.crc32(b"\x00\xff" * 100) & 0x7FFFFFFF, size)

    def test_blank_written_when_record_does_not_leave_room(self):
        buf = bytearray(200)
        assert store_codec.encode_message(buf, 100, "T", 0, 0, 0, 100, 0, 0, HOST, 0, HOST, 0, 0, b"x" * 50,
                                          b"") == 0
        assert struct.unpack_from(">ii", buf, 100) == (100, store_codec.BLANK_MAGIC)
        request = store_codec.check_message(buf, 100)
        assert (request.status, request.msg_size) == (store_codec.STATUS_BLANK, 100)

    def test_exact_fit_still_needs_blank_room(self):
        size = store_codec.message_length(10, 1, 0)
        buf = bytearray(size + 7)
        assert store_codec.encode_message(buf, 0, "T", 0, 0, 0, 0, 0, 0, HOST, 0, HOST, 0, 0, b"x" * 10, b"") == 0
        buf = bytearray(size + 8)
        assert store_codec.encode_message(buf, 0, "T", 0, 0, 0, 0, 0, 0, HOST, 0, HOST, 0, 0, b"x" * 10, b"") == size

    @pytest.mark.parametrize("bad_host", [b"", b"\x00" * 7, b"\x00" * 16])
    def test_bad_host_length(self, bad_host):
        with pytest.raises(ValueError):
            encode(born_host=bad_host)

    def test_properties_separators_refused(self):
        with pytest.raises(ValueError):
            store_codec.encode_properties({"a\x01": "b"})
        with pytest.raises(ValueError):
            store_codec.encode_properties({"a": "b\x02"})
        with pytest.raises(TypeError):
            store_codec.encode_properties({"a": 1})

    def test_decode_properties_is_lenient_like_rocketmq(self):
        assert store_codec.decode_properties(b"a\x01b\x02junk\x02c\x01d") == {"a": "b", "c": "d"}
        assert store_codec.decode_properties(b"") == {}


class TestCheckMessage:
    def test_ok_request_carries_dispatch_fields(self):
        properties = store_codec.encode_properties({"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "U1"})
        buf, size = encode(properties=properties, physical_offset=0)
        request = store_codec.check_message(buf, 0, expected_offset=0)
        assert request.ok
        assert (request.topic, request.queue_id, request.commitlog_offset, request.msg_size) == ("TopicTest", 3, 0,
                                                                                                size)
        assert request.tags_code == store_codec.java_hash("TagA") == 2598919
        assert (request.keys, request.uniq_key, request.consume_queue_offset) == ("k1 k2", "U1", 7)
        assert request.store_timestamp == 1_600_000_000_456

    def test_zero_size_is_end(self):
        assert store_codec.check_message(bytearray(100), 0).status == store_codec.STATUS_END

    def test_torn_record_without_size_is_end(self):
        # The writer stores TOTALSIZE last: a record killed half-way has every field but no size.
        buf, size = encode()
        buf[0:4] = b"\x00\x00\x00\x00"
        assert store_codec.check_message(buf, 0).status == store_codec.STATUS_END

    def test_incomplete_when_readable_end_cuts_record(self):
        buf, size = encode()
        assert store_codec.check_message(buf, 0, size - 1).status == store_codec.STATUS_INCOMPLETE
        assert store_codec.check_message(buf, 0, size).status == store_codec.STATUS_OK

    def test_crc_mismatch_is_corrupt(self):
        buf, size = encode()
        buf[88] ^= 0xFF
        request = store_codec.check_message(buf, 0)
        assert request.status == store_codec.STATUS_CORRUPT and "CRC" in request.error
        assert store_codec.check_message(buf, 0, check_crc=False).ok

    def test_wrong_physical_offset_is_corrupt(self):
        buf, size = encode(physical_offset=4096)
        assert store_codec.check_message(buf, 0, expected_offset=0).status == store_codec.STATUS_CORRUPT
        assert store_codec.check_message(buf, 0, expected_offset=4096).ok

    def test_lengths_must_add_up(self):
        buf, size = encode()
        struct.pack_into(">i", buf, 0, size + 1)
        assert store_codec.check_message(buf, 0).status == store_codec.STATUS_CORRUPT

    def test_blank_must_reach_end_of_file(self):
        buf = bytearray(100)
        struct.pack_into(">ii", buf, 0, 50, store_codec.BLANK_MAGIC)
        assert store_codec.check_message(buf, 0).status == store_codec.STATUS_CORRUPT

    def test_pick_store_timestamp(self):
        buf, size = encode()
        assert store_codec.pick_store_timestamp(buf, 0) == 1_600_000_000_456
        assert store_codec.pick_store_timestamp(bytearray(100), 0) == -1
        buf6, _ = encode(born_host=HOST6)
        assert store_codec.pick_store_timestamp(buf6, 0) == 1_600_000_000_456


class TestDecodeErrors:
    def test_truncated(self):
        buf, size = encode()
        with pytest.raises(TruncatedError):
            store_codec.decode_message(bytes(buf[:size - 1]))

    def test_not_a_record(self):
        with pytest.raises(CorruptDataError):
            store_codec.decode_message(b"\x00" * 200)
        with pytest.raises(CorruptDataError):
            store_codec.decode_message(b"\x00\x00\x00\x80" + b"\xff" * 124)

    def test_size_mismatch_with_unit(self):
        buf, size = encode()
        with pytest.raises(CorruptDataError):
            store_codec.decode_message(buf, 0, size + 1)

    def test_invalid_utf8_topic(self):
        buf, size = encode(topic="ab")
        buf[88 + 5 + 1] = 0xFF
        with pytest.raises(CorruptDataError):
            store_codec.decode_message(buf, 0, size)


def java_hash_reference(text: str) -> int:
    """String.hashCode as the JDK defines it: s[0]*31^(n-1) + ... over UTF-16 code units, in 32-bit ints."""
    units = struct.unpack(f">{len(text.encode('utf-16-be', 'surrogatepass')) // 2}H",
                          text.encode("utf-16-be", "surrogatepass"))
    value = 0
    for unit in units:
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class TestJavaHash:
    @pytest.mark.parametrize("text, expected", [
        ("", 0), ("hello", 99162322), ("TagA", 2598919), ("polygenelubricants", -2147483648),
        ("\U0001F600", 1772899),   # surrogate pair D83D DE00, as Java sees it
    ])
    def test_known_jdk_values(self, text, expected):
        assert store_codec.java_hash(text) == expected == java_hash_reference(text)

    @given(st.text(max_size=40))
    def test_matches_reference(self, text):
        assert store_codec.java_hash(text) == java_hash_reference(text)

    def test_index_hash_is_non_negative_like_rocketmq(self):
        assert index_codec.index_key_hash("polygenelubricants") == 0
        assert index_codec.index_key_hash("hello") == 99162322
        negative = next(s for s in (f"TopicTest#key-{i}" for i in range(1000)) if java_hash_reference(s) < 0)
        assert index_codec.index_key_hash(negative) == -java_hash_reference(negative)

    def test_tags_code(self):
        assert store_codec.tags_hash_code("") == 0
        assert store_codec.tags_hash_code("polygenelubricants") == -2147483648


def unit_file(units) -> bytearray:
    return bytearray(b"".join(struct.pack(">qiq", *unit) for unit in units))


class TestQueueUnits:
    def test_scan_all(self):
        data = unit_file([(100 * i, 50, i % 3) for i in range(10)])
        units = queue_codec.QueueUnits(100)
        assert units.scan(data, 0, len(data), 40) == 10
        assert list(units.commitlog_offsets) == [100 * i for i in range(10)]
        assert list(units.sizes) == [50] * 10
        assert list(units.queue_offsets) == list(range(40, 50))
        assert units.total_bytes == 500

    def test_tag_filter_and_blank_units(self):
        data = unit_file([(0, queue_codec.CQ_BLANK_SIZE, 0)] * 2 + [(100 * i, 50, i % 3) for i in range(2, 10)])
        units = queue_codec.QueueUnits(100)
        assert units.scan(data, 0, len(data), 0, array("q", [0, 2])) == 10
        assert list(units.queue_offsets) == [2, 3, 5, 6, 8, 9]

    def test_capacity_bytes_and_unit_limits(self):
        data = unit_file([(100 * i, 50, 0) for i in range(10)])
        units = queue_codec.QueueUnits(3)
        assert units.scan(data, 20, len(data), 1) == 3 and units.full
        units = queue_codec.QueueUnits(10)
        assert units.scan(data, 0, len(data), 0, max_bytes=120) == 2
        units = queue_codec.QueueUnits(10)
        assert units.scan(data, 0, len(data), 0, max_bytes=10) == 1   # the first unit always goes
        units = queue_codec.QueueUnits(10)
        assert units.scan(data, 0, len(data), 0, array("q", [5]), max_units=4) == 4 and len(units) == 0

    def test_stops_at_end_position_and_on_unit_boundary_only(self):
        data = unit_file([(100 * i, 50, 0) for i in range(10)])
        units = queue_codec.QueueUnits(100)
        assert units.scan(data, 0, 95, 0) == 4
        with pytest.raises(ValueError):
            units.scan(data, 10, len(data), 0)

    def test_gather_copies_records_and_checks_them(self):
        file = bytearray(4096)
        offsets = []
        position = 0
        for i in range(3):
            size = store_codec.encode_message(file, position, "T", 0, 0, i, 8192 + position, 0, 0, HOST, 0, HOST, 0,
                                              0, b"m%d" % i, b"")
            offsets.append((8192 + position, size))
            position += size
        data = unit_file([(offset, size, 0) for offset, size in offsets])
        units = queue_codec.QueueUnits(10)
        units.scan(data, 0, len(data), 0)
        out = bytearray(units.total_bytes)
        assert units.gather(file, 8192, position, 0, out, 0) == (3, units.total_bytes)
        assert out == file[:position]
        other_queue = queue_codec.QueueUnits(10, queue_id=1)
        other_queue.scan(data, 0, len(data), 0)
        with pytest.raises(CorruptDataError):
            other_queue.gather(file, 8192, position, 0, bytearray(units.total_bytes), 0)
        shifted = queue_codec.QueueUnits(10)
        shifted.scan(data, 0, len(data), 5)                 # units claiming other queue offsets
        with pytest.raises(CorruptDataError):
            shifted.gather(file, 8192, position, 0, bytearray(units.total_bytes), 0)
        struct.pack_into(">i", file, 0, 12345)
        with pytest.raises(CorruptDataError):
            units.gather(file, 8192, position, 0, bytearray(units.total_bytes), 0)

    def test_count_valid_units(self):
        data = unit_file([(0, 10, 0), (10, 10, 0)]) + bytearray(40)
        assert queue_codec.count_valid_units(data) == (2, 20)
        assert queue_codec.count_valid_units(data, 15) == (0, 15)       # goes back before the previous file
        filler = unit_file([(0, queue_codec.CQ_BLANK_SIZE, 0)] * 2 + [(500, 10, 0), (400, 10, 0)])
        assert queue_codec.count_valid_units(filler) == (3, 510)         # 400 < 510: out of order


class TestMessageBatch:
    def test_encodes_consecutive_records_and_units(self):
        batch = store_codec.MessageBatch("T", 1, HOST, 1000, 4096)
        for i in range(3):
            batch.add(b"body%d" % i, b"TAGS\x01A\x02", 65, 1000 + i, i, "k%d" % i if i == 1 else None)
        assert batch.index_items == [(1, "k1", None)]
        batch.begin(5, 2000)
        file = bytearray(4096)
        end = batch.encode(file, 0, 65536)
        assert batch.done and end == batch.total_bytes
        for i in range(3):
            fields = store_codec.decode_message(file, batch.commitlog_offset(i) - 65536, batch.size(i))
            assert fields[1:5] == (1, 5 + i, batch.commitlog_offset(i), b"body%d" % i)
            assert fields[7] == 2000 and fields[10] == i
        queue_file = bytearray(40)
        assert batch.put_units(queue_file, 0, 0) == 2
        assert batch.put_units(bytearray(100), 0, 2) == 1
        assert struct.unpack_from(">qiq", queue_file, 20) == (batch.commitlog_offset(1), batch.size(1), 65)

    def test_rolls_over_with_a_blank(self):
        batch = store_codec.MessageBatch("T", 0, HOST, 1000, 300)
        for i in range(4):
            batch.add(b"x" * 100)
        batch.begin(0, 0)
        first = bytearray(512)
        assert batch.encode(first, 0, 0) == 512 and batch.written == 2
        assert store_codec.check_message(first, 2 * batch.size(0)).status == store_codec.STATUS_BLANK
        assert batch.encode(bytearray(512), 0, 512) == 2 * batch.size(0) and batch.done

    def test_limits(self):
        batch = store_codec.MessageBatch("T", 0, HOST, 10, 4096)
        with pytest.raises(ValueError):
            batch.add(b"x" * 11)
        batch = store_codec.MessageBatch("T", 0, HOST, 10_000, 200)
        with pytest.raises(ValueError):
            batch.add(b"x" * 200)


def index_file(slots=8, entries=16) -> bytearray:
    return bytearray(40 + slots * 4 + entries * 20)


class TestIndex:
    def test_put_layout_matches_rocketmq(self):
        buf = index_file()
        key_hash = index_codec.index_key_hash("TopicTest#k1")
        assert index_codec.index_put(buf, 8, 16, key_hash, 1234, 1_000_000)
        begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = struct.unpack_from(">qqqqii", buf)
        assert (begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count) == (1_000_000, 1_000_000, 1234,
                                                                                    1234, 1, 2)
        slot = 40 + (key_hash % 8) * 4
        assert struct.unpack_from(">i", buf, slot)[0] == 1
        assert struct.unpack_from(">iqii", buf, 40 + 8 * 4 + 20) == (key_hash, 1234, 0, 0)

    def test_chain_and_time_range(self):
        buf = index_file()
        key_hash = index_codec.index_key_hash("T#k")
        for i in range(5):
            assert index_codec.index_put(buf, 8, 16, key_hash, 100 * i, 1_000_000 + 10_000 * i)
        assert index_codec.index_select(buf, 8, 16, key_hash, 10, 0, 2 ** 62) == [400, 300, 200, 100, 0]
        assert index_codec.index_select(buf, 8, 16, key_hash, 2, 0, 2 ** 62) == [400, 300]
        assert index_codec.index_select(buf, 8, 16, key_hash, 10, 1_010_000, 1_030_000) == [300, 200, 100]
        other = index_codec.index_key_hash("T#other")
        assert index_codec.index_select(buf, 8, 16, other, 10, 0, 2 ** 62) == []

    def test_full(self):
        buf = index_file(entries=3)
        assert index_codec.index_put(buf, 8, 3, 1, 0, 1)
        assert index_codec.index_put(buf, 8, 3, 2, 0, 1)
        assert not index_codec.index_put(buf, 8, 3, 3, 0, 1)

    def test_loops_in_a_corrupt_chain_end(self):
        buf = index_file()
        for i in range(3):
            index_codec.index_put(buf, 8, 16, 5, i, 1000)
        struct.pack_into(">i", buf, 40 + 8 * 4 + 1 * 20 + 16, 3)   # entry 1 now points "back" to entry 3
        assert index_codec.index_select(buf, 8, 16, 5, 100, 0, 2 ** 62) == [2, 1, 0]

    def test_small_buffer_is_corrupt(self):
        with pytest.raises(CorruptDataError):
            index_codec.index_select(bytearray(50), 8, 16, 1, 10, 0, 1)


# ---------------------------------------------------------------------------------------------------------
# Fuzz: random, truncated and corrupted input gives fastmq's own errors (or statuses), never a crash.
# ---------------------------------------------------------------------------------------------------------

VALID, VALID_SIZE = encode(body=b"fuzz" * 10, properties=b"TAGS\x01TagA\x02KEYS\x01k\x02", physical_offset=0)
VALID = bytes(VALID[:VALID_SIZE])


@given(st.binary(max_size=400))
def test_decode_random_bytes(data):
    try:
        store_codec.decode_message(data)
    except (CorruptDataError, TruncatedError):
        pass


@given(st.data())
def test_decode_mutated_record(data):
    record = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 4))):
        record[data.draw(st.integers(0, len(record) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(record)))
    try:
        fields = store_codec.decode_message(bytes(record[:cut]))
    except (CorruptDataError, TruncatedError):
        return
    # Whatever still decodes is whole and its body passed the CRC check.
    assert zlib.crc32(fields[4]) & 0x7FFFFFFF == fields[14] and fields[15] <= cut


@given(st.binary(min_size=0, max_size=300), st.data())
def test_check_message_never_raises_on_data(data, draw):
    position = draw.draw(st.integers(0, len(data)))
    readable = draw.draw(st.integers(position, len(data)))
    request = store_codec.check_message(data, position, readable, draw.draw(st.integers(-1, 1000)))
    assert request.status in (store_codec.STATUS_OK, store_codec.STATUS_BLANK, store_codec.STATUS_END,
                              store_codec.STATUS_INCOMPLETE, store_codec.STATUS_CORRUPT)
    if request.ok:
        assert 0 < request.msg_size <= readable - position


@given(st.integers(-2**31, 2**31 - 1), st.integers(0, 88))
def test_forged_lengths_allocate_nothing(forged, where):
    record = bytearray(VALID)
    struct.pack_into(">i", record, {0: 0, 1: 84}.get(where % 2), forged)
    try:
        fields = store_codec.decode_message(bytes(record))
    except (CorruptDataError, TruncatedError):
        return
    assert len(fields[4]) <= len(record)


@given(st.lists(st.binary(max_size=60), max_size=6))
def test_iter_messages_on_random_concatenations(chunks):
    from fastmq.store.message import iter_messages
    data = VALID + b"".join(chunks) + VALID
    try:
        for message in iter_messages(data):
            assert message.body == b"fuzz" * 10
    except (CorruptDataError, TruncatedError):
        pass


@given(st.binary(max_size=600), st.integers(1, 30), st.integers(2, 30), st.integers(0, 2**31 - 1))
def test_index_select_on_random_files(data, slots, entries, key_hash):
    buf = bytearray(40 + slots * 4 + entries * 20)
    buf[:len(data)] = data[:len(buf)]
    found = index_codec.index_select(buf, slots, entries, key_hash, 100, -2**62, 2**62)
    assert len(found) <= entries
    index_codec.index_put(buf, slots, entries, key_hash, 1, 1)


@given(st.binary(max_size=500), st.integers(0, 20), st.lists(st.integers(-5, 5), max_size=4))
def test_unit_scan_on_random_files(data, start_unit, codes):
    units = queue_codec.QueueUnits(50)
    consumed = units.scan(data, start_unit * 20, len(data), 7, array("q", sorted(codes)) if codes else None)
    assert 0 <= consumed <= max(0, len(data) // 20 - start_unit)
    assert all(size > 0 for size in units.sizes)
