"""Every client, unmodified, against the embedded broker: fastmq, confluent-kafka, kafka-python and aiokafka
producers, consumers in groups and admin clients. One test per behaviour, run against each client (uvloop's
mixin idea): a Peer knows how its library produces, consumes in a group and administers."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

WAIT = 30.0


class Peer:
    name = ""

    def produce(self, servers: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> list[int]:
        """Send (key, value) records with acks=all; the offsets they got."""
        raise NotImplementedError

    def consume_group(self, servers: str, topic: str, group: str, count: int) -> list[tuple[bytes | None, bytes]]:
        """Join `group`, read `count` records from the beginning, commit, leave."""
        raise NotImplementedError

    def admin(self, servers: str, topic: str) -> dict:
        """Create `topic` with 3 partitions, list topics, describe its configs, delete it; what was seen."""
        raise NotImplementedError

    def produce_transactions(self, servers: str, topic: str, transactional_id: str, aborted: list[bytes],
                             committed: list[bytes]) -> None:
        """Send `aborted` to partition 0 in a transaction that is aborted, then `committed` in one committed."""
        raise NotImplementedError

    def read_committed(self, servers: str, topic: str, count: int) -> list[bytes]:
        """Values of partition 0 from the beginning, read_committed, until `count` came or WAIT passed."""
        raise NotImplementedError

    @staticmethod
    def abort_then_commit(producer, send, aborted: list[bytes], committed: list[bytes], wait=lambda call: call()):
        """The two transactions of produce_transactions, given a producer with kafka-python's transaction
        method names, send(value), and how to call a method that takes a timeout."""
        producer.begin_transaction()
        for value in aborted:
            send(value)
        wait(producer.flush)
        wait(producer.abort_transaction)
        producer.begin_transaction()
        for value in committed:
            send(value)
        wait(producer.commit_transaction)


class FastMQ(Peer):
    name = "fastmq"

    def produce(self, servers, topic, records):
        from fastmq.kafka import Producer

        with Producer(servers, acks="all", linger_ms=2) as producer:
            futures = [producer.send(topic, value, key=key) for key, value in records]
            producer.flush(WAIT)
            return [future.get(WAIT).offset for future in futures]

    def consume_group(self, servers, topic, group, count):
        from fastmq.kafka import Consumer

        got = []
        with Consumer(bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                      session_timeout_ms=6000, enable_auto_commit=False) as consumer:
            consumer.subscribe([topic])
            deadline = time.monotonic() + WAIT
            while len(got) < count and time.monotonic() < deadline:
                got += [(r.key, r.value) for r in consumer.consume(1000, 0.5)]
            consumer.commit()
        return got

    def admin(self, servers, topic):
        from fastmq.kafka.admin import Admin, ConfigResource, ConfigResourceType, NewTopic

        with Admin(servers) as admin:
            admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
            listed = topic in admin.list_topics()
            configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            config = next(iter(configs.values())) if isinstance(configs, dict) else configs[0]
            values = {name: entry.value for name, entry in config.entries.items()}
            partitions = len(admin.describe_topics([topic])[topic].partitions)
            admin.delete_topics([topic])
        return {"listed": listed, "partitions": partitions, "cleanup.policy": values.get("cleanup.policy")}

    def produce_transactions(self, servers, topic, transactional_id, aborted, committed):
        from fastmq.kafka import Producer

        with Producer(servers, transactional_id=transactional_id, linger_ms=2) as producer:
            producer.init_transactions(WAIT)
            self.abort_then_commit(producer, lambda value: producer.send(topic, value, partition=0), aborted,
                                   committed, lambda call: call(WAIT))

    def read_committed(self, servers, topic, count):
        from fastmq.kafka import Consumer, TopicPartition

        got = []
        with Consumer(bootstrap_servers=servers, isolation_level="read_committed", enable_auto_commit=False,
                      auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            deadline = time.monotonic() + WAIT
            while len(got) < count and time.monotonic() < deadline:
                got += [r.value for r in consumer.consume(1000, 0.5)]
        return got


class Confluent(Peer):
    name = "confluent-kafka"

    def produce(self, servers, topic, records):
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 2,
                                             "enable.idempotence": True})
        offsets = [None] * len(records)
        for index, (key, value) in enumerate(records):
            producer.produce(topic, value, key=key, on_delivery=lambda err, msg, i=index: offsets.__setitem__(
                i, None if err else msg.offset()))
        assert producer.flush(WAIT) == 0
        return offsets

    def consume_group(self, servers, topic, group, count):
        import confluent_kafka

        consumer = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": group,
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                             "fetch.queue.backoff.ms": 0})
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append((message.key(), message.value()))
        consumer.commit(asynchronous=False)
        consumer.close()
        return got

    def admin(self, servers, topic):
        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

        admin = AdminClient({"bootstrap.servers": servers})
        for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
            future.result(WAIT)
        metadata = admin.list_topics(timeout=WAIT)
        configs = admin.describe_configs([ConfigResource("topic", topic)])
        values = next(iter(configs.values())).result(WAIT)
        for future in admin.delete_topics([topic]).values():
            future.result(WAIT)
        return {"listed": topic in metadata.topics, "partitions": len(metadata.topics[topic].partitions),
                "cleanup.policy": values["cleanup.policy"].value}

    def produce_transactions(self, servers, topic, transactional_id, aborted, committed):
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": servers, "transactional.id": transactional_id,
                                             "linger.ms": 2})
        producer.init_transactions(WAIT)
        self.abort_then_commit(producer, lambda value: producer.produce(topic, value, partition=0), aborted,
                               committed, lambda call: call(WAIT))

    def read_committed(self, servers, topic, count):
        import confluent_kafka

        consumer = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": f"rc-{uuid.uuid4().hex}",
                                             "isolation.level": "read_committed", "enable.auto.commit": False,
                                             "fetch.queue.backoff.ms": 0})
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
        consumer.close()
        return got


class KafkaPython(Peer):
    name = "kafka-python"

    def produce(self, servers, topic, records):
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=2)
        futures = [producer.send(topic, value, key=key) for key, value in records]
        producer.flush(WAIT)
        offsets = [future.get(WAIT).offset for future in futures]
        producer.close()
        return offsets

    def consume_group(self, servers, topic, group, count):
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(topic, bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000)
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [(r.key, r.value) for r in records]
        consumer.commit()
        consumer.close()
        return got

    def admin(self, servers, topic):
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=servers)
        admin.create_topics([NewTopic(topic, 3, 1)])
        listed = topic in admin.list_topics()
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        values = {name: entry["value"] for name, entry in described["topic"][topic].items()}
        partitions = len(admin.describe_topics([topic])[0]["partitions"])
        admin.delete_topics([topic])
        admin.close()
        return {"listed": listed, "partitions": partitions, "cleanup.policy": values["cleanup.policy"]}

    def produce_transactions(self, servers, topic, transactional_id, aborted, committed):
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=servers, transactional_id=transactional_id, linger_ms=2)
        producer.init_transactions()
        self.abort_then_commit(producer, lambda value: producer.send(topic, value, partition=0), aborted,
                               committed)
        producer.close()

    def read_committed(self, servers, topic, count):
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=servers, isolation_level="read_committed",
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
        consumer.close()
        return got


class AioKafka(Peer):
    name = "aiokafka"

    def produce(self, servers, topic, records):
        from aiokafka import AIOKafkaProducer

        async def run():
            producer = AIOKafkaProducer(bootstrap_servers=servers, acks="all", enable_idempotence=True)
            await producer.start()
            try:
                results = [await producer.send_and_wait(topic, value, key=key) for key, value in records]
            finally:
                await producer.stop()
            return [result.offset for result in results]

        return asyncio.run(run())

    def consume_group(self, servers, topic, group, count):
        from aiokafka import AIOKafkaConsumer

        async def run():
            consumer = AIOKafkaConsumer(topic, bootstrap_servers=servers, group_id=group,
                                        auto_offset_reset="earliest", enable_auto_commit=False)
            await consumer.start()
            got = []
            try:
                deadline = time.monotonic() + WAIT
                while len(got) < count and time.monotonic() < deadline:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend((r.key, r.value) for r in records)
                await consumer.commit()
            finally:
                await consumer.stop()
            return got

        return asyncio.run(run())

    def admin(self, servers, topic):
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def run():
            admin = AIOKafkaAdminClient(bootstrap_servers=servers)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, 3, 1)])
                listed = topic in await admin.list_topics()
                described = await admin.describe_topics([topic])
                await admin.delete_topics([topic])
            finally:
                await admin.close()
            return {"listed": listed, "partitions": len(described[0]["partitions"]), "cleanup.policy": "delete"}

        return asyncio.run(run())

    def produce_transactions(self, servers, topic, transactional_id, aborted, committed):
        from aiokafka import AIOKafkaProducer

        async def run():
            producer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id=transactional_id)
            await producer.start()
            try:
                await producer.begin_transaction()
                for value in aborted:
                    await producer.send_and_wait(topic, value, partition=0)
                await producer.abort_transaction()
                await producer.begin_transaction()
                for value in committed:
                    await producer.send_and_wait(topic, value, partition=0)
                await producer.commit_transaction()
            finally:
                await producer.stop()

        asyncio.run(run())

    def read_committed(self, servers, topic, count):
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run():
            consumer = AIOKafkaConsumer(bootstrap_servers=servers, isolation_level="read_committed",
                                        enable_auto_commit=False, auto_offset_reset="earliest")
            await consumer.start()
            got = []
            try:
                consumer.assign([TopicPartition(topic, 0)])
                deadline = time.monotonic() + WAIT
                while len(got) < count and time.monotonic() < deadline:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend(r.value for r in records)
            finally:
                await consumer.stop()
            return got

        return asyncio.run(run())


PEERS = [FastMQ(), Confluent(), KafkaPython(), AioKafka()]


@pytest.fixture(params=PEERS, ids=lambda peer: peer.name)
def peer(request):
    return request.param


def test_produce_and_consume_in_a_group(broker, peer):
    topic = f"peer-{peer.name}-{uuid.uuid4().hex[:6]}"
    records = [(b"key-%d" % i if i % 3 else None, b"value-%d" % i) for i in range(50)]
    offsets = peer.produce(broker.bootstrap_servers, topic, records)
    assert offsets == list(range(50))
    group = f"group-{uuid.uuid4().hex[:6]}"
    got = peer.consume_group(broker.bootstrap_servers, topic, group, 50)
    assert got == records
    assert broker.broker.offsets.fetch(group, topic, 0).offset == 50
    stats = broker.stats()
    assert stats["topics"][topic]["put"]["messages"] == 50


def test_admin_client(broker, peer):
    topic = f"admin-{peer.name}-{uuid.uuid4().hex[:6]}"
    seen = peer.admin(broker.bootstrap_servers, topic)
    assert seen == {"listed": True, "partitions": 3, "cleanup.policy": "delete"}
    assert broker.broker.topics.get(topic) is None


@pytest.mark.parametrize("producer", PEERS, ids=lambda peer: peer.name)
def test_every_client_reads_what_every_other_wrote(broker, producer):
    topic = f"cross-{producer.name}-{uuid.uuid4().hex[:6]}"
    records = [(b"k%d" % i, b"v%d" % i) for i in range(20)]
    producer.produce(broker.bootstrap_servers, topic, records)
    for reader in PEERS:
        assert reader.consume_group(broker.bootstrap_servers, topic, f"{reader.name}-{uuid.uuid4().hex[:6]}",
                                    20) == records


@pytest.mark.parametrize("producer", PEERS, ids=lambda peer: peer.name)
def test_every_client_reads_committed_what_every_other_wrote_in_transactions(broker, producer):
    topic = f"txn-{producer.name}-{uuid.uuid4().hex[:6]}"
    aborted = [b"aborted-%d" % i for i in range(5)]
    committed = [b"committed-%d" % i for i in range(5)]
    producer.produce_transactions(broker.bootstrap_servers, topic, f"tid-{uuid.uuid4().hex[:6]}", aborted,
                                  committed)
    # The aborted records come first in the log: a reader that let any through would show it in these five.
    for reader in PEERS:
        assert reader.read_committed(broker.bootstrap_servers, topic, 5) == committed, reader.name
