"""The Kafka backend's produce answer, written as JSON in C (fastmq/proxy/_native/produce.pyx) from the batches
and places of AIOKafkaProducer.send_placed(), against what a consumer then reads from the embedded broker: keyed
and unkeyed records over several partitions, a LogAppendTime topic (the broker's time), batches the broker refused
as too large and the producer split (the records' places follow them into the halves), and a refused record (its
error is raised)."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from functools import partial

import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka.aio import AIOKafkaProducer
from fastmq.proxy._native.produce import kafka_results
from tests.support.reading import read_partitions

WAIT_S = 30.0


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, 3, 1, topic_configs=configs) for name, configs in topics.items()])
        admin.wait_for_topics(list(topics), timeout=30)


def read_back(bootstrap: str, topic: str, count: int) -> dict[tuple[int, int], tuple[bytes | None, bytes, int]]:
    """(partition, offset) -> (key, value, timestamp) of the topic's first `count` records."""
    found = {(r.partition, r.offset): (r.key, r.value, r.timestamp)
             for r in read_partitions(bootstrap, topic, 3, count, WAIT_S)}
    assert len(found) == count
    return found


def test_results_say_where_the_broker_put_each_record(embedded_broker):
    bootstrap = embedded_broker.bootstrap_servers
    unique = uuid.uuid4().hex[:8]
    create_time, append_time, split, small = (f"results-{unique}", f"results-log-{unique}",
                                              f"results-split-{unique}", f"results-small-{unique}")
    create_topics(bootstrap, {create_time: {}, append_time: {"message.timestamp.type": "LogAppendTime"},
                              split: {"max.message.bytes": "1000"}, small: {"max.message.bytes": "1000"}})
    count = 500
    values = [b"v%d" % i for i in range(count)]
    keys = [None if i % 4 == 0 else b"k%d" % (i % 5) for i in range(count)]
    answers: dict[str, list[tuple[list, dict[int, int]]]] = {}
    leaves: dict[str, int] = {}
    now = int(time.time() * 1000)

    def results_of(topic: str, batches: list, places: bytearray) -> tuple[bytes, dict[int, int]]:
        leaves[topic] = sum(len(batch.leaves()) for batch in batches)
        return kafka_results(batches, places, now, b"kafka")

    async def send(producer: AIOKafkaProducer, topic: str, values: list[bytes], keys: list | None) -> tuple:
        group = await producer.send_placed(topic, values, keys=keys, timestamp_ms=now,
                                           outcome=partial(results_of, topic))
        results, ends = await group
        return json.loads(results), ends

    async def main() -> None:
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1) as producer:
            for topic in (create_time, append_time):
                await producer.partitions_for(topic)
                # the second time the offsets are past 0 and the ends move on
                answers[topic] = [await send(producer, topic, values, keys) for _ in range(2)]
            # 16 records of 200 B to one partition: a batch of ~3.4 KB, split twice before the broker takes it
            answers[split] = [await send(producer, split, [b"%03d" % i + b"s" * 197 for i in range(16)],
                                         [b"same"] * 16)]
            await producer.partitions_for(small)
            with pytest.raises(kerrors.MessageSizeTooLargeError):
                await send(producer, small, [b"x" * 10, b"y" * 5000], None)

    asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert leaves[split] >= 4           # the batch was split, and its halves again
    for topic, sent in answers.items():
        stored = read_back(bootstrap, topic, sum(len(results) for results, _ in sent))
        ends: dict[int, int] = {}
        for results, answered_ends in sent:
            for i, result in enumerate(results):
                partition = int(result["queue"].removeprefix("kafka:"))
                key, value, timestamp = stored[(partition, result["offset"])]
                if topic != split:
                    assert (key, value) == (keys[i], values[i])
                else:
                    assert value[:3] == b"%03d" % i
                assert result["timestamp"] == timestamp
                assert timestamp > now if topic == append_time else timestamp == now
                ends[partition] = max(ends.get(partition, 0), result["offset"] + 1)
            assert answered_ends == {p: ends[p] for p in answered_ends} and set(answered_ends) == set(ends)
        assert len({int(r["queue"][6:]) for results, _ in sent for r in results}) == (1 if topic == split else 3)


def test_only_batches_are_taken():
    with pytest.raises(TypeError):
        kafka_results([object()], memoryview(bytes(8)).cast("B"), 0, b"kafka")
    assert kafka_results([], b"", 0, b"kafka") == (b"[]", {})
