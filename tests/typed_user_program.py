"""A user's program over fastmq's public faces, checked by tests/test_types.py with mypy --strict: every call
must be to a typed function and every value it gets must have a type (no Any leaking into a strict user's code).
It is type-checked, never run."""
from __future__ import annotations

import asyncio

from fastmq.broker import BrokerConfig, EmbeddedBroker, ListenerConfig
from fastmq.kafka import Consumer, Producer, TopicPartition
from fastmq.kafka.aio import AIOKafkaConsumer, AIOKafkaProducer
from fastmq.kafka.compat import KafkaConsumer, KafkaProducer
from fastmq.kafka.record import MemoryRecords, MemoryRecordsBuilder
from fastmq.nsq import Consumer as NSQConsumer
from fastmq.nsq import Producer as NSQProducer
from fastmq.proxy.config import ProxyConfig
from fastmq.rocketmq import ConsumeFromWhere, PullConsumer
from fastmq.rocketmq import Message as RocketMQMessage
from fastmq.rocketmq import Producer as RocketMQProducer
from fastmq.spark.options import parse_options
from fastmq.tubemq import FROM_FIRST_OFFSET
from fastmq.tubemq import Message as TubeMQMessage
from fastmq.tubemq import Producer as TubeMQProducer
from fastmq.tubemq import PullConsumer as TubeMQPullConsumer


def kafka(servers: str) -> list[bytes | None]:
    with Producer(servers, linger_ms=5) as producer:
        offset: int = producer.send("t", b"v", key=b"k").get(10)
        producer.flush()
    with Consumer(bootstrap_servers=servers) as consumer:
        consumer.assign([TopicPartition("t", 0)])
        consumer.seek_to_beginning()
        values = [record.value for record in consumer.consume(10, 1.0)]
    print(offset)
    return values


def kafka_python_face(servers: str) -> int:
    producer = KafkaProducer(bootstrap_servers=servers)
    producer.send("t", b"v").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("t", bootstrap_servers=servers, consumer_timeout_ms=1000)
    count = sum(1 for _ in consumer)
    consumer.close()
    return count


async def aiokafka_face(servers: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=servers)
    await producer.start()
    await producer.send_and_wait("t", b"v")
    await producer.stop()
    consumer = AIOKafkaConsumer("t", bootstrap_servers=servers)
    await consumer.start()
    batches = await consumer.getmany(timeout_ms=100)
    print({tp.partition: len(records) for tp, records in batches.items()})
    await consumer.stop()


def records() -> list[bytes | None]:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1, key=b"k", value=b"v", headers=[])
    builder.close()
    batch = MemoryRecords(builder.buffer()).next_batch()
    return [record.value for record in batch] if batch is not None else []


def rocketmq(namesrv: str) -> list[bytes]:
    with RocketMQProducer("g", namesrv) as producer:
        result = producer.send(RocketMQMessage("T", b"v", tags="a"))
        print(result.status, result.msg_id)
    with PullConsumer("g", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) as consumer:
        consumer.subscribe("T", "a")
        return [bytes(message.body) for message in consumer.poll(timeout=0.5)]


def tubemq(master: str) -> list[bytes]:
    with TubeMQProducer(master) as producer:
        producer.publish("t")
        print(producer.send(TubeMQMessage("t", b"v")).append_offset)
    with TubeMQPullConsumer(master, "g", ["t"], consume_position=FROM_FIRST_OFFSET) as consumer:
        result = consumer.get_message(timeout=1.0)
        consumer.confirm(result)
        return [bytes(message.body) for message in result.messages]


def nsq(nsqd: str) -> bytes | None:
    with NSQProducer(nsqd) as producer:
        producer.publish("t", b"v")
    with NSQConsumer("t", "c", nsqd_tcp_addresses=nsqd) as consumer:
        message = consumer.poll(timeout=0.2)
        if message is None:
            return None
        message.finish()
        return bytes(message.body)


def broker_and_proxy() -> str:
    config = BrokerConfig(data_dir="/tmp/x", listeners=[ListenerConfig(protocol="kafka")])
    proxy = ProxyConfig(max_wait_ms=100)
    spark = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"})
    with EmbeddedBroker() as broker:
        return f"{config.node_id} {proxy.redis_url} {spark.bootstrap_servers} {broker.bootstrap_servers}"


if __name__ == "__main__":
    asyncio.run(aiokafka_face("127.0.0.1:9092"))
