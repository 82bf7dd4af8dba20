"""The Kafka backend: fastmq.kafka's asyncio producer for /produce, and sessionless Fetch and ListOffsets requests
on one KafkaClient for the pulls (the proxy chooses partition and offset itself; a Consumer's prefetching and
positions would only be in the way). A queue is a partition: "kafka:<partition>"."""
from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.aio import AIOKafkaProducer
from fastmq.kafka.client import ClientConfig, KafkaClient
from fastmq.kafka.fetcher import make_decoder
from fastmq.kafka.protocol.schema import ZERO_UUID
from fastmq.kafka.subscription import EARLIEST, LATEST
from fastmq.proxy._native.produce import kafka_results
from fastmq.proxy.backend import Backend, BackendError, OutgoingMessages, PulledMessage, PullResult, SentMessages
from fastmq.proxy.readahead import ReadAhead

TAGS_HEADER = "tags"          # Kafka has no tags: they travel as a header
# A pull asks the broker for about this many bytes per message wanted, and at least READ_AHEAD_BYTES (at most
# max_bytes): every record of the answer is decoded, and what the request does not hand out is kept for the next.
PULL_BYTES_PER_MESSAGE = 1024
READ_AHEAD_BYTES = 64 << 10   # what a pull asks for at least: the rest waits in the ReadAhead for the next lock
METADATA_TIMEOUT_S = 5.0


class QueueNames(dict[int, str]):
    """partition -> its queue name "kafka:<partition>", made once."""

    def __init__(self, broker: str) -> None:
        super().__init__()
        self.broker = broker

    def __missing__(self, partition: int) -> str:
        name = self[partition] = f"{self.broker}:{partition}"
        return name


class KafkaBackend(Backend):
    broker = "kafka"

    def __init__(self, bootstrap_servers: str, *, request_timeout_ms: int = 10000, linger_ms: float = 0,
                 compression_type: str | None = None) -> None:
        super().__init__()
        self.bootstrap_servers = bootstrap_servers
        self.request_timeout = request_timeout_ms / 1000.0
        self._producer_options: dict[str, Any] = dict(bootstrap_servers=bootstrap_servers, client_id="fastmq-proxy",
                                      request_timeout_ms=request_timeout_ms, linger_ms=linger_ms,
                                      compression_type=compression_type, acks="all",
                                      # a topic that does not come (no auto-creation) fails the request then
                                      max_block_ms=request_timeout_ms)
        self._producer: AIOKafkaProducer | None = None
        self._client: KafkaClient | None = None
        self._decoder = make_decoder(check_crcs=True, read_committed=False, key_deserializer=None,
                                     value_deserializer=None)
        self.read_ahead = ReadAhead()
        self._queue_names = QueueNames(self.broker)
        self._broker_name = self.broker.encode()

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**self._producer_options)      # bound to the running loop
        await self._producer.start()
        config = ClientConfig(bootstrap_servers=self.bootstrap_servers, client_id="fastmq-proxy",
                              request_timeout_ms=self.request_timeout * 1000, allow_auto_create_topics=False)
        self._client = await asyncio.to_thread(KafkaClient, config, name="fastmq-proxy")

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
        if self._client is not None:
            await asyncio.to_thread(self._client.close)

    # ---- produce ----------------------------------------------------------------------------------------

    async def produce(self, topic: str, messages: OutgoingMessages) -> SentMessages:
        if self._producer is None:
            raise BackendError("the Kafka backend is not started")
        headers = messages.headers
        if messages.tags is not None:
            headers = [_with_tags(record_headers, tags)
                       for record_headers, tags in zip(headers or [None] * len(messages), messages.tags)]
        # The messages go into the producer's batches in one compiled call (send_placed: no future or other
        # object per message), and the answer is written from the batches in C (kafka_results).
        create_time = time.time_ns() // 1_000_000
        try:
            group = await self._producer.send_placed(topic, messages.values, keys=messages.keys, headers=headers,
                                                     timestamp_ms=create_time,
                                                     outcome=partial(kafka_results, create_time=create_time,
                                                                     broker=self._broker_name))
            results, ends = await group
        except kerrors.KafkaError as exc:
            raise BackendError(f"the broker refused the messages for topic {topic!r}: {exc}",
                               unknown_topic=isinstance(exc, kerrors.UnknownTopicOrPartitionError)) from None
        names = self._queue_names
        for partition, end in ends.items():
            self.observed(topic, names[partition], end)
        return SentMessages(results, len(messages))

    # ---- topics and offsets -------------------------------------------------------------------------------

    def _client_ready(self) -> KafkaClient:
        if self._client is None:
            raise BackendError("the Kafka backend is not started")
        return self._client

    async def _topic(self, topic: str) -> Any:
        client = self._client_ready()
        info = client.cluster.topics.get(topic)
        if info is not None and all(p.leader >= 0 for p in info.partitions):
            return info
        try:
            return await asyncio.to_thread(client.topic_metadata, topic, METADATA_TIMEOUT_S)
        except kerrors.KafkaTimeoutError:
            if client.cluster.topic_errors.get(topic) == kerrors.UnknownTopicOrPartitionError.errno:
                raise BackendError(f"no topic {topic!r} on the broker", unknown_topic=True) from None
            raise BackendError(f"no metadata for topic {topic!r} within {METADATA_TIMEOUT_S:g} s") from None
        except kerrors.KafkaError as exc:
            raise BackendError(f"topic {topic!r}: {exc}",
                               unknown_topic=isinstance(exc, kerrors.UnknownTopicOrPartitionError)) from None

    async def _call(self, node: Any, request: Any) -> Any:
        self.broker_requests += 1
        # The client fails the future itself once the timeout passes (waiting for a connection or an answer).
        future = self._client_ready().call(node, request, timeout=self.request_timeout)
        try:
            return await asyncio.wrap_future(future)
        except (kerrors.KafkaError, TimeoutError, OSError) as exc:
            self._client_ready().request_update("a proxy request failed")
            raise BackendError(f"the broker did not answer {type(request).__name__}: {exc}") from None

    async def _list_offsets(self, topic: str, timestamp: int) -> dict[int, int]:
        """partition -> offset for a ListOffsets timestamp (EARLIEST, LATEST or a time in ms); -1: none."""
        info = await self._topic(topic)
        by_leader: dict[Any, list[int]] = {}
        for partition, state in enumerate(info.partitions):
            by_leader.setdefault(state.leader, []).append(partition)
        L = kp.ListOffsetsRequest
        requests = [self._call(leader, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                    for p in partitions])]))
            for leader, partitions in by_leader.items()]
        found: dict[int, int] = {}
        for response in await asyncio.gather(*requests):
            for answer in response.topics:
                for part in answer.partitions:
                    if part.error_code:
                        self._client_ready().request_update("ListOffsets failed")
                        raise BackendError(f"offsets of {topic}:{part.partition_index}: "
                                           f"{kerrors.for_code(part.error_code).__name__}")
                    found[part.partition_index] = part.old_style_offsets[0] if part.old_style_offsets else part.offset
        return found

    async def fetch_bounds(self, topic: str) -> dict[str, tuple[int, int]]:
        lows, highs = await asyncio.gather(self._list_offsets(topic, EARLIEST), self._list_offsets(topic, LATEST))
        return {f"{self.broker}:{p}": (lows[p], high) for p, high in highs.items()}

    async def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[str, int]:
        at = await self._list_offsets(topic, timestamp_ms)
        ends = await self._list_offsets(topic, LATEST)
        return {f"{self.broker}:{p}": (offset if offset >= 0 else ends[p]) for p, offset in at.items()}

    # ---- pull ----------------------------------------------------------------------------------------------

    async def pull(self, topic: str, queue: str, offset: int, max_messages: int, max_bytes: int) -> PullResult:
        ready = self.read_ahead.take(topic, queue, offset, max_messages)
        if ready is not None:
            return ready
        partition = int(queue.rpartition(":")[2])
        info = await self._topic(topic)
        if partition >= len(info.partitions):
            raise BackendError(f"topic {topic!r} has no partition {partition}")
        F = kp.FetchRequest
        max_bytes = max(1, min(max_bytes, max(READ_AHEAD_BYTES, max_messages * PULL_BYTES_PER_MESSAGE)))
        topic_id = info.topic_id if info.topic_id is not None else ZERO_UUID
        request = F(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0,
                    session_epoch=-1, topics=[F.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
                        F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
                    forgotten_topics_data=[], rack_id="")
        response = await self._call(info.partitions[partition].leader, request)
        if response.error_code:
            raise BackendError(f"fetch of {topic}:{partition}: {kerrors.for_code(response.error_code).__name__}")
        data = response.responses[0].partitions[0]
        if data.error_code:
            error = kerrors.for_code(data.error_code)
            if error.invalid_metadata:
                self._client_ready().request_update("a proxy fetch found a moved partition")
            self.forget(topic)
            raise BackendError(f"fetch of {topic}:{partition} at {offset}: {error.__name__}")
        self.observed(topic, queue, data.high_watermark)
        records = data.records
        if records is None or not len(records):
            return PullResult([], offset, data.high_watermark)
        decoded, next_offset, decode_error = self._decoder.decode(records, topic, partition, offset,
                                                                  data.aborted_transactions)
        if decode_error is not None and not decoded:
            raise BackendError(f"fetch of {topic}:{partition} at {offset}: {decode_error}")
        self.read_ahead.keep(topic, queue, offset, decoded, next_offset, data.high_watermark, _pulled)
        return self.read_ahead.take(topic, queue, offset, max_messages) or PullResult([], next_offset,
                                                                                      data.high_watermark)


def _with_tags(headers: list[tuple[str, bytes]] | None, tags: str | None) -> list[tuple[str, bytes]] | None:
    """A message's headers with its tags as one more (Kafka has no tags)."""
    if tags is None:
        return headers
    return [*(headers or ()), (TAGS_HEADER, tags.encode())]


def _pulled(record: Any) -> PulledMessage:
    return PulledMessage(record.offset, record.timestamp, record.key, record.value, list(record.headers or ()))
