"""Messages in and out of the store, checked against records pulled from a real RocketMQ broker (ali-ons'
fixtures; their message ids are the ones ali-ons' own tests expect)."""
from __future__ import annotations

import zlib

import pytest

from fastmq.errors import CorruptDataError
from fastmq.store import StoredMessage, create_message_id, decode_message_id, decode_messages
from fastmq.store.message import build_properties, iter_messages, join_keys, pack_host, unpack_host

from tests.support.shared import golden_path


def golden(name: str) -> bytes:
    return golden_path("rocketmq", name).read_bytes()


class TestGoldenRecords:
    def test_single_message(self):
        data = golden("ali-ons-message.bin")
        message = StoredMessage.decode(data)
        assert message.msg_id == "0ADA91A6000029CC0000006500E59F3E"
        assert message.body == b'{"room":"1","msg":"1"}'
        assert message.topic == "TopicTest" and message.tags == "TagA" and message.keys == []
        assert message.body_crc == zlib.crc32(message.body) & 0x7FFFFFFF
        assert message.store_host == ("10.218.145.166", 10700)
        assert message.store_size == 132 and message.queue_id == 0

    def test_batch_of_three(self):
        data = golden("ali-ons-batch_message.bin")
        messages = []
        position = 0
        for _ in range(3):
            message = StoredMessage.decode(data, position)
            messages.append(message)
            position += message.store_size
        assert [m.msg_id for m in messages] == ["0ADA91A6000029CC000000659560A2AA",
                                                "0ADA91A6000029CC000000659560D349",
                                                "0ADA91A6000029CC000000659560D578"]
        assert all(m.body == b"Hello MetaQ !!!" for m in messages)
        assert [m.queue_offset for m in messages] == [278, 279, 280]
        # The bytes after the third record are leftover buffer garbage, not a message.
        with pytest.raises(CorruptDataError):
            StoredMessage.decode(data, position)
        assert len(decode_messages(data[:position])) == 3

    def test_trailing_garbage_is_an_error(self):
        with pytest.raises(CorruptDataError):
            list(iter_messages(golden("ali-ons-message.bin")))

    def test_flipped_body_bit_fails_crc(self):
        data = bytearray(golden("ali-ons-message.bin"))
        data[0x58] ^= 1
        with pytest.raises(CorruptDataError, match="CRC"):
            StoredMessage.decode(data)
        assert StoredMessage.decode(data, check_crc=False).body != b'{"room":"1","msg":"1"}'


class TestMessageIds:
    def test_decode_known_id(self):
        # The id and the values ali-ons' tests expect from it.
        assert decode_message_id("0ADA91A6000029CC0000006504009B6F") == (("10.218.145.166", 10700), 433858845551)

    def test_round_trip_ipv4_and_ipv6(self):
        for host in (("10.0.0.1", 10911), ("fe80::1", 10911)):
            msg_id = create_message_id(pack_host(host), 123456789)
            assert decode_message_id(msg_id) == (host, 123456789)

    @pytest.mark.parametrize("bad", ["xyz", "00", "0ADA91A6000029CC00000065"])
    def test_bad_ids(self, bad):
        with pytest.raises(ValueError):
            decode_message_id(bad)


def test_properties_and_keys():
    assert join_keys(["a", "b"]) == "a b" and join_keys("a") == "a" and join_keys([]) is None
    assert build_properties(None, None, None) == b""
    assert build_properties("T", "k1 k2", {"x": "y"}) == b"x\x01y\x02KEYS\x01k1 k2\x02TAGS\x01T\x02"
    assert unpack_host(pack_host(("1.2.3.4", 5))) == ("1.2.3.4", 5)
