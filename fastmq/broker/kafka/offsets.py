"""ListOffsets, OffsetForLeaderEpoch, OffsetCommit, OffsetFetch and OffsetDelete.

ListOffsets: EARLIEST (-2, and -4, earliest local) is the log start offset, LATEST (-1) the high watermark (the
log end: a single node has nothing unreplicated) or, for read_committed, the last stable offset; MAX_TIMESTAMP
(-3) the record with the largest timestamp, and a time T the first record whose own timestamp is T or later (not
the time it was stored): offset -1 when there is none, or when a read_committed caller could not read it yet.
Every partition has leader epoch 0.
OffsetFetch with require_stable (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition whose offset an open
transaction is about to commit, so that a read_committed consumer does not start from a stale one.
"""
from __future__ import annotations

import struct
from typing import Any

from fastmq.broker.kafka.errors import NONE, kafka_code
from fastmq.broker.kafka.front import Request
from fastmq.broker.kafka.metadata import LEADER_EPOCH
from fastmq.broker.offsets import CommittedOffset
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
MAX_METADATA_BYTES = 4096        # Kafka's offset.metadata.max.bytes

UNKNOWN_TOPIC_OR_PARTITION = kerrors.UnknownTopicOrPartitionError.errno
UNKNOWN_LEADER_EPOCH = kerrors.UnknownLeaderEpochError.errno
INVALID_REQUEST = kerrors.InvalidRequestError.errno
INVALID_GROUP_ID = kerrors.InvalidGroupIdError.errno
OFFSET_METADATA_TOO_LARGE = kerrors.OffsetMetadataTooLargeError.errno
UNKNOWN_SERVER_ERROR = kerrors.UnknownError.errno
GROUP_ID_NOT_FOUND = kerrors.GroupIdNotFoundError.errno
GROUP_SUBSCRIBED_TO_TOPIC = kerrors.GroupSubscribedToTopicError.errno
UNSTABLE_OFFSET_COMMIT = kerrors.UnstableOffsetCommitError.errno


def kafka_commit(offset: int, metadata: str | None, leader_epoch: int, timestamp: int) -> CommittedOffset:
    """A Kafka commit in the core's terms: what it commits besides the offset is [metadata, leader epoch, commit
    time], kept only when it carries metadata or an epoch (OffsetFetch answers no commit time)."""
    if metadata == "" and leader_epoch == -1:
        return CommittedOffset(offset)
    return CommittedOffset(offset, (metadata, leader_epoch, timestamp))


def kafka_commit_fields(committed: CommittedOffset) -> tuple[str | None, int]:
    """(metadata, leader epoch) of a commit kafka_commit made ("" and -1 when it kept none)."""
    if not committed.extra:
        return "", -1
    metadata, leader_epoch = committed.extra[0], committed.extra[1]
    return metadata, int(leader_epoch)


def _known_partition(request: Request, name: str, partition: int) -> bool:
    topic = request.broker.topics.get(name)
    return topic is not None and 0 <= partition < topic.partitions


# -- ListOffsets ------------------------------------------------------------------------------------------------

def _list_offset(request: Request, name: str, partition: int, timestamp: int, leader_epoch: int,
                 read_committed: bool) -> tuple[int, int, int]:
    """(error, offset, timestamp) for one partition."""
    if not _known_partition(request, name, partition):
        return UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    if leader_epoch > LEADER_EPOCH:
        return UNKNOWN_LEADER_EPOCH, -1, -1
    logs = request.front.logs
    readable_end = (logs.last_stable_offset(name, partition) if read_committed
                    else logs.high_watermark(name, partition))
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return NONE, logs.log_start_offset(name, partition), -1
    if timestamp == LATEST:
        return NONE, readable_end, -1
    if timestamp == MAX_TIMESTAMP:
        found = logs.max_timestamp(name, partition)
    elif timestamp >= 0:
        found = logs.offset_for_timestamp(name, partition, timestamp)
    else:
        return INVALID_REQUEST, -1, -1
    return (NONE, found[0], found[1]) if found is not None and found[0] < readable_end else (NONE, -1, -1)


def handle_list_offsets(request: Request, body: Any) -> None:
    topic_response = kp.ListOffsetsResponse.ListOffsetsTopicResponse
    partition_response = kp.ListOffsetsResponse.ListOffsetsPartitionResponse
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            error, offset, timestamp = _list_offset(request, topic.name, part.partition_index, part.timestamp,
                                                    part.current_leader_epoch, body.isolation_level == 1)
            partitions.append(partition_response(partition_index=part.partition_index, error_code=error,
                                                 timestamp=timestamp, offset=offset,
                                                 leader_epoch=LEADER_EPOCH if error == NONE else -1))
        topics.append(topic_response(name=topic.name, partitions=partitions))
    request.respond(kp.ListOffsetsResponse(throttle_time_ms=0, topics=topics))


def handle_offset_for_leader_epoch(request: Request, body: Any) -> None:
    result_topic = kp.OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    end_offset = kp.OffsetForLeaderEpochResponse.EpochEndOffset
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            if not _known_partition(request, topic.topic, part.partition):
                partitions.append(end_offset(error_code=UNKNOWN_TOPIC_OR_PARTITION, partition=part.partition))
            elif part.current_leader_epoch > LEADER_EPOCH:
                partitions.append(end_offset(error_code=UNKNOWN_LEADER_EPOCH, partition=part.partition))
            elif part.leader_epoch == LEADER_EPOCH:
                # The current (and only) epoch ends at the log end.
                partitions.append(end_offset(error_code=NONE, partition=part.partition, leader_epoch=LEADER_EPOCH,
                                             end_offset=request.front.logs.high_watermark(topic.topic,
                                                                                          part.partition)))
            else:
                partitions.append(end_offset(error_code=NONE, partition=part.partition, leader_epoch=-1,
                                             end_offset=-1))
        topics.append(result_topic(topic=topic.topic, partitions=partitions))
    request.respond(kp.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics))


# -- OffsetCommit -----------------------------------------------------------------------------------------------

def handle_offset_commit(request: Request, body: Any) -> None:
    broker = request.broker
    group_error = NONE
    if not body.group_id:
        group_error = INVALID_GROUP_ID
    else:
        group_error = kafka_code(broker.groups.validate_commit(body.group_id, body.generation_id_or_member_epoch,
                                                               body.member_id, body.group_instance_id))
    now_ms = int(broker.clock() * 1000)
    results: list[tuple[Any, list[list[int]]]] = []     # (topic, [[partition, error], ...])
    to_commit = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            error = group_error
            if error == NONE:
                if not _known_partition(request, topic.name, part.partition_index):
                    error = UNKNOWN_TOPIC_OR_PARTITION
                elif part.committed_metadata is not None and len(
                        part.committed_metadata.encode("utf-8")) > MAX_METADATA_BYTES:
                    error = OFFSET_METADATA_TOO_LARGE
                else:
                    timestamp = part.commit_timestamp if request.version == 1 and part.commit_timestamp >= 0 else now_ms
                    to_commit.append((topic.name, part.partition_index, kafka_commit(
                        part.committed_offset, part.committed_metadata, part.committed_leader_epoch, timestamp)))
            partitions.append([part.partition_index, error])
        results.append((topic, partitions))

    def respond(ok: bool = True) -> None:
        topic_response = kp.OffsetCommitResponse.OffsetCommitResponseTopic
        partition_response = kp.OffsetCommitResponse.OffsetCommitResponsePartition
        topics = []
        for topic, partitions in results:
            topics.append(topic_response(name=topic.name, partitions=[
                partition_response(partition_index=index, error_code=error if ok or error else UNKNOWN_SERVER_ERROR)
                for index, error in partitions]))
        request.respond(kp.OffsetCommitResponse(throttle_time_ms=0, topics=topics))

    if to_commit:
        broker.register_subscription_group(body.group_id)
        broker.offsets.commit(body.group_id, to_commit, respond)
    else:
        respond()


# -- OffsetFetch ------------------------------------------------------------------------------------------------

def _fetch_group(request: Request, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
                 ) -> list[tuple[str, list[tuple[int, CommittedOffset | None | int]]]]:
    """Per topic, (partition, committed offset, or the error code UNSTABLE_OFFSET_COMMIT)."""
    offsets = request.broker.offsets
    transactions = request.front.transactions
    if topics is None:
        topics = sorted(offsets.partitions(group_id).items())
    return [(name, [(partition, UNSTABLE_OFFSET_COMMIT
                     if require_stable and transactions.has_pending_offset(group_id, name, partition)
                     else offsets.fetch(group_id, name, partition)) for partition in partitions])
            for name, partitions in topics]


def handle_offset_fetch(request: Request, body: Any) -> None:
    if request.version >= 8:
        group_type = kp.OffsetFetchResponse.OffsetFetchResponseGroup
        topic_type = kp.OffsetFetchResponse.OffsetFetchResponseTopics
        partition_type = kp.OffsetFetchResponse.OffsetFetchResponsePartitions
        groups = []
        for group in body.groups:
            wanted = None if group.topics is None else [(t.name, list(t.partition_indexes)) for t in group.topics]
            found = _fetch_group(request, group.group_id, wanted, body.require_stable)
            groups.append(group_type(group_id=group.group_id, error_code=NONE, topics=[
                topic_type(name=name, partitions=[_partition(partition_type, p, c) for p, c in partitions])
                for name, partitions in found]))
        request.respond(kp.OffsetFetchResponse(throttle_time_ms=0, groups=groups))
        return
    wanted = None if body.topics is None else [(t.name, list(t.partition_indexes)) for t in body.topics]
    found = _fetch_group(request, body.group_id, wanted, request.version >= 7 and body.require_stable)
    # Before v8 (one group per request) the response's topic and partition structs are others.
    legacy_topic = kp.OffsetFetchResponse.OffsetFetchResponseTopic
    legacy_partition = kp.OffsetFetchResponse.OffsetFetchResponsePartition
    request.respond(kp.OffsetFetchResponse(throttle_time_ms=0, error_code=NONE, topics=[
        legacy_topic(name=name, partitions=[_partition(legacy_partition, p, c) for p, c in partitions])
        for name, partitions in found]))


def _partition(partition_type: type, partition: int, committed: CommittedOffset | None | int) -> Any:
    if committed is None or isinstance(committed, int):
        return partition_type(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1,
                              metadata="", error_code=committed or NONE)
    metadata, leader_epoch = kafka_commit_fields(committed)
    return partition_type(partition_index=partition, committed_offset=committed.offset,
                          committed_leader_epoch=leader_epoch, metadata=metadata, error_code=NONE)


# -- OffsetDelete -----------------------------------------------------------------------------------------------

def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer-protocol Subscription (version, then an int32 count of int16-length names);
    None when it does not read as one."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        position = 6
        topics = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, position)
            topics.add(bytes(metadata[position + 2:position + 2 + length]).decode("utf-8"))
            position += 2 + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def handle_offset_delete(request: Request, body: Any) -> None:
    broker = request.broker
    description = broker.groups.describe(body.group_id)
    known = description is not None or body.group_id in broker.known_groups()
    topic_type = kp.OffsetDeleteResponse.OffsetDeleteResponseTopic
    partition_type = kp.OffsetDeleteResponse.OffsetDeleteResponsePartition
    if not known:
        request.respond(kp.OffsetDeleteResponse(error_code=GROUP_ID_NOT_FOUND, throttle_time_ms=0, topics=[]))
        return
    subscribed: set[str] = set()
    everything = False
    if description is not None and description.protocol_type == "consumer":
        for member in description.members:
            topics = subscribed_topics(member.metadata)
            if topics is None:
                everything = True
            else:
                subscribed |= topics
    elif description is not None and description.members:
        everything = True
    deleted = []
    response_topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            if not _known_partition(request, topic.name, part.partition_index):
                error = UNKNOWN_TOPIC_OR_PARTITION
            elif everything or topic.name in subscribed:
                error = GROUP_SUBSCRIBED_TO_TOPIC
            else:
                error = NONE
                deleted.append((topic.name, part.partition_index))
            partitions.append(partition_type(partition_index=part.partition_index, error_code=error))
        response_topics.append(topic_type(name=topic.name, partitions=partitions))
    response = kp.OffsetDeleteResponse(error_code=NONE, throttle_time_ms=0, topics=response_topics)
    if deleted:
        broker.offsets.delete(body.group_id, deleted, lambda ok: request.respond(response))
    else:
        request.respond(response)


HANDLERS = {
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
}
