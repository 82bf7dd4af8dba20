"""fill_batch and fill_message (fastmq/broker/rocketmq/_native/rocketmq_store.pyx): a SEND_BATCH_MESSAGE body, or
one SEND_MESSAGE's body and properties text, goes into a store batch exactly as decoding it message by message and
adding each (MessageBatch.add) would put it: the same CommitLog records, ConsumeQueue units (tags codes) and index
items; anything else raises a clear error."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from fastmq._native.store_codec import MessageBatch, encode_properties, tags_hash_code
from fastmq.broker.rocketmq._native.rocketmq_store import fill_batch, fill_message
from fastmq.errors import ProtocolError

STORE_HOST = bytes([127, 0, 0, 1, 0, 0, 0x26, 0x94])
BORN_HOST = bytes([10, 0, 0, 7, 0, 0, 0x30, 0x39])
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=6)
PROPERTIES = st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "ü"]), TEXT, max_size=4)
ITEMS = st.lists(st.tuples(st.binary(max_size=40), PROPERTIES, st.integers(-2 ** 31, 2 ** 31 - 1)), max_size=6)


def encode_batch_body(items: list[tuple[bytes, bytes, int]]) -> bytes:
    """A SEND_BATCH_MESSAGE body written here from the layout (the producer writes its own in SendEncoder)."""
    return b"".join(
        struct.pack(">iiiii", 22 + len(body) + len(properties), 0, 0, flag, len(body)) + body
        + struct.pack(">h", len(properties)) + properties
        for body, properties, flag in items)


def new_batch() -> MessageBatch:
    return MessageBatch("batch-topic", 1, STORE_HOST, 1 << 20, 1 << 24)


def written(batch: MessageBatch) -> tuple[bytes, bytes]:
    """The batch's CommitLog records and ConsumeQueue units."""
    batch.begin(5, 1_700_000_000_000)
    records = bytearray(batch.total_bytes + 8)
    batch.encode(records, 0, 0)
    units = bytearray(20 * batch.count)
    batch.put_units(units, 0, 0)
    return bytes(records), bytes(units)


@settings(max_examples=60, deadline=None)
@given(ITEMS, st.booleans())
def test_a_filled_batch_holds_what_adding_each_message_would(items, with_born_host):
    born_host = BORN_HOST if with_born_host else None
    filled, added = new_batch(), new_batch()
    body = encode_batch_body([(data, encode_properties(properties), flag) for data, properties, flag in items])
    assert fill_batch(filled, body, 1234, born_host) == len(items)
    for data, properties, flag in items:
        tags = properties.get("TAGS")
        added.add(data, encode_properties(properties), tags_hash_code(tags) if tags else 0, 1234, flag,
                  properties.get("KEYS"), properties.get("UNIQ_KEY"), born_host)
    assert filled.count == added.count and filled.index_items == added.index_items
    assert written(filled) == written(added)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=40), PROPERTIES, st.integers(-2 ** 31, 2 ** 31 - 1), st.booleans())
def test_a_filled_message_is_what_adding_it_would_store(data, properties, flag, with_born_host):
    born_host = BORN_HOST if with_born_host else None
    filled, added = new_batch(), new_batch()
    fill_message(filled, data, encode_properties(properties).decode("utf-8"), 1234, flag, born_host)
    tags = properties.get("TAGS")
    added.add(data, encode_properties(properties), tags_hash_code(tags) if tags else 0, 1234, flag,
              properties.get("KEYS"), properties.get("UNIQ_KEY"), born_host)
    assert filled.count == added.count == 1 and filled.index_items == added.index_items
    assert written(filled) == written(added)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=60), st.text(max_size=60))
def test_arbitrary_messages_fill_or_raise(data, properties):
    try:
        fill_message(new_batch(), data, properties, 0, 0)
    except ValueError:
        pass


def test_bad_messages_are_refused_clearly():
    with pytest.raises(ValueError, match="surrogates not allowed"):
        fill_message(new_batch(), b"body", "TAGS\x01\udc80\x02", 0, 0)
    small = MessageBatch("batch-topic", 1, STORE_HOST, 10, 1 << 24)
    with pytest.raises(ValueError, match="exceeds the maximum 10"):
        fill_message(small, b"x" * 11, "", 0, 0)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_bodies_fill_or_raise(data):
    try:
        fill_batch(new_batch(), data, 0)
    except (ProtocolError, ValueError):
        pass


def test_bad_bodies_are_refused_clearly():
    good = encode_batch_body([(b"body", b"TAGS\x01a\x02", 0)])
    with pytest.raises(ProtocolError, match="at least 22"):
        fill_batch(new_batch(), good[:10], 0)
    with pytest.raises(ProtocolError, match="announces 3"):
        fill_batch(new_batch(), b"\x00\x00\x00\x03" + good[4:], 0)
    with pytest.raises(ProtocolError, match="body length"):
        fill_batch(new_batch(), good[:16] + b"\x00\x00\x03\xe7" + good[20:], 0)
    with pytest.raises(ValueError, match="utf-8"):
        fill_batch(new_batch(), encode_batch_body([(b"body", b"TAGS\x01\xff\x02", 0)]), 0)
    small = MessageBatch("batch-topic", 1, STORE_HOST, 10, 1 << 24)
    with pytest.raises(ValueError, match="exceeds the maximum 10"):
        fill_batch(small, encode_batch_body([(b"x" * 11, b"", 0)]), 0)
