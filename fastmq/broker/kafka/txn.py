"""InitProducerId and the transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), on
the core's protocol-free TransactionCoordinator (fastmq/broker/transactions.py), whose refusals map to Kafka's
codes here.

InitProducerId without a transactional id serves idempotent producers: a fresh producer id, or (KIP-360) the
same id with its epoch bumped. PRODUCER_FENCED exists from InitProducerId v4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn v2 and TxnOffsetCommit v3 (KIP-588); older versions get INVALID_PRODUCER_EPOCH.
AddPartitionsToTxn v4+ (several transactions per request) is broker to broker and not served.
"""
from __future__ import annotations

from typing import Any

from fastmq.broker.errors import CoreError
from fastmq.broker.kafka.errors import NONE, kafka_code
from fastmq.broker.kafka.front import Request
from fastmq.broker.kafka.offsets import MAX_METADATA_BYTES, kafka_commit
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

INVALID_PRODUCER_EPOCH = kerrors.InvalidProducerEpochError.errno
UNKNOWN_TOPIC_OR_PARTITION = kerrors.UnknownTopicOrPartitionError.errno
INVALID_GROUP_ID = kerrors.InvalidGroupIdError.errno
OFFSET_METADATA_TOO_LARGE = kerrors.OffsetMetadataTooLargeError.errno
# The first version of each API that knows PRODUCER_FENCED.
PRODUCER_FENCED_SINCE = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
                         ApiKey.END_TXN: 2, ApiKey.TXN_OFFSET_COMMIT: 3}


def _for_version(request: Request, error: CoreError | None) -> int:
    """The Kafka code of the coordinator's answer, in terms the request's version knows."""
    if error is CoreError.PRODUCER_FENCED and request.version < PRODUCER_FENCED_SINCE[request.api_key]:
        return INVALID_PRODUCER_EPOCH
    return kafka_code(error)


def handle_init_producer_id(request: Request, body: Any) -> None:
    def respond(error: CoreError | None, producer_id: int, epoch: int) -> None:
        request.respond(kp.InitProducerIdResponse(throttle_time_ms=0, error_code=_for_version(request, error),
                                                  producer_id=producer_id, producer_epoch=epoch))

    if body.transactional_id is not None:
        request.front.transactions.init_producer_id(body.transactional_id, body.transaction_timeout_ms,
                                                    body.producer_id, body.producer_epoch, respond)
        return
    producers = request.broker.producers
    if body.producer_id >= 0 and body.producer_epoch >= 0:
        # An idempotent producer bumping its epoch (KIP-360) keeps its id.
        producer_id, epoch = body.producer_id, body.producer_epoch + 1
        if epoch > 32767:
            producer_id, epoch = producers.allocate_producer_id(), 0
    else:
        producer_id, epoch = producers.allocate_producer_id(), 0
    respond(None, producer_id, epoch)


def handle_add_partitions_to_txn(request: Request, body: Any) -> None:
    topic_result = kp.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    partition_result = kp.AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
    wanted = [(topic.name, partition) for topic in body.v3_and_below_topics for partition in topic.partitions]

    def respond(errors: dict[tuple[str, int], CoreError | None]) -> None:
        by_topic: dict[str, list[Any]] = {}
        for (name, partition), error in errors.items():
            by_topic.setdefault(name, []).append(partition_result(
                partition_index=partition, partition_error_code=_for_version(request, error)))
        request.respond(kp.AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=[
            topic_result(name=name, results_by_partition=results) for name, results in by_topic.items()]))

    request.front.transactions.add_partitions(body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                              body.v3_and_below_producer_epoch, wanted, respond)


def handle_add_offsets_to_txn(request: Request, body: Any) -> None:
    def respond(error: CoreError | None) -> None:
        request.respond(kp.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_for_version(request, error)))

    if not body.group_id:
        respond(CoreError.INVALID_GROUP_ID)
        return
    request.front.transactions.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                           body.group_id, respond)


def handle_txn_offset_commit(request: Request, body: Any) -> None:
    broker = request.broker
    results: dict[tuple[str, int], int] = {}
    offsets = []
    group_error = NONE
    if not body.group_id:
        group_error = INVALID_GROUP_ID
    elif request.version >= 3 and (body.generation_id >= 0 or body.member_id):
        # Since KIP-447 a transactional commit is fenced like a consumer's own commit.
        group_error = kafka_code(broker.groups.validate_commit(body.group_id, body.generation_id, body.member_id,
                                                               body.group_instance_id))
    now_ms = int(broker.clock() * 1000)
    for topic in body.topics:
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            topic_info = broker.topics.get(topic.name)
            if group_error:
                results[key] = group_error
            elif topic_info is None or not 0 <= part.partition_index < topic_info.partitions:
                results[key] = UNKNOWN_TOPIC_OR_PARTITION
            elif part.committed_metadata is not None and len(
                    part.committed_metadata.encode("utf-8")) > MAX_METADATA_BYTES:
                results[key] = OFFSET_METADATA_TOO_LARGE
            else:
                results[key] = NONE
                offsets.append((topic.name, part.partition_index, kafka_commit(
                    part.committed_offset, part.committed_metadata,
                    part.committed_leader_epoch if request.version >= 2 else -1, now_ms)))

    def respond(error: CoreError | None = None) -> None:
        topic_type = kp.TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        partition_type = kp.TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition
        by_topic: dict[str, list[Any]] = {}
        for (name, partition), code in results.items():
            by_topic.setdefault(name, []).append(partition_type(
                partition_index=partition, error_code=code or _for_version(request, error)))
        request.respond(kp.TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            topic_type(name=name, partitions=partitions) for name, partitions in by_topic.items()]))

    if not offsets:
        respond()
        return
    request.front.transactions.commit_offsets(body.transactional_id, body.group_id, body.producer_id,
                                              body.producer_epoch, offsets, respond)


def handle_end_txn(request: Request, body: Any) -> None:
    def respond(error: CoreError | None) -> None:
        request.respond(kp.EndTxnResponse(throttle_time_ms=0, error_code=_for_version(request, error)))

    request.front.transactions.end_transaction(body.transactional_id, body.producer_id, body.producer_epoch,
                                               body.committed, respond)


HANDLERS = {
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.END_TXN: handle_end_txn,
}
