"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs.

There is one broker: a replication factor other than 1 (or -1, the default) is INVALID_REPLICATION_FACTOR, and
replica assignments may only name this broker. Topic configs are Kafka's that fastmq.broker.kafka.topic_rules knows; broker
configs are described (read-only) but not altered. DeleteRecords moves a partition's log start offset (Kafka's
low watermark) to the offset given, -1 meaning the high watermark, and answers once that is on disk; an offset
beyond the high watermark is OFFSET_OUT_OF_RANGE, one below the log start leaves it where it is.
"""
from __future__ import annotations

from typing import Any

from fastmq.broker.errors import TopicError
from fastmq.broker.kafka.errors import kafka_code
from fastmq.broker.kafka.front import Request
from fastmq.broker.kafka.metadata import ZERO_UUID, resolve_topic
from fastmq.broker.kafka.topic_rules import TOPIC_CONFIGS
from fastmq.broker.topics import Topic
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

NONE = 0
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# DescribeConfigs config sources
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# IncrementalAlterConfigs operations
OP_SET, OP_DELETE = 0, 1
# DescribeConfigs config types
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG = 1, 2, 3, 5

INVALID_REPLICATION_FACTOR = kerrors.InvalidReplicationFactorError.errno
INVALID_REPLICA_ASSIGNMENT = kerrors.InvalidReplicationAssignmentError.errno
INVALID_REQUEST = kerrors.InvalidRequestError.errno
INVALID_CONFIG = kerrors.InvalidConfigurationError.errno
UNKNOWN_TOPIC_OR_PARTITION = kerrors.UnknownTopicOrPartitionError.errno
UNKNOWN_TOPIC_ID = kerrors.UnknownTopicIdError.errno
OFFSET_OUT_OF_RANGE = kerrors.OffsetOutOfRangeError.errno
KAFKA_STORAGE_ERROR = kerrors.KafkaStorageError.errno


def _config_type(value: str) -> int:
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    if value.lstrip("-").isdigit():
        return TYPE_INT if -2 ** 31 <= int(value) < 2 ** 31 else TYPE_LONG
    return TYPE_STRING


def _topic_configs(topic: Topic) -> list[tuple[str, str, int]]:
    """(name, value, source) of every config the topic has."""
    return [(name, topic.config(name), DYNAMIC_TOPIC_CONFIG if name in topic.configs else DEFAULT_CONFIG)
            for name in sorted(TOPIC_CONFIGS)]


def _assignment_error(request: Request, broker_id_lists: list[list[int]]) -> str | None:
    node = request.broker.config.node_id
    for broker_ids in broker_id_lists:
        if list(broker_ids) != [node]:
            return f"replicas can only be on broker {node}, not {list(broker_ids)}"
    return None


# -- topics -----------------------------------------------------------------------------------------------------

def handle_create_topics(request: Request, body: Any) -> None:
    broker = request.broker
    result_type = kp.CreateTopicsResponse.CreatableTopicResult
    config_type = kp.CreateTopicsResponse.CreatableTopicConfigs
    results = []
    for wanted in body.topics:
        partitions = wanted.num_partitions
        error, message, topic = NONE, None, None
        if wanted.replication_factor not in (1, -1) and not wanted.assignments:
            error = INVALID_REPLICATION_FACTOR
            message = f"replication factor {wanted.replication_factor}: this broker is a single node (use 1)"
        elif wanted.assignments:
            message = _assignment_error(request, [a.broker_ids for a in wanted.assignments])
            if message is not None or partitions not in (-1, len(wanted.assignments)):
                error = INVALID_REPLICA_ASSIGNMENT
                message = message or "num_partitions must be -1 when assignments are given"
            partitions = len(wanted.assignments)
        if error == NONE:
            try:
                topic = broker.topics.create(wanted.name, partitions,
                                             {config.name: config.value for config in wanted.configs},
                                             validate_only=request.version >= 1 and body.validate_only)
            except TopicError as exc:
                error, message = kafka_code(exc.error), str(exc)
        if topic is None:
            results.append(result_type(name=wanted.name, topic_id=ZERO_UUID, error_code=error, error_message=message,
                                       num_partitions=-1, replication_factor=-1, configs=None))
            continue
        results.append(result_type(
            name=topic.name, topic_id=topic.topic_id, error_code=NONE, error_message=None,
            num_partitions=topic.partitions, replication_factor=1,
            configs=[config_type(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                     for name, value, source in _topic_configs(topic)]))
    request.respond(kp.CreateTopicsResponse(throttle_time_ms=0, topics=results))


def handle_delete_topics(request: Request, body: Any) -> None:
    broker = request.broker
    result_type = kp.DeleteTopicsResponse.DeletableTopicResult
    if request.version >= 6:
        wanted = [(state.name, state.topic_id) for state in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        topic = resolve_topic(broker, name, topic_id)
        if topic is None:
            by_id = topic_id is not None and topic_id != ZERO_UUID
            results.append(result_type(name=name, topic_id=topic_id or ZERO_UUID,
                                       error_code=UNKNOWN_TOPIC_ID if by_id else UNKNOWN_TOPIC_OR_PARTITION,
                                       error_message="no such topic"))
            continue
        try:
            broker.topics.delete(topic.name)
            results.append(result_type(name=topic.name, topic_id=topic.topic_id, error_code=NONE))
        except TopicError as exc:
            results.append(result_type(name=topic.name, topic_id=topic.topic_id, error_code=kafka_code(exc.error),
                                       error_message=str(exc)))
    request.respond(kp.DeleteTopicsResponse(throttle_time_ms=0, responses=results))


def handle_create_partitions(request: Request, body: Any) -> None:
    broker = request.broker
    result_type = kp.CreatePartitionsResponse.CreatePartitionsTopicResult
    results = []
    for wanted in body.topics:
        error, message = NONE, None
        if wanted.assignments is not None:
            message = _assignment_error(request, [a.broker_ids for a in wanted.assignments])
            if message is not None:
                error = INVALID_REPLICA_ASSIGNMENT
        if error == NONE:
            try:
                broker.topics.add_partitions(wanted.name, wanted.count, body.validate_only)
            except TopicError as exc:
                error, message = kafka_code(exc.error), str(exc)
        results.append(result_type(name=wanted.name, error_code=error, error_message=message))
    request.respond(kp.CreatePartitionsResponse(throttle_time_ms=0, results=results))


# -- configs ----------------------------------------------------------------------------------------------------

def _broker_configs(request: Request) -> list[tuple[str, str]]:
    config = request.broker.config
    store = request.broker.store.config
    return [
        ("auto.create.topics.enable", "true" if config.auto_create_topics else "false"),
        ("broker.id", str(config.node_id)),
        ("default.replication.factor", "1"),
        ("group.initial.rebalance.delay.ms", str(config.group_initial_rebalance_delay_ms)),
        ("group.max.session.timeout.ms", str(config.group_max_session_timeout_ms)),
        ("group.min.session.timeout.ms", str(config.group_min_session_timeout_ms)),
        ("log.retention.hours", str(int(store.file_reserved_time_hours))),
        ("log.segment.bytes", str(store.mapped_file_size_commit_log)),
        ("message.max.bytes", str(config.max_message_bytes)),
        ("num.partitions", str(config.num_partitions)),
        ("socket.request.max.bytes", str(config.max_request_size)),
    ]


def handle_describe_configs(request: Request, body: Any) -> None:
    broker = request.broker
    result_type = kp.DescribeConfigsResponse.DescribeConfigsResult
    entry_type = kp.DescribeConfigsResponse.DescribeConfigsResourceResult
    synonym_type = kp.DescribeConfigsResponse.DescribeConfigsSynonym
    synonyms = request.version >= 1 and body.include_synonyms
    results = []
    for resource in body.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        if resource.resource_type == RESOURCE_TOPIC:
            topic = broker.topics.get(resource.resource_name)
            if topic is None:
                results.append(result_type(error_code=UNKNOWN_TOPIC_OR_PARTITION, error_message="no such topic",
                                           resource_type=resource.resource_type,
                                           resource_name=resource.resource_name, configs=[]))
                continue
            entries = [(name, value, source, False) for name, value, source in _topic_configs(topic)]
        elif resource.resource_type == RESOURCE_BROKER and resource.resource_name in ("", str(broker.config.node_id)):
            entries = [(name, value, STATIC_BROKER_CONFIG, True) for name, value in _broker_configs(request)]
        else:
            results.append(result_type(error_code=INVALID_REQUEST,
                                       error_message=f"resource type {resource.resource_type} "
                                                     f"{resource.resource_name!r} is not described here",
                                       resource_type=resource.resource_type, resource_name=resource.resource_name,
                                       configs=[]))
            continue
        configs = [entry_type(name=name, value=value, read_only=read_only, config_source=source,
                              is_default=source == DEFAULT_CONFIG, is_sensitive=False,
                              synonyms=[synonym_type(name=name, value=value, source=source)] if synonyms else [],
                              config_type=_config_type(value), documentation=None)
                   for name, value, source, read_only in entries if keys is None or name in keys]
        results.append(result_type(error_code=NONE, error_message=None, resource_type=resource.resource_type,
                                   resource_name=resource.resource_name, configs=configs))
    request.respond(kp.DescribeConfigsResponse(throttle_time_ms=0, results=results))


def _alter(request: Request, resource: Any, set_configs: dict[str, str], delete: list[str], replace: bool,
           validate_only: bool) -> tuple[int, str | None]:
    if resource.resource_type != RESOURCE_TOPIC:
        return INVALID_REQUEST, "only topic configs can be altered on this broker"
    try:
        request.broker.topics.alter_configs(resource.resource_name, set_configs, delete, replace, validate_only)
    except TopicError as exc:
        return kafka_code(exc.error), str(exc)
    return NONE, None


def handle_alter_configs(request: Request, body: Any) -> None:
    response_type = kp.AlterConfigsResponse.AlterConfigsResourceResponse
    responses = []
    for resource in body.resources:
        error, message = _alter(request, resource, {c.name: c.value for c in resource.configs}, [], True,
                                body.validate_only)
        responses.append(response_type(error_code=error, error_message=message,
                                       resource_type=resource.resource_type, resource_name=resource.resource_name))
    request.respond(kp.AlterConfigsResponse(throttle_time_ms=0, responses=responses))


def handle_incremental_alter_configs(request: Request, body: Any) -> None:
    response_type = kp.IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    responses = []
    for resource in body.resources:
        set_configs = {c.name: c.value for c in resource.configs if c.config_operation == OP_SET}
        delete = [c.name for c in resource.configs if c.config_operation == OP_DELETE]
        others = [c.name for c in resource.configs if c.config_operation not in (OP_SET, OP_DELETE)]
        message: str | None
        if others:
            error, message = INVALID_CONFIG, f"APPEND/SUBTRACT apply to list configs, none of which is alterable " \
                                             f"here ({', '.join(others)})"
        else:
            error, message = _alter(request, resource, set_configs, delete, False, body.validate_only)
        responses.append(response_type(error_code=error, error_message=message,
                                       resource_type=resource.resource_type, resource_name=resource.resource_name))
    request.respond(kp.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses))


# -- records ----------------------------------------------------------------------------------------------------

def handle_delete_records(request: Request, body: Any) -> None:
    broker = request.broker
    logs = request.front.logs
    results: list[tuple[str, list[list[int]]]] = []       # (topic, [[partition, low watermark, error], ...])
    moves: list[tuple[str, int, int]] = []
    for topic in body.topics:
        info = broker.topics.get(topic.name)
        partitions = []
        for part in topic.partitions:
            index = part.partition_index
            if info is None or not 0 <= index < info.partitions:
                partitions.append([index, -1, UNKNOWN_TOPIC_OR_PARTITION])
            elif part.offset < -1 or part.offset > logs.high_watermark(topic.name, index):
                partitions.append([index, -1, OFFSET_OUT_OF_RANGE])
            else:
                partitions.append([index, -1, NONE])
                moves.append((topic.name, index, part.offset))
        results.append((topic.name, partitions))

    def respond(ok: bool = True) -> None:
        topic_type = kp.DeleteRecordsResponse.DeleteRecordsTopicResult
        partition_type = kp.DeleteRecordsResponse.DeleteRecordsPartitionResult
        request.respond(kp.DeleteRecordsResponse(throttle_time_ms=0, topics=[topic_type(name=name, partitions=[
            partition_type(partition_index=index, low_watermark=low if ok or error else -1,
                           error_code=error if ok or error else KAFKA_STORAGE_ERROR)
            for index, low, error in partitions]) for name, partitions in results]))

    if not moves:
        respond()
        return
    moved = iter(logs.delete_records(moves, lambda ok: broker.loop.call_soon_threadsafe(respond, ok)))
    for _name, partitions in results:
        for entry in partitions:
            if entry[2] == NONE:
                entry[1] = next(moved)


HANDLERS = {
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
}
