"""The Kafka backend's produce answer, written as JSON from the producer's records in C (fastmq/proxy/_native/
produce.pyx), against the RecordMetadata the same records give, on the embedded broker: keyed and unkeyed records
over several partitions, a LogAppendTime topic (the broker's time), and a refused record (its error is raised)."""
from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka.aio import AIOKafkaProducer
from fastmq.proxy._native.produce import kafka_results


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    from fastmq.kafka import Admin
    from fastmq.kafka.admin import NewTopic

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, 3, 1, topic_configs=configs) for name, configs in topics.items()])
        admin.wait_for_topics(list(topics), timeout=30)


def both(records: list) -> tuple[tuple[bytes, dict[int, int]], list]:
    """What the proxy answers, and every record's RecordMetadata to check it by."""
    return kafka_results(records, b"kafka"), [record.value for record in records]


def test_results_are_the_records_metadata_as_json(embedded_broker):
    unique = uuid.uuid4().hex[:8]
    create_time, append_time, small = f"results-{unique}", f"results-log-{unique}", f"results-small-{unique}"
    create_topics(embedded_broker.bootstrap_servers, {
        create_time: {}, append_time: {"message.timestamp.type": "LogAppendTime"}, small: {"max.message.bytes": "1000"}})
    count = 500

    async def main() -> None:
        async with AIOKafkaProducer(bootstrap_servers=embedded_broker.bootstrap_servers, linger_ms=1) as producer:
            for topic in (create_time, append_time):
                await producer.partitions_for(topic)
                for _ in range(2):          # the second time the offsets are past 0 and ends move on
                    values = [b"v%d" % i for i in range(count)]
                    keys = [None if i % 4 == 0 else b"k%d" % (i % 5) for i in range(count)]
                    group = await producer.send_many(topic, values, keys=keys, outcome=both)
                    (results, ends), metadata = await group
                    expected = [{"queue": f"kafka:{m.partition}", "offset": m.offset, "timestamp": m.timestamp}
                                for m in metadata]
                    assert json.loads(results) == expected
                    assert ends == {p: max(m.offset for m in metadata if m.partition == p) + 1
                                    for p in {m.partition for m in metadata}}
                    assert len({m.partition for m in metadata}) > 1
                if topic == append_time:
                    assert all(m.timestamp > 0 for m in metadata)
            await producer.partitions_for(small)
            group = await producer.send_many(small, [b"x" * 10, b"y" * 5000],
                                             outcome=lambda records: kafka_results(records, b"kafka"))
            with pytest.raises(kerrors.MessageSizeTooLargeError):
                await group

    asyncio.run(main())


def test_only_records_are_taken():
    with pytest.raises(TypeError):
        kafka_results([object()], b"kafka")
    assert kafka_results([], b"kafka") == (b"[]", {})
