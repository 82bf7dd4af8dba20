"""Every Kafka API fastmq speaks: its schema, its request and response classes, and its compiled codecs.

The classes are generated from the schemas at import (structs.py); codecs are compiled on first use of an
(API, version, direction) and cached, so importing costs only the parsing of the schema texts.
"""
from __future__ import annotations

from enum import IntEnum

from fastmq.kafka._native.kafka_protocol import StructCodec
from fastmq.kafka.errors import UnsupportedVersionError
from fastmq.kafka.protocol import schemas_admin, schemas_client, schemas_group, schemas_security, schemas_txn
from fastmq.kafka.protocol.compiler import compile_message
from fastmq.kafka.protocol.schema import ApiSchema, parse_apis
from fastmq.kafka.protocol.structs import make_message_classes


class ApiKey(IntEnum):
    """The API keys of the Kafka APIs fastmq implements."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


def _load() -> dict[int, ApiSchema]:
    apis: dict[int, ApiSchema] = {}
    for module in (schemas_client, schemas_group, schemas_txn, schemas_admin, schemas_security):
        for api in parse_apis(module.SCHEMAS):
            if api.key in apis:
                raise ValueError(f"API key {api.key} is defined twice")
            make_message_classes(api.request)
            make_message_classes(api.response)
            apis[api.key] = api
    if set(apis) != set(ApiKey):
        raise ValueError(f"ApiKey and the schemas disagree: {sorted(set(apis) ^ set(ApiKey))}")
    return apis


APIS: dict[int, ApiSchema] = _load()
"""API key -> its schema (name, versions, flexible versions, request and response)."""

_codecs: dict[tuple[int, int, bool], StructCodec] = {}


def api_schema(api_key: int) -> ApiSchema:
    api = APIS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"fastmq does not implement API key {api_key}")
    return api


def body_codec(api_key: int, version: int, response: bool) -> StructCodec:
    """The compiled codec of a request (response=False) or response body; cached."""
    key = (api_key, version, response)
    codec = _codecs.get(key)
    if codec is None:
        api = api_schema(api_key)
        if version not in api.versions:
            raise UnsupportedVersionError(f"fastmq speaks {api.name} versions {api.versions}, not {version}")
        codec = _codecs[key] = compile_message(api.response if response else api.request, version)
    return codec


def is_flexible(api_key: int, version: int) -> bool:
    return api_schema(api_key).is_flexible(version)


def _message_class(api_key: ApiKey, kind: str) -> type:
    message = APIS[api_key].request if kind == "request" else APIS[api_key].response
    return message.root.cls  # type: ignore[return-value]


ApiVersionsRequest = _message_class(ApiKey.API_VERSIONS, "request")
ApiVersionsResponse = _message_class(ApiKey.API_VERSIONS, "response")
SaslHandshakeRequest = _message_class(ApiKey.SASL_HANDSHAKE, "request")
SaslHandshakeResponse = _message_class(ApiKey.SASL_HANDSHAKE, "response")
SaslAuthenticateRequest = _message_class(ApiKey.SASL_AUTHENTICATE, "request")
SaslAuthenticateResponse = _message_class(ApiKey.SASL_AUTHENTICATE, "response")
MetadataRequest = _message_class(ApiKey.METADATA, "request")
MetadataResponse = _message_class(ApiKey.METADATA, "response")
DescribeClusterRequest = _message_class(ApiKey.DESCRIBE_CLUSTER, "request")
DescribeClusterResponse = _message_class(ApiKey.DESCRIBE_CLUSTER, "response")
ProduceRequest = _message_class(ApiKey.PRODUCE, "request")
ProduceResponse = _message_class(ApiKey.PRODUCE, "response")
FetchRequest = _message_class(ApiKey.FETCH, "request")
FetchResponse = _message_class(ApiKey.FETCH, "response")
ListOffsetsRequest = _message_class(ApiKey.LIST_OFFSETS, "request")
ListOffsetsResponse = _message_class(ApiKey.LIST_OFFSETS, "response")
OffsetForLeaderEpochRequest = _message_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, "request")
OffsetForLeaderEpochResponse = _message_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, "response")
FindCoordinatorRequest = _message_class(ApiKey.FIND_COORDINATOR, "request")
FindCoordinatorResponse = _message_class(ApiKey.FIND_COORDINATOR, "response")
JoinGroupRequest = _message_class(ApiKey.JOIN_GROUP, "request")
JoinGroupResponse = _message_class(ApiKey.JOIN_GROUP, "response")
SyncGroupRequest = _message_class(ApiKey.SYNC_GROUP, "request")
SyncGroupResponse = _message_class(ApiKey.SYNC_GROUP, "response")
HeartbeatRequest = _message_class(ApiKey.HEARTBEAT, "request")
HeartbeatResponse = _message_class(ApiKey.HEARTBEAT, "response")
LeaveGroupRequest = _message_class(ApiKey.LEAVE_GROUP, "request")
LeaveGroupResponse = _message_class(ApiKey.LEAVE_GROUP, "response")
DescribeGroupsRequest = _message_class(ApiKey.DESCRIBE_GROUPS, "request")
DescribeGroupsResponse = _message_class(ApiKey.DESCRIBE_GROUPS, "response")
ListGroupsRequest = _message_class(ApiKey.LIST_GROUPS, "request")
ListGroupsResponse = _message_class(ApiKey.LIST_GROUPS, "response")
DeleteGroupsRequest = _message_class(ApiKey.DELETE_GROUPS, "request")
DeleteGroupsResponse = _message_class(ApiKey.DELETE_GROUPS, "response")
OffsetCommitRequest = _message_class(ApiKey.OFFSET_COMMIT, "request")
OffsetCommitResponse = _message_class(ApiKey.OFFSET_COMMIT, "response")
OffsetFetchRequest = _message_class(ApiKey.OFFSET_FETCH, "request")
OffsetFetchResponse = _message_class(ApiKey.OFFSET_FETCH, "response")
OffsetDeleteRequest = _message_class(ApiKey.OFFSET_DELETE, "request")
OffsetDeleteResponse = _message_class(ApiKey.OFFSET_DELETE, "response")
DescribeLogDirsRequest = _message_class(ApiKey.DESCRIBE_LOG_DIRS, "request")
DescribeLogDirsResponse = _message_class(ApiKey.DESCRIBE_LOG_DIRS, "response")
ListPartitionReassignmentsRequest = _message_class(ApiKey.LIST_PARTITION_REASSIGNMENTS, "request")
ListPartitionReassignmentsResponse = _message_class(ApiKey.LIST_PARTITION_REASSIGNMENTS, "response")
DescribeQuorumRequest = _message_class(ApiKey.DESCRIBE_QUORUM, "request")
DescribeQuorumResponse = _message_class(ApiKey.DESCRIBE_QUORUM, "response")
ElectLeadersRequest = _message_class(ApiKey.ELECT_LEADERS, "request")
ElectLeadersResponse = _message_class(ApiKey.ELECT_LEADERS, "response")
ListConfigResourcesRequest = _message_class(ApiKey.LIST_CONFIG_RESOURCES, "request")
ListConfigResourcesResponse = _message_class(ApiKey.LIST_CONFIG_RESOURCES, "response")
DescribeProducersRequest = _message_class(ApiKey.DESCRIBE_PRODUCERS, "request")
DescribeProducersResponse = _message_class(ApiKey.DESCRIBE_PRODUCERS, "response")
DescribeTransactionsRequest = _message_class(ApiKey.DESCRIBE_TRANSACTIONS, "request")
DescribeTransactionsResponse = _message_class(ApiKey.DESCRIBE_TRANSACTIONS, "response")
ListTransactionsRequest = _message_class(ApiKey.LIST_TRANSACTIONS, "request")
ListTransactionsResponse = _message_class(ApiKey.LIST_TRANSACTIONS, "response")
InitProducerIdRequest = _message_class(ApiKey.INIT_PRODUCER_ID, "request")
InitProducerIdResponse = _message_class(ApiKey.INIT_PRODUCER_ID, "response")
AddPartitionsToTxnRequest = _message_class(ApiKey.ADD_PARTITIONS_TO_TXN, "request")
AddPartitionsToTxnResponse = _message_class(ApiKey.ADD_PARTITIONS_TO_TXN, "response")
AddOffsetsToTxnRequest = _message_class(ApiKey.ADD_OFFSETS_TO_TXN, "request")
AddOffsetsToTxnResponse = _message_class(ApiKey.ADD_OFFSETS_TO_TXN, "response")
EndTxnRequest = _message_class(ApiKey.END_TXN, "request")
EndTxnResponse = _message_class(ApiKey.END_TXN, "response")
TxnOffsetCommitRequest = _message_class(ApiKey.TXN_OFFSET_COMMIT, "request")
TxnOffsetCommitResponse = _message_class(ApiKey.TXN_OFFSET_COMMIT, "response")
CreateTopicsRequest = _message_class(ApiKey.CREATE_TOPICS, "request")
CreateTopicsResponse = _message_class(ApiKey.CREATE_TOPICS, "response")
DeleteTopicsRequest = _message_class(ApiKey.DELETE_TOPICS, "request")
DeleteTopicsResponse = _message_class(ApiKey.DELETE_TOPICS, "response")
CreatePartitionsRequest = _message_class(ApiKey.CREATE_PARTITIONS, "request")
CreatePartitionsResponse = _message_class(ApiKey.CREATE_PARTITIONS, "response")
DeleteRecordsRequest = _message_class(ApiKey.DELETE_RECORDS, "request")
DeleteRecordsResponse = _message_class(ApiKey.DELETE_RECORDS, "response")
DescribeConfigsRequest = _message_class(ApiKey.DESCRIBE_CONFIGS, "request")
DescribeConfigsResponse = _message_class(ApiKey.DESCRIBE_CONFIGS, "response")
AlterConfigsRequest = _message_class(ApiKey.ALTER_CONFIGS, "request")
AlterConfigsResponse = _message_class(ApiKey.ALTER_CONFIGS, "response")
IncrementalAlterConfigsRequest = _message_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, "request")
IncrementalAlterConfigsResponse = _message_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, "response")
WriteTxnMarkersRequest = _message_class(ApiKey.WRITE_TXN_MARKERS, "request")
WriteTxnMarkersResponse = _message_class(ApiKey.WRITE_TXN_MARKERS, "response")
DescribeAclsRequest = _message_class(ApiKey.DESCRIBE_ACLS, "request")
DescribeAclsResponse = _message_class(ApiKey.DESCRIBE_ACLS, "response")
CreateAclsRequest = _message_class(ApiKey.CREATE_ACLS, "request")
CreateAclsResponse = _message_class(ApiKey.CREATE_ACLS, "response")
DeleteAclsRequest = _message_class(ApiKey.DELETE_ACLS, "request")
DeleteAclsResponse = _message_class(ApiKey.DELETE_ACLS, "response")
DescribeUserScramCredentialsRequest = _message_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "request")
DescribeUserScramCredentialsResponse = _message_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "response")
AlterUserScramCredentialsRequest = _message_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "request")
AlterUserScramCredentialsResponse = _message_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "response")
AlterReplicaLogDirsRequest = _message_class(ApiKey.ALTER_REPLICA_LOG_DIRS, "request")
AlterReplicaLogDirsResponse = _message_class(ApiKey.ALTER_REPLICA_LOG_DIRS, "response")
AlterPartitionReassignmentsRequest = _message_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "request")
AlterPartitionReassignmentsResponse = _message_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "response")
UpdateFeaturesRequest = _message_class(ApiKey.UPDATE_FEATURES, "request")
UpdateFeaturesResponse = _message_class(ApiKey.UPDATE_FEATURES, "response")
DescribeTopicPartitionsRequest = _message_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "request")
DescribeTopicPartitionsResponse = _message_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "response")

__all__ = ["APIS", "ApiKey", "api_schema", "body_codec", "is_flexible"] + sorted(
    name for name, value in list(globals().items())
    if isinstance(value, type) and name.endswith(("Request", "Response")) and hasattr(value, "API_KEY"))
