"""fastmq.kafka.aio: aiokafka's own usage examples, run by changing the import, against the embedded broker
(and Tansu where its leniencies do not matter); the event loop stays responsive while records flow."""
from __future__ import annotations

import asyncio
import gc
import uuid

import pytest

from fastmq.kafka.aio import (
    AIOKafkaAdminClient, AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, ConsumerStoppedError,
    TopicPartition,
)
from fastmq.kafka.aio import errors as aio_errors
from fastmq.kafka.admin import NewTopic
from fastmq._native.hashing import kafka_partition
from fastmq.kafka import errors as kerrors
from fastmq.kafka._native.aio_futures import RecordFutures
from tests.support.reading import read_partitions
from tests.support.ticker import Ticker

WAIT = 30.0


def run(coroutine):
    """Run a test coroutine on a fresh event loop, bounded in time."""
    return asyncio.run(asyncio.wait_for(coroutine, WAIT))


def topic_name(prefix: str = "aio") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["embedded", "tansu"])
def any_broker(request):
    """Either broker, for examples whose behaviour Tansu gets right."""
    return request.getfixturevalue("embedded_broker" if request.param == "embedded" else "tansu")


async def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])


# ---- aiokafka's README / docs examples -------------------------------------------------------------------

def test_readme_producer_and_consumer(any_broker):
    """aiokafka's README: send_and_wait, then `async for` from the earliest offset."""
    topic = topic_name()
    bootstrap = any_broker.bootstrap_servers

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            metadata = await producer.send_and_wait(topic, b"Super message")
        finally:
            await producer.stop()
        assert metadata.topic == topic

        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=topic_name("group"),
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            async for msg in consumer:
                assert (msg.topic, msg.partition, msg.offset, msg.key, msg.value) == (
                    topic, metadata.partition, metadata.offset, None, b"Super message")
                break
        finally:
            await consumer.stop()

    run(main())


def test_manual_commit_example(embedded_broker):
    """aiokafka's manual commit example: getmany in a loop, commit after processing; a second consumer of
    the group starts where the first committed."""
    topic, group = topic_name(), topic_name("group")
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            futures = [await producer.send(topic, f"m{i}".encode(), key=b"k") for i in range(30)]
            await asyncio.gather(*futures)
        seen = []
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            for _ in range(100):
                result = await consumer.getmany(timeout_ms=1000, max_records=7)
                for tp, messages in result.items():
                    seen.extend(m.value for m in messages)
                await consumer.commit()
                if len(seen) >= 20:
                    break
            tp = TopicPartition(topic, 0)
            assert await consumer.committed(tp) == len(seen) == await consumer.position(tp)
        finally:
            await consumer.stop()
        assert seen == [f"m{i}".encode() for i in range(len(seen))]

        async with AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest") as again:
            first = await again.getone()
        assert first.offset == len(seen)

    run(main())


@pytest.fixture(params=["embedded", "apache"])
def real_broker(request):
    """The embedded broker, and Apache Kafka."""
    return request.getfixturevalue("embedded_broker" if request.param == "embedded" else "apache_kafka")


async def read_all(bootstrap: str, tp: TopicPartition, count: int) -> list:
    async with AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        got = []
        for _ in range(50):
            got += (await consumer.getmany(tp, timeout_ms=1000)).get(tp, [])
            if len(got) >= count:
                break
        return got


def test_batch_example(embedded_broker):
    """aiokafka's batch example: create_batch, append until full, send_batch to a partition."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic, partitions=2)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=1000) as producer:
            batch = producer.create_batch()
            appended = 0
            while batch.append(key=None, value=b"x" * 50, timestamp=None) is not None:
                appended += 1
            assert 5 < appended < 20 and batch.record_count() == appended
            partitions = await producer.partitions_for(topic)
            future = await producer.send_batch(batch, topic, partition=sorted(partitions)[1])
            metadata = await future
            assert (metadata.partition, metadata.offset) == (1, 0)
        got = await read_all(bootstrap, TopicPartition(topic, 1), appended)
        assert [m.offset for m in got] == list(range(appended))

    run(main())


def test_send_batch_answers_its_first_records_offset_and_keeps_keys_values_and_order(real_broker):
    # The batch is encoded as it is appended and queued whole (RecordAccumulator.send_built).
    topic = topic_name()
    bootstrap = real_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic, partitions=2)
        tp = TopicPartition(topic, 1)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=4000,
                                    value_serializer=lambda v: v.encode()) as producer:
            for i in range(3):
                await producer.send_and_wait(topic, f"before-{i}", partition=1)
            batches = []
            for round_ in range(2):
                batch = producer.create_batch()
                metadata = [batch.append(key=key_of(round_, i), value=f"v{round_}-{i}", timestamp=None)
                            for i in range(40)]
                assert None not in metadata
                assert [m.offset for m in metadata] == list(range(40)) and metadata[1].crc is None
                # Encoded sizes, as aiokafka's: seven one-byte fields (length, attributes, deltas, key and value
                # lengths, header count), the key, the value.
                assert metadata[1].size == 7 + len(key_of(round_, 1) or b"") + 4
                assert batch.size() == 61 + sum(m.size for m in metadata)
                batches.append(await producer.send_batch(batch, topic, partition=1))
                assert batch.append(key=None, value="late", timestamp=None) is None      # closed, as aiokafka's
                # Sent, the batch keeps no list of its records (the garbage collector would walk it meanwhile).
                assert not [held for held in gc.get_referents(batch) if isinstance(held, list)]
            first, second = [await future for future in batches]
        assert (first.topic, first.partition, first.offset, second.offset) == (topic, 1, 3, 43)
        assert first.serialized_key_size == 2 and first.serialized_value_size == 4 and first.timestamp > 0
        assert second.serialized_key_size == -1 and second.serialized_value_size == 4
        got = await read_all(bootstrap, tp, 83)
        assert [(m.offset, m.key, m.value) for m in got] == (
            [(i, None, b"before-%d" % i) for i in range(3)]
            + [(3 + 40 * r + i, key_of(r, i), b"v%d-%d" % (r, i)) for r in range(2) for i in range(40)])

    def key_of(round_: int, i: int) -> bytes | None:
        # The second batch's first ten records have null keys: the batch starts keeping keys at the first one.
        return None if round_ == 1 and i < 10 else b"k%d" % i

    run(main())


def test_send_batch_of_records_with_headers_or_timestamps_keeps_them(real_broker):
    topic = topic_name()
    bootstrap = real_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        tp = TopicPartition(topic, 0)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
            batch = producer.create_batch()
            batch.append(key=None, value=b"plain", timestamp=None)
            batch.append(key=None, value=b"headed", timestamp=None, headers=[("h", b"1")])
            batch.append(key=b"k", value=b"dated", timestamp=1_700_000_000_000)
            metadata = await (await producer.send_batch(batch, topic, partition=0))
        assert metadata.offset == 0
        got = await read_all(bootstrap, tp, 3)
        assert [(m.value, list(m.headers)) for m in got] == [(b"plain", []), (b"headed", [("h", b"1")]),
                                                              (b"dated", [])]
        assert got[2].timestamp == 1_700_000_000_000 and got[0].timestamp > 1_700_000_000_000

    run(main())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_send_batch_compresses_with_the_producers_codec(real_broker, codec):
    """The batch is encoded into the producer's own builder, so it goes out compressed as its other batches do."""
    topic = topic_name()
    bootstrap = real_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                    max_batch_size=65536) as producer:
            batch = producer.create_batch()
            for i in range(200):
                headers = [("n", b"%d" % i)] if i % 7 == 0 else None
                assert batch.append(key=b"k%d" % (i % 3), value=b"v%d-" % i * 20, timestamp=None,
                                    headers=headers) is not None
            metadata = await (await producer.send_batch(batch, topic, partition=0))
        assert metadata.offset == 0
        got = await read_all(bootstrap, TopicPartition(topic, 0), 200)
        assert [(m.key, m.value, list(m.headers)) for m in got] == [
            (b"k%d" % (i % 3), b"v%d-" % i * 20, [("n", b"%d" % i)] if i % 7 == 0 else []) for i in range(200)]

    run(main())


def test_send_batch_keeps_its_place_among_sends_and_waits_for_memory_and_metadata(real_broker):
    """Batches sent between send()s keep the records' order; a producer that never asked for the topic fetches its
    metadata for the first batch; with buffer memory for two batches, send_batch waits (off the loop) for the
    acknowledgements; an empty batch is refused."""
    topic = topic_name()
    bootstrap = real_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        tp = TopicPartition(topic, 0)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=2048, buffer_memory=4096,
                                    linger_ms=50) as producer:
            with pytest.raises(ValueError):
                await producer.send_batch(producer.create_batch(), topic, partition=0)
            expected, firsts = [], []
            with Ticker() as ticker:
                for round_ in range(30):
                    batch = producer.create_batch()         # the first: before anything asked for the topic
                    values = [b"batch-%d-%d-" % (round_, i) + b"x" * 40 for i in range(20)]
                    for value in values:
                        assert batch.append(key=None, value=value, timestamp=None) is not None
                    firsts.append((await producer.send_batch(batch, topic, partition=0), len(expected)))
                    expected += values
                    await producer.send(topic, b"single-%d" % round_, partition=0)
                    expected.append(b"single-%d" % round_)
                offsets = [((await future).offset, first) for future, first in firsts]
            assert ticker.ticks > 0
        assert all(offset == first for offset, first in offsets)
        got = await read_all(bootstrap, tp, len(expected))
        assert [m.value for m in got] == expected and [m.offset for m in got] == list(range(len(expected)))

    run(main())


def test_send_batch_in_transactions(real_broker):
    """A batch joins the producer's transaction: committed, a read_committed consumer reads it once; aborted,
    never."""
    topic = topic_name()
    bootstrap = real_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=topic_name("txn")) as producer:
            for outcome in ("commit", "abort", "commit"):
                await producer.begin_transaction()
                batch = producer.create_batch()
                for i in range(5):
                    batch.append(key=None, value=b"%s-%d" % (outcome.encode(), i), timestamp=None)
                await producer.send_batch(batch, topic, partition=0)
                if outcome == "commit":
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        assert await read_committed(bootstrap, topic, 10) == [b"commit-%d" % i for i in range(5)] * 2

    run(main())


def test_send_batch_to_a_partition_the_topic_lacks_fails(embedded_broker):
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
            await producer.send_and_wait(topic, b"known")
            batch = producer.create_batch()
            batch.append(key=None, value=b"x", timestamp=None)
            with pytest.raises((ValueError, kerrors.KafkaError)):
                await (await producer.send_batch(batch, topic, partition=5))

    run(main())


def test_send_many_one_future_for_many_records(embedded_broker):
    """send_many(): keys, headers and values in order over several partitions, one future for all of them with
    each record's metadata; under memory pressure it waits on the loop; bad columns are refused."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers
    count = 300

    async def main():
        await create_topic(bootstrap, topic, partitions=3)
        values = [b"value-%d" % i for i in range(count)]
        keys = [None if i % 3 == 0 else b"key-%d" % (i % 7) for i in range(count)]
        headers = [[("n", b"%d" % i)] if i % 2 else None for i in range(count)]
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1) as producer:
            await producer.partitions_for(topic)
            group = await producer.send_many(topic, values, keys=keys, headers=headers)
            results = await group
            with pytest.raises(ValueError):
                await producer.send_many(topic, values, keys=keys[:-1])
        assert len(results) == count
        by_key = {}
        for key, metadata in zip(keys, results):
            if key is not None:
                assert by_key.setdefault(key, metadata.partition) == metadata.partition
        for partition in range(3):
            offsets = by_partition[partition] = [m.offset for m in results if m.partition == partition]
            assert offsets == list(range(len(offsets)))
        where = {(m.partition, m.offset): i for i, m in enumerate(results)}
        async with AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
            got = []
            for _ in range(50):
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += records
                if len(got) >= count:
                    break
        assert len(got) == count
        for record in got:
            i = where[(record.partition, record.offset)]
            assert (record.key, record.value) == (keys[i], values[i])
            assert list(record.headers) == (headers[i] or [])

    async def under_memory_pressure():
        pressed = topic_name()
        await create_topic(bootstrap, pressed)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=4096, buffer_memory=16384,
                                    linger_ms=1) as producer:
            with Ticker() as ticker:
                group = await producer.send_many(pressed, [b"%05d" % i + b"x" * 90 for i in range(3000)])
                results = await group
            assert ticker.ticks > 0
        assert [m.offset for m in results] == list(range(3000))

    async def through_a_partitioner():
        async with AIOKafkaProducer(bootstrap_servers=bootstrap,
                                    partitioner=lambda key, partitions, available: partitions[-1]) as producer:
            group = await producer.send_many(topic, [b"a", b"b"], keys=[b"k", None])
            assert [(m.partition, m.offset) for m in await group] == [(2, len(by_partition[2])),
                                                                       (2, len(by_partition[2]) + 1)]

    async def refused():
        small = topic_name()
        async with AIOKafkaAdminClient(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(small, num_partitions=1, replication_factor=1,
                                                topic_configs={"max.message.bytes": "1000"})])
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            await producer.partitions_for(small)
            group = await producer.send_many(small, [b"x" * 10, b"y" * 5000])
            with pytest.raises(kerrors.MessageSizeTooLargeError):
                await group

    by_partition = {}
    run(main())
    run(under_memory_pressure())
    run(through_a_partitioner())
    run(refused())


async def read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The values a read_committed consumer group reads from the topic: `count` of them (or what came within 50
    polls), then nothing more."""
    async with AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=topic_name("reader"),
                                isolation_level="read_committed", auto_offset_reset="earliest") as reader:
        values = []
        for _ in range(50):
            for messages in (await reader.getmany(timeout_ms=500)).values():
                values += [m.value for m in messages]
            if len(values) >= count:
                break
        assert await reader.getmany(timeout_ms=300) == {}
        return values


def test_transaction_example(embedded_broker):
    """aiokafka's transactional consume-process-produce example: `async with producer.transaction()`, with
    the consumer's offsets sent to the transaction; an aborted transaction is invisible to read_committed."""
    source, sink, group = topic_name("src"), topic_name("sink"), topic_name("group")
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=bootstrap) as plain:
            for i in range(3):
                await plain.send_and_wait(source, f"in{i}".encode())
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=topic_name("txn"))
        consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await producer.start()
        await consumer.start()
        try:
            batch = {}
            for _ in range(50):
                batch = await consumer.getmany(timeout_ms=1000)
                if batch:
                    break
            async with producer.transaction():
                offsets = {}
                for tp, messages in batch.items():
                    for m in messages:
                        await producer.send(sink, m.value.upper())
                    offsets[tp] = messages[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, group)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send(sink, b"never visible")
                    raise RuntimeError("processing failed")
            assert await consumer.committed(TopicPartition(source, 0)) == 3
        finally:
            await consumer.stop()
            await producer.stop()
        assert await read_committed(bootstrap, sink, 3) == [b"IN0", b"IN1", b"IN2"]

    run(main())


# ---- the rest of the consumer API -----------------------------------------------------------------------------

def test_rebalance_listener_is_awaited_on_the_loop(embedded_broker):
    """An async ConsumerRebalanceListener runs on the event loop; its revoke commits before the partitions go."""
    topic, group = topic_name(), topic_name("group")
    bootstrap = embedded_broker.bootstrap_servers
    events = []

    async def main():
        loop = asyncio.get_running_loop()

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                assert asyncio.get_running_loop() is loop
                if revoked:
                    await consumer.commit()
                events.append(("revoked", sorted(revoked)))

            async def on_partitions_assigned(self, assigned):
                assert asyncio.get_running_loop() is loop
                events.append(("assigned", sorted(assigned)))

        async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
            for i in range(5):
                await producer.send_and_wait(topic, b"%d" % i)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.subscribe([topic], listener=Listener())
            assert consumer.subscription() == {topic}
            record = await consumer.getone()
            assert record.offset == 0
        finally:
            await consumer.stop()
        tp = TopicPartition(topic, 0)
        assert events == [("revoked", []), ("assigned", [tp]), ("revoked", [tp])]
        async with AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group) as again:
            assert await again.committed(tp) == 1

    run(main())


def test_seek_pause_and_offsets(embedded_broker):
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic, partitions=2)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
            for i in range(10):
                await producer.send_and_wait(topic, b"%d" % i, partition=i % 2, timestamp_ms=1_000_000 + i)
        a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
        async with AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([a, b])
            assert consumer.assignment() == {a, b}
            assert await consumer.beginning_offsets([a, b]) == {a: 0, b: 0}
            assert await consumer.end_offsets([a, b]) == {a: 5, b: 5}
            found = await consumer.offsets_for_times({a: 1_000_004, b: 1_000_100})
            assert found[a].offset == 2 and found[b] is None
            consumer.seek(a, 3)
            assert await consumer.position(a) == 3
            consumer.pause(b)
            assert consumer.paused() == {b}
            got = await consumer.getmany(timeout_ms=2000)
            assert set(got) == {a} and [m.offset for m in got[a]] == [3, 4]
            consumer.resume(b)
            only_b = await consumer.getone(b)
            assert (only_b.partition, only_b.offset) == (1, 0)
            await consumer.seek_to_end(b)
            assert await consumer.position(b) == 5
            await consumer.seek_to_beginning(a)
            assert (await consumer.getone(a)).offset == 0
            assert consumer.highwater(a) == 5
            assert consumer.partitions_for_topic(topic) == {0, 1}
            assert topic in await consumer.topics()
            with pytest.raises(kerrors.IllegalStateError):
                consumer.seek(TopicPartition(topic, 7), 0)
            with pytest.raises(aio_errors.IllegalOperation):
                await consumer.commit()

    run(main())


def test_stopped_consumer_ends_iteration_and_waiters(embedded_broker):
    """stop() wakes a getone() that waits for records (ConsumerStoppedError) and ends `async for`."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign([TopicPartition(topic, 0)])
        waiting = asyncio.ensure_future(consumer.getone())
        await asyncio.sleep(0)                 # let it start waiting
        await consumer.stop()
        with pytest.raises(ConsumerStoppedError):
            await waiting
        async for _ in consumer:
            raise AssertionError("a stopped consumer yields nothing")
        with pytest.raises(ConsumerStoppedError):
            await consumer.getmany()

    run(main())


def test_futures_settle_in_order_under_memory_pressure(embedded_broker):
    """With buffer memory for a few batches only, send() waits on the loop for acknowledgements (the ticker
    keeps running); every kept future gets its record's offset, dropped ones cost nothing and lose nothing."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers
    count = 6000

    async def main():
        await create_topic(bootstrap, topic, partitions=2)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=4096, buffer_memory=16384,
                                    linger_ms=1) as producer:
            with Ticker() as ticker:
                kept = {}
                for i in range(count):
                    future = await producer.send(topic, b"%05d" % i + b"x" * 90, partition=i % 2)
                    if i % 3 == 0:
                        kept[i] = future
                results = await asyncio.gather(*kept.values())
            assert ticker.ticks > 0
        for i, metadata in zip(kept, results):
            assert (metadata.partition, metadata.offset) == (i % 2, i // 2)
        async with AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            assert sum((await consumer.end_offsets(consumer.assignment())).values()) == count

    run(main())


def test_dropped_futures_are_not_swept_record_by_record(embedded_broker):
    """A sender that keeps its futures settles them itself every SWEEP_EVERY records while it does not yield to
    the loop; one that drops them (fire and forget) leaves nothing to settle, and must not sweep at every record
    (it did: a count of 0 is a multiple too). Kept futures still all settle, dropped ones are not kept."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50) as producer:
            futures = producer._futures
            for _ in range(5000):
                await producer.send(topic, b"x", partition=0)      # the future dropped
            dropped = futures.sends_swept
            kept = [await producer.send(topic, b"y", partition=0) for _ in range(3000)]
            swept = futures.sends_swept - dropped
            metadata = await asyncio.gather(*kept)
        return dropped, swept, metadata

    dropped, swept, metadata = run(main())
    assert dropped == 0, f"{dropped} sweeps for 5000 dropped futures"
    # 3000 kept records, none settled meanwhile (no yield to the loop): sweeps at 1024 and 2048 unsettled.
    assert swept == 3000 // RecordFutures.SWEEP_EVERY
    assert [m.offset for m in metadata] == list(range(5000, 8000))


def test_send_serializes_each_record_once_on_either_way(embedded_broker):
    """The first send to a topic waits for its metadata (the slower way, from the compiled common case's
    serialized key and value); the next ones go the common way; a full buffer the slower way again. Each record
    is serialized once, and both serializers' output is what the broker stores."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers
    calls = {"key": 0, "value": 0}

    def serialize(kind: str):
        def serializer(data: str) -> bytes:
            calls[kind] += 1
            return data.encode()
        return serializer

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, key_serializer=serialize("key"),
                                    value_serializer=serialize("value"), max_batch_size=1024,
                                    buffer_memory=4096, linger_ms=5) as producer:
            futures = [await producer.send(topic, f"v{i}" * 40, key=f"k{i}", partition=0) for i in range(200)]
            metadata = await asyncio.gather(*futures)
        return metadata, await read_all(bootstrap, TopicPartition(topic, 0), 200)

    metadata, got = run(main())
    assert calls == {"key": 200, "value": 200}
    assert [m.offset for m in metadata] == list(range(200))
    assert [(m.key, m.value) for m in got] == [(b"k%d" % i, b"v%d" % i * 40) for i in range(200)]


def test_kept_futures_settle_in_order_past_cancelled_and_dropped_ones(embedded_broker):
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20) as producer:
            futures = {i: await producer.send(topic, b"%d" % i, partition=0) for i in range(3000)}
            futures[3].cancel()
            cancelled = futures.pop(3)
            for i in range(100, 200):
                del futures[i]                  # dropped in the middle: settled for nobody, then forgotten
            metadata = await asyncio.wait_for(asyncio.gather(*futures.values()), 30)
            return cancelled, [(i, m.offset) for i, m in zip(futures, metadata)]

    cancelled, offsets = run(main())
    assert cancelled.cancelled()
    assert offsets == [(i, i) for i in range(3000) if i != 3 and not 100 <= i < 200]


def test_producer_errors_and_lifecycle(embedded_broker):
    bootstrap = embedded_broker.bootstrap_servers

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        with pytest.raises(kerrors.IllegalStateError):
            await producer.send("t", b"v")
        with pytest.raises(kerrors.IllegalStateError, match="call start"):
            producer.create_batch()             # its records are encoded into the started producer's memory
        async with producer:
            with pytest.raises(kerrors.IllegalStateError):
                await producer.begin_transaction()       # not transactional
        with pytest.raises(aio_errors.ProducerClosed):
            await producer.send("t", b"v")
        with pytest.raises(kerrors.KafkaConfigurationError):
            AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks=1)
        unreachable = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=1000)
        with pytest.raises(aio_errors.KafkaConnectionError):
            await unreachable.start()

    run(main())


def test_admin_client(embedded_broker):
    topic = topic_name()

    async def main():
        async with AIOKafkaAdminClient(bootstrap_servers=embedded_broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
            assert topic in await admin.list_topics()
            with pytest.raises(aio_errors.TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
            await admin.delete_topics([topic])
            assert topic not in await admin.list_topics()

    run(main())


def test_error_names_match_aiokafka():
    """Every exception name of aiokafka.errors exists here; names of broker error codes are fastmq's class
    of that code, so `except` clauses catch what fastmq raises."""
    import aiokafka.errors as theirs

    for name in dir(theirs):
        value = getattr(theirs, name)
        if not (isinstance(value, type) and issubclass(value, BaseException)) or name.startswith("_"):
            continue
        ours = getattr(aio_errors, name)
        assert issubclass(ours, BaseException), name
        errno = getattr(value, "errno", None)
        if isinstance(errno, int) and errno > 0:
            assert ours is kerrors.for_code(errno), name
    assert aio_errors.KafkaTimeoutError is kerrors.KafkaTimeoutError


# ---- the event loop stays responsive ---------------------------------------------------------------------

def placed_at(batches, places) -> list[tuple[int, int, int]]:
    """send_placed()'s outcome as each record's (partition, batch number, index in the batch), all batches
    acknowledged (the proxy's tests check offsets: tests/proxy/test_results.py)."""
    assert all(batch.is_done and batch.error is None for batch in batches)
    numbers = memoryview(places).cast("i")
    return [(batches[n].topic_partition.partition, n, i) for n, i in zip(numbers[::2], numbers[1::2])]


def test_send_placed_answers_where_each_record_went(embedded_broker):
    """send_placed(): the records of one call over several partitions in one compiled append, the outcome given
    the batches and each record's place in them; a topic whose metadata is not known yet and a buffer too small
    for the call take a worker thread (the loop keeps running); a partitioner or transactions are refused."""
    bootstrap = embedded_broker.bootstrap_servers
    topic, pressed = topic_name(), topic_name()
    count = 300
    values = [b"value-%d" % i for i in range(count)]
    keys = [None if i % 3 == 0 else b"key-%d" % (i % 7) for i in range(count)]
    headers = [[("n", b"%d" % i)] if i % 2 else None for i in range(count)]

    async def main():
        await create_topic(bootstrap, topic, partitions=3)
        await create_topic(bootstrap, pressed)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1) as producer:
            # no metadata of the topic yet: fetched on a worker thread
            where = await (await producer.send_placed(topic, values, keys=keys, headers=headers,
                                                      outcome=placed_at))
            with pytest.raises(ValueError):
                await producer.send_placed(topic, values, keys=keys[:-1], outcome=placed_at)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=4096, buffer_memory=16384,
                                    linger_ms=1) as producer:
            await producer.partitions_for(pressed)
            with Ticker() as ticker:
                pressed_where = await (await producer.send_placed(
                    pressed, [b"%05d" % i + b"x" * 90 for i in range(3000)], outcome=placed_at))
            assert ticker.ticks > 0
        assert pressed_where == sorted(pressed_where) and len(set(pressed_where)) == 3000
        for options in ({"partitioner": lambda key, partitions, available: 0}, {"transactional_id": "placed"}):
            async with AIOKafkaProducer(bootstrap_servers=bootstrap, **options) as producer:
                with pytest.raises(kerrors.IllegalStateError, match="send_many"):
                    await producer.send_placed(topic, [b"v"], outcome=placed_at)
        return where

    where = run(main())
    assert len(set(where)) == count and len({p for p, _, _ in where}) == 3
    for key, (partition, _, _) in zip(keys, where):
        if key is not None:
            assert kafka_partition(key, 3) == partition
    got = read_partitions(bootstrap, topic, 3, count, WAIT)
    assert len(got) == count
    # each partition holds its records in the order of their places (batch, then index in it)
    for partition in range(3):
        stored = sorted((r.offset, r.key, r.value, list(r.headers)) for r in got if r.partition == partition)
        placed = sorted((at, i) for i, at in enumerate(where) if at[0] == partition)
        assert [(key, value, stored_headers) for _, key, value, stored_headers in stored] == [
            (keys[i], values[i], headers[i] or []) for _, i in placed]


def test_event_loop_stays_responsive_while_producing_and_consuming(embedded_broker):
    """Records flow in chunks, each awaited: between chunks the ticker must get the loop (it would starve
    if a call blocked the loop thread while waiting for the broker). Worst stalls are printed, not asserted."""
    topic = topic_name()
    bootstrap = embedded_broker.bootstrap_servers
    chunks, per_chunk = 40, 500

    async def main():
        await create_topic(bootstrap, topic)
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
            with Ticker() as produce_ticker:
                for chunk in range(chunks):
                    futures = [await producer.send(topic, b"x" * 100) for _ in range(per_chunk)]
                    await futures[-1]
                await producer.flush()
        received = 0
        async with AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    max_poll_records=per_chunk) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            with Ticker() as consume_ticker:
                for _ in range(10 * chunks):
                    for messages in (await consumer.getmany(timeout_ms=1000)).values():
                        received += len(messages)
                    if received >= chunks * per_chunk:
                        break
        assert received == chunks * per_chunk
        print(f"produce: {produce_ticker.ticks} ticks, worst stall {produce_ticker.worst_stall * 1e3:.1f} ms; "
              f"consume: {consume_ticker.ticks} ticks, worst stall {consume_ticker.worst_stall * 1e3:.1f} ms")
        # Each awaited chunk gives the ticker a turn at least once in a while; a blocked loop gives it none.
        assert produce_ticker.ticks >= chunks // 4
        assert consume_ticker.ticks >= 5

    run(main())
