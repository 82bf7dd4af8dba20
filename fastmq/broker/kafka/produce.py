"""Produce.

acks=0: stored, never answered (an error closes the connection, the only signal such a producer gets);
acks=1: answered once the records are in the CommitLog (the page cache); acks=all (-1): answered once the
CommitLog is fsynced up to them. On one node "all replicas" is this one, and an fsync is what makes an
acknowledged record survive a crash of the machine, so acks=all waits for it, through the store's group commit:
the I/O thread asks and goes on, the flush thread answers (concurrent producers share fsyncs).
A request with transactional batches must name its transactional id (as Kafka requires, to authorize it):
without one, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition.
"""
from __future__ import annotations

import logging
from typing import Any

from fastmq.broker.kafka.front import Request
from fastmq.broker.kafka.log import KAFKA_STORAGE_ERROR, AppendResult
from fastmq.broker.kafka.metadata import resolve_topic
from fastmq.io.errors import ConnectionClosedError
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

log = logging.getLogger(__name__)

UNKNOWN_TOPIC_OR_PARTITION = kerrors.UnknownTopicOrPartitionError.errno
INVALID_REQUIRED_ACKS = kerrors.InvalidRequiredAcksError.errno
PartitionResponse = kp.ProduceResponse.PartitionProduceResponse
TopicResponse = kp.ProduceResponse.TopicProduceResponse


def handle_produce(request: Request, body: Any) -> None:
    broker = request.broker
    acks = body.acks
    results: list[tuple[Any, list[tuple[int, AppendResult]]]] = []
    flush_to = 0
    produced = request.session.info.produced
    for topic_data in body.topic_data:
        topic = resolve_topic(broker, topic_data.name, topic_data.topic_id)
        partitions = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if acks not in (0, 1, -1):
                result = AppendResult(INVALID_REQUIRED_ACKS, message=f"acks must be 0, 1 or -1, not {acks}")
            elif topic is None or not 0 <= index < topic.partitions:
                result = AppendResult(UNKNOWN_TOPIC_OR_PARTITION)
            elif partition_data.records is None:
                result = AppendResult(kerrors.InvalidRecordError.errno, message="no records")
            else:
                result = request.front.logs.append(topic, index, partition_data.records,
                                                   transactional=body.transactional_id is not None)
                if result.error == 0:
                    flush_to = max(flush_to, result.end_position)
                if result.appended:
                    produced.add(topic.name)
            partitions.append((index, result))
        results.append((topic_data, partitions))
    if acks == 0:
        request.no_response()
        if any(result.error for _, partitions in results for _, result in partitions):
            request.conn.close(ConnectionClosedError(f"{request.conn}: a produce with acks=0 failed"))
        return
    if acks == -1 and flush_to:
        broker.store.when_flushed(flush_to, lambda ok: _respond(request, results, ok))
        return
    _respond(request, results, True)


def _respond(request: Request, results: list[tuple[Any, list[tuple[int, AppendResult]]]], durable: bool) -> None:
    topics = []
    for topic_data, partitions in results:
        responses = []
        for index, result in partitions:
            error, message = result.error, result.message
            if error == 0 and not durable:
                error, message = KAFKA_STORAGE_ERROR, "the CommitLog could not be flushed to disk"
            responses.append(PartitionResponse(index=index, error_code=error, base_offset=result.base_offset,
                                               log_append_time_ms=result.log_append_time,
                                               log_start_offset=result.log_start_offset,
                                               record_errors=[], error_message=message))
        topics.append(TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                    partition_responses=responses))
    request.respond(kp.ProduceResponse(responses=topics, throttle_time_ms=0))


HANDLERS = {
    ApiKey.PRODUCE: handle_produce,
}
