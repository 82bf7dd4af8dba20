"""aiokafka's API on fastmq's engine: change `from aiokafka import ...` to `from fastmq.kafka.aio import ...`.

    from fastmq.kafka.aio import AIOKafkaProducer, AIOKafkaConsumer
    from fastmq.kafka.aio.admin import AIOKafkaAdminClient, NewTopic
    from fastmq.kafka.aio import errors        # aiokafka.errors' names

No second network stack: fastmq's I/O thread does the work and wakes the event loop (futures settled, records
arrived); calls that wait for the broker run on worker threads, so the loop never blocks. aiokafka itself is
not imported.
"""
from __future__ import annotations

from fastmq.kafka.aio.admin import AIOKafkaAdminClient
from fastmq.kafka.aio.consumer import AIOKafkaConsumer, ConsumerRebalanceListener
from fastmq.kafka.aio.errors import ConsumerStoppedError, IllegalOperation
from fastmq.kafka.aio.producer import AIOKafkaProducer
from fastmq.kafka._native.aio_batch import BatchBuilder
from fastmq.kafka.structs import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, RecordMetadata, TopicPartition

__all__ = [
    "AIOKafkaAdminClient", "AIOKafkaConsumer", "AIOKafkaProducer", "BatchBuilder", "ConsumerRebalanceListener",
    "ConsumerRecord", "ConsumerStoppedError", "IllegalOperation", "OffsetAndMetadata", "OffsetAndTimestamp",
    "RecordMetadata", "TopicPartition",
]
