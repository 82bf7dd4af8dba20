"""Type stub of fastmq.kafka.protocol.messages, written by fastmq.kafka.protocol.messages_stub from the
schemas: do not edit, regenerate (python -m fastmq.kafka.protocol.messages_stub)."""
import uuid
from enum import IntEnum
from typing import ClassVar

from fastmq.kafka._native.kafka_protocol import Struct, StructCodec
from fastmq.kafka.protocol.schema import ApiSchema

class ApiKey(IntEnum):
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

APIS: dict[int, ApiSchema]
def api_schema(api_key: int) -> ApiSchema: ...
def body_codec(api_key: int, version: int, response: bool) -> StructCodec: ...
def is_flexible(api_key: int, version: int) -> bool: ...

class AddOffsetsToTxnRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    def __init__(
        self,
        *,
        transactional_id: str = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
        group_id: str = ...,
    ) -> None: ...

class AddOffsetsToTxnResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    throttle_time_ms: int
    error_code: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ...) -> None: ...

class AddPartitionsToTxnRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AddPartitionsToTxnTransaction(Struct):
        transactional_id: str
        producer_id: int
        producer_epoch: int
        verify_only: bool
        topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]
        def __init__(
            self,
            *,
            transactional_id: str = ...,
            producer_id: int = ...,
            producer_epoch: int = ...,
            verify_only: bool = ...,
            topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = ...,
        ) -> None: ...
    class AddPartitionsToTxnTopic(Struct):
        name: str
        partitions: list[int]
        def __init__(self, *, name: str = ..., partitions: list[int] = ...) -> None: ...
    transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction]
    v3_and_below_transactional_id: str
    v3_and_below_producer_id: int
    v3_and_below_producer_epoch: int
    v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]
    def __init__(
        self,
        *,
        transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction] = ...,
        v3_and_below_transactional_id: str = ...,
        v3_and_below_producer_id: int = ...,
        v3_and_below_producer_epoch: int = ...,
        v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = ...,
    ) -> None: ...

class AddPartitionsToTxnResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AddPartitionsToTxnResult(Struct):
        transactional_id: str
        topic_results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]
        def __init__(
            self,
            *,
            transactional_id: str = ...,
            topic_results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult] = ...,
        ) -> None: ...
    class AddPartitionsToTxnTopicResult(Struct):
        name: str
        results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]
        def __init__(
            self,
            *,
            name: str = ...,
            results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult] = ...,
        ) -> None: ...
    class AddPartitionsToTxnPartitionResult(Struct):
        partition_index: int
        partition_error_code: int
        def __init__(self, *, partition_index: int = ..., partition_error_code: int = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    results_by_transaction: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult]
    results_by_topic_v3_and_below: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        results_by_transaction: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult] = ...,
        results_by_topic_v3_and_below: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult] = ...,
    ) -> None: ...

class AlterConfigsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterConfigsResource(Struct):
        resource_type: int
        resource_name: str
        configs: list[AlterConfigsRequest.AlterableConfig]
        def __init__(
            self,
            *,
            resource_type: int = ...,
            resource_name: str = ...,
            configs: list[AlterConfigsRequest.AlterableConfig] = ...,
        ) -> None: ...
    class AlterableConfig(Struct):
        name: str
        value: str | None
        def __init__(self, *, name: str = ..., value: str | None = ...) -> None: ...
    resources: list[AlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    def __init__(
        self,
        *,
        resources: list[AlterConfigsRequest.AlterConfigsResource] = ...,
        validate_only: bool = ...,
    ) -> None: ...

class AlterConfigsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterConfigsResourceResponse(Struct):
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        def __init__(
            self,
            *,
            error_code: int = ...,
            error_message: str | None = ...,
            resource_type: int = ...,
            resource_name: str = ...,
        ) -> None: ...
    throttle_time_ms: int
    responses: list[AlterConfigsResponse.AlterConfigsResourceResponse]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        responses: list[AlterConfigsResponse.AlterConfigsResourceResponse] = ...,
    ) -> None: ...

class AlterPartitionReassignmentsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ReassignableTopic(Struct):
        name: str
        partitions: list[AlterPartitionReassignmentsRequest.ReassignablePartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[AlterPartitionReassignmentsRequest.ReassignablePartition] = ...,
        ) -> None: ...
    class ReassignablePartition(Struct):
        partition_index: int
        replicas: list[int] | None
        def __init__(self, *, partition_index: int = ..., replicas: list[int] | None = ...) -> None: ...
    timeout_ms: int
    allow_replication_factor_change: bool
    topics: list[AlterPartitionReassignmentsRequest.ReassignableTopic]
    def __init__(
        self,
        *,
        timeout_ms: int = ...,
        allow_replication_factor_change: bool = ...,
        topics: list[AlterPartitionReassignmentsRequest.ReassignableTopic] = ...,
    ) -> None: ...

class AlterPartitionReassignmentsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ReassignableTopicResponse(Struct):
        name: str
        partitions: list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse] = ...,
        ) -> None: ...
    class ReassignablePartitionResponse(Struct):
        partition_index: int
        error_code: int
        error_message: str | None
        def __init__(
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
        ) -> None: ...
    throttle_time_ms: int
    allow_replication_factor_change: bool
    error_code: int
    error_message: str | None
    responses: list[AlterPartitionReassignmentsResponse.ReassignableTopicResponse]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        allow_replication_factor_change: bool = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        responses: list[AlterPartitionReassignmentsResponse.ReassignableTopicResponse] = ...,
    ) -> None: ...

class AlterReplicaLogDirsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterReplicaLogDir(Struct):
        path: str
        topics: list[AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic]
        def __init__(
            self,
            *,
            path: str = ...,
            topics: list[AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic] = ...,
        ) -> None: ...
    class AlterReplicaLogDirTopic(Struct):
        name: str
        partitions: list[int]
        def __init__(self, *, name: str = ..., partitions: list[int] = ...) -> None: ...
    dirs: list[AlterReplicaLogDirsRequest.AlterReplicaLogDir]
    def __init__(self, *, dirs: list[AlterReplicaLogDirsRequest.AlterReplicaLogDir] = ...) -> None: ...

class AlterReplicaLogDirsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterReplicaLogDirTopicResult(Struct):
        topic_name: str
        partitions: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]
        def __init__(
            self,
            *,
            topic_name: str = ...,
            partitions: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult] = ...,
        ) -> None: ...
    class AlterReplicaLogDirPartitionResult(Struct):
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    results: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        results: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult] = ...,
    ) -> None: ...

class AlterUserScramCredentialsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ScramCredentialDeletion(Struct):
        name: str
        mechanism: int
        def __init__(self, *, name: str = ..., mechanism: int = ...) -> None: ...
    class ScramCredentialUpsertion(Struct):
        name: str
        mechanism: int
        iterations: int
        salt: bytes
        salted_password: bytes
        def __init__(
            self,
            *,
            name: str = ...,
            mechanism: int = ...,
            iterations: int = ...,
            salt: bytes = ...,
            salted_password: bytes = ...,
        ) -> None: ...
    deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion]
    upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion]
    def __init__(
        self,
        *,
        deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion] = ...,
        upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion] = ...,
    ) -> None: ...

class AlterUserScramCredentialsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterUserScramCredentialsResult(Struct):
        user: str
        error_code: int
        error_message: str | None
        def __init__(self, *, user: str = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    results: list[AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        results: list[AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult] = ...,
    ) -> None: ...

class ApiVersionsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    client_software_name: str
    client_software_version: str
    def __init__(self, *, client_software_name: str = ..., client_software_version: str = ...) -> None: ...

class ApiVersionsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ApiVersion(Struct):
        api_key: int
        min_version: int
        max_version: int
        def __init__(self, *, api_key: int = ..., min_version: int = ..., max_version: int = ...) -> None: ...
    class SupportedFeatureKey(Struct):
        name: str
        min_version: int
        max_version: int
        def __init__(self, *, name: str = ..., min_version: int = ..., max_version: int = ...) -> None: ...
    class FinalizedFeatureKey(Struct):
        name: str
        max_version_level: int
        min_version_level: int
        def __init__(self, *, name: str = ..., max_version_level: int = ..., min_version_level: int = ...) -> None: ...
    error_code: int
    api_keys: list[ApiVersionsResponse.ApiVersion]
    throttle_time_ms: int
    supported_features: list[ApiVersionsResponse.SupportedFeatureKey]
    finalized_features_epoch: int
    finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey]
    zk_migration_ready: bool
    def __init__(
        self,
        *,
        error_code: int = ...,
        api_keys: list[ApiVersionsResponse.ApiVersion] = ...,
        throttle_time_ms: int = ...,
        supported_features: list[ApiVersionsResponse.SupportedFeatureKey] = ...,
        finalized_features_epoch: int = ...,
        finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey] = ...,
        zk_migration_ready: bool = ...,
    ) -> None: ...

class CreateAclsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AclCreation(Struct):
        resource_type: int
        resource_name: str
        resource_pattern_type: int
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(
            self,
            *,
            resource_type: int = ...,
            resource_name: str = ...,
            resource_pattern_type: int = ...,
            principal: str = ...,
            host: str = ...,
            operation: int = ...,
            permission_type: int = ...,
        ) -> None: ...
    creations: list[CreateAclsRequest.AclCreation]
    def __init__(self, *, creations: list[CreateAclsRequest.AclCreation] = ...) -> None: ...

class CreateAclsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AclCreationResult(Struct):
        error_code: int
        error_message: str | None
        def __init__(self, *, error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    results: list[CreateAclsResponse.AclCreationResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        results: list[CreateAclsResponse.AclCreationResult] = ...,
    ) -> None: ...

class CreatePartitionsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class CreatePartitionsTopic(Struct):
        name: str
        count: int
        assignments: list[CreatePartitionsRequest.CreatePartitionsAssignment] | None
        def __init__(
            self,
            *,
            name: str = ...,
            count: int = ...,
            assignments: list[CreatePartitionsRequest.CreatePartitionsAssignment] | None = ...,
        ) -> None: ...
    class CreatePartitionsAssignment(Struct):
        broker_ids: list[int]
        def __init__(self, *, broker_ids: list[int] = ...) -> None: ...
    topics: list[CreatePartitionsRequest.CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(
        self,
        *,
        topics: list[CreatePartitionsRequest.CreatePartitionsTopic] = ...,
        timeout_ms: int = ...,
        validate_only: bool = ...,
    ) -> None: ...

class CreatePartitionsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class CreatePartitionsTopicResult(Struct):
        name: str
        error_code: int
        error_message: str | None
        def __init__(self, *, name: str = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    results: list[CreatePartitionsResponse.CreatePartitionsTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        results: list[CreatePartitionsResponse.CreatePartitionsTopicResult] = ...,
    ) -> None: ...

class CreateTopicsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class CreatableTopic(Struct):
        name: str
        num_partitions: int
        replication_factor: int
        assignments: list[CreateTopicsRequest.CreatableReplicaAssignment]
        configs: list[CreateTopicsRequest.CreatableTopicConfig]
        def __init__(
            self,
            *,
            name: str = ...,
            num_partitions: int = ...,
            replication_factor: int = ...,
            assignments: list[CreateTopicsRequest.CreatableReplicaAssignment] = ...,
            configs: list[CreateTopicsRequest.CreatableTopicConfig] = ...,
        ) -> None: ...
    class CreatableReplicaAssignment(Struct):
        partition_index: int
        broker_ids: list[int]
        def __init__(self, *, partition_index: int = ..., broker_ids: list[int] = ...) -> None: ...
    class CreatableTopicConfig(Struct):
        name: str
        value: str | None
        def __init__(self, *, name: str = ..., value: str | None = ...) -> None: ...
    topics: list[CreateTopicsRequest.CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(
        self,
        *,
        topics: list[CreateTopicsRequest.CreatableTopic] = ...,
        timeout_ms: int = ...,
        validate_only: bool = ...,
    ) -> None: ...

class CreateTopicsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class CreatableTopicResult(Struct):
        name: str
        topic_id: uuid.UUID
        error_code: int
        error_message: str | None
        topic_config_error_code: int
        num_partitions: int
        replication_factor: int
        configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            error_code: int = ...,
            error_message: str | None = ...,
            topic_config_error_code: int = ...,
            num_partitions: int = ...,
            replication_factor: int = ...,
            configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None = ...,
        ) -> None: ...
    class CreatableTopicConfigs(Struct):
        name: str
        value: str | None
        read_only: bool
        config_source: int
        is_sensitive: bool
        def __init__(
            self,
            *,
            name: str = ...,
            value: str | None = ...,
            read_only: bool = ...,
            config_source: int = ...,
            is_sensitive: bool = ...,
        ) -> None: ...
    throttle_time_ms: int
    topics: list[CreateTopicsResponse.CreatableTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[CreateTopicsResponse.CreatableTopicResult] = ...,
    ) -> None: ...

class DeleteAclsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeleteAclsFilter(Struct):
        resource_type_filter: int
        resource_name_filter: str | None
        pattern_type_filter: int
        principal_filter: str | None
        host_filter: str | None
        operation: int
        permission_type: int
        def __init__(
            self,
            *,
            resource_type_filter: int = ...,
            resource_name_filter: str | None = ...,
            pattern_type_filter: int = ...,
            principal_filter: str | None = ...,
            host_filter: str | None = ...,
            operation: int = ...,
            permission_type: int = ...,
        ) -> None: ...
    filters: list[DeleteAclsRequest.DeleteAclsFilter]
    def __init__(self, *, filters: list[DeleteAclsRequest.DeleteAclsFilter] = ...) -> None: ...

class DeleteAclsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeleteAclsFilterResult(Struct):
        error_code: int
        error_message: str | None
        matching_acls: list[DeleteAclsResponse.DeleteAclsMatchingAcl]
        def __init__(
            self,
            *,
            error_code: int = ...,
            error_message: str | None = ...,
            matching_acls: list[DeleteAclsResponse.DeleteAclsMatchingAcl] = ...,
        ) -> None: ...
    class DeleteAclsMatchingAcl(Struct):
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        pattern_type: int
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(
            self,
            *,
            error_code: int = ...,
            error_message: str | None = ...,
            resource_type: int = ...,
            resource_name: str = ...,
            pattern_type: int = ...,
            principal: str = ...,
            host: str = ...,
            operation: int = ...,
            permission_type: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    filter_results: list[DeleteAclsResponse.DeleteAclsFilterResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        filter_results: list[DeleteAclsResponse.DeleteAclsFilterResult] = ...,
    ) -> None: ...

class DeleteGroupsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    groups_names: list[str]
    def __init__(self, *, groups_names: list[str] = ...) -> None: ...

class DeleteGroupsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeletableGroupResult(Struct):
        group_id: str
        error_code: int
        def __init__(self, *, group_id: str = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    results: list[DeleteGroupsResponse.DeletableGroupResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        results: list[DeleteGroupsResponse.DeletableGroupResult] = ...,
    ) -> None: ...

class DeleteRecordsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeleteRecordsTopic(Struct):
        name: str
        partitions: list[DeleteRecordsRequest.DeleteRecordsPartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[DeleteRecordsRequest.DeleteRecordsPartition] = ...,
        ) -> None: ...
    class DeleteRecordsPartition(Struct):
        partition_index: int
        offset: int
        def __init__(self, *, partition_index: int = ..., offset: int = ...) -> None: ...
    topics: list[DeleteRecordsRequest.DeleteRecordsTopic]
    timeout_ms: int
    def __init__(
        self,
        *,
        topics: list[DeleteRecordsRequest.DeleteRecordsTopic] = ...,
        timeout_ms: int = ...,
    ) -> None: ...

class DeleteRecordsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeleteRecordsTopicResult(Struct):
        name: str
        partitions: list[DeleteRecordsResponse.DeleteRecordsPartitionResult]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[DeleteRecordsResponse.DeleteRecordsPartitionResult] = ...,
        ) -> None: ...
    class DeleteRecordsPartitionResult(Struct):
        partition_index: int
        low_watermark: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., low_watermark: int = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult] = ...,
    ) -> None: ...

class DeleteTopicsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeleteTopicState(Struct):
        name: str | None
        topic_id: uuid.UUID
        def __init__(self, *, name: str | None = ..., topic_id: uuid.UUID = ...) -> None: ...
    topics: list[DeleteTopicsRequest.DeleteTopicState]
    topic_names: list[str]
    timeout_ms: int
    def __init__(
        self,
        *,
        topics: list[DeleteTopicsRequest.DeleteTopicState] = ...,
        topic_names: list[str] = ...,
        timeout_ms: int = ...,
    ) -> None: ...

class DeleteTopicsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DeletableTopicResult(Struct):
        name: str | None
        topic_id: uuid.UUID
        error_code: int
        error_message: str | None
        def __init__(
            self,
            *,
            name: str | None = ...,
            topic_id: uuid.UUID = ...,
            error_code: int = ...,
            error_message: str | None = ...,
        ) -> None: ...
    throttle_time_ms: int
    responses: list[DeleteTopicsResponse.DeletableTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        responses: list[DeleteTopicsResponse.DeletableTopicResult] = ...,
    ) -> None: ...

class DescribeAclsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int
    def __init__(
        self,
        *,
        resource_type_filter: int = ...,
        resource_name_filter: str | None = ...,
        pattern_type_filter: int = ...,
        principal_filter: str | None = ...,
        host_filter: str | None = ...,
        operation: int = ...,
        permission_type: int = ...,
    ) -> None: ...

class DescribeAclsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeAclsResource(Struct):
        resource_type: int
        resource_name: str
        pattern_type: int
        acls: list[DescribeAclsResponse.AclDescription]
        def __init__(
            self,
            *,
            resource_type: int = ...,
            resource_name: str = ...,
            pattern_type: int = ...,
            acls: list[DescribeAclsResponse.AclDescription] = ...,
        ) -> None: ...
    class AclDescription(Struct):
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(
            self,
            *,
            principal: str = ...,
            host: str = ...,
            operation: int = ...,
            permission_type: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: list[DescribeAclsResponse.DescribeAclsResource]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        resources: list[DescribeAclsResponse.DescribeAclsResource] = ...,
    ) -> None: ...

class DescribeClusterRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    include_cluster_authorized_operations: bool
    endpoint_type: int
    include_fenced_brokers: bool
    def __init__(
        self,
        *,
        include_cluster_authorized_operations: bool = ...,
        endpoint_type: int = ...,
        include_fenced_brokers: bool = ...,
    ) -> None: ...

class DescribeClusterResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeClusterBroker(Struct):
        broker_id: int
        host: str
        port: int
        rack: str | None
        is_fenced: bool
        def __init__(
            self,
            *,
            broker_id: int = ...,
            host: str = ...,
            port: int = ...,
            rack: str | None = ...,
            is_fenced: bool = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: list[DescribeClusterResponse.DescribeClusterBroker]
    cluster_authorized_operations: int
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        endpoint_type: int = ...,
        cluster_id: str = ...,
        controller_id: int = ...,
        brokers: list[DescribeClusterResponse.DescribeClusterBroker] = ...,
        cluster_authorized_operations: int = ...,
    ) -> None: ...

class DescribeConfigsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeConfigsResource(Struct):
        resource_type: int
        resource_name: str
        configuration_keys: list[str] | None
        def __init__(
            self,
            *,
            resource_type: int = ...,
            resource_name: str = ...,
            configuration_keys: list[str] | None = ...,
        ) -> None: ...
    resources: list[DescribeConfigsRequest.DescribeConfigsResource]
    include_synonyms: bool
    include_documentation: bool
    def __init__(
        self,
        *,
        resources: list[DescribeConfigsRequest.DescribeConfigsResource] = ...,
        include_synonyms: bool = ...,
        include_documentation: bool = ...,
    ) -> None: ...

class DescribeConfigsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeConfigsResult(Struct):
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult]
        def __init__(
            self,
            *,
            error_code: int = ...,
            error_message: str | None = ...,
            resource_type: int = ...,
            resource_name: str = ...,
            configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult] = ...,
        ) -> None: ...
    class DescribeConfigsResourceResult(Struct):
        name: str
        value: str | None
        read_only: bool
        config_source: int
        is_default: bool
        is_sensitive: bool
        synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym]
        config_type: int
        documentation: str | None
        def __init__(
            self,
            *,
            name: str = ...,
            value: str | None = ...,
            read_only: bool = ...,
            config_source: int = ...,
            is_default: bool = ...,
            is_sensitive: bool = ...,
            synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym] = ...,
            config_type: int = ...,
            documentation: str | None = ...,
        ) -> None: ...
    class DescribeConfigsSynonym(Struct):
        name: str
        value: str | None
        source: int
        def __init__(self, *, name: str = ..., value: str | None = ..., source: int = ...) -> None: ...
    throttle_time_ms: int
    results: list[DescribeConfigsResponse.DescribeConfigsResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        results: list[DescribeConfigsResponse.DescribeConfigsResult] = ...,
    ) -> None: ...

class DescribeGroupsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    groups: list[str]
    include_authorized_operations: bool
    def __init__(self, *, groups: list[str] = ..., include_authorized_operations: bool = ...) -> None: ...

class DescribeGroupsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribedGroup(Struct):
        error_code: int
        error_message: str | None
        group_id: str
        group_state: str
        protocol_type: str
        protocol_data: str
        members: list[DescribeGroupsResponse.DescribedGroupMember]
        authorized_operations: int
        def __init__(
            self,
            *,
            error_code: int = ...,
            error_message: str | None = ...,
            group_id: str = ...,
            group_state: str = ...,
            protocol_type: str = ...,
            protocol_data: str = ...,
            members: list[DescribeGroupsResponse.DescribedGroupMember] = ...,
            authorized_operations: int = ...,
        ) -> None: ...
    class DescribedGroupMember(Struct):
        member_id: str
        group_instance_id: str | None
        client_id: str
        client_host: str
        member_metadata: bytes
        member_assignment: bytes
        def __init__(
            self,
            *,
            member_id: str = ...,
            group_instance_id: str | None = ...,
            client_id: str = ...,
            client_host: str = ...,
            member_metadata: bytes = ...,
            member_assignment: bytes = ...,
        ) -> None: ...
    throttle_time_ms: int
    groups: list[DescribeGroupsResponse.DescribedGroup]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        groups: list[DescribeGroupsResponse.DescribedGroup] = ...,
    ) -> None: ...

class DescribeLogDirsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribableLogDirTopic(Struct):
        topic: str
        partitions: list[int]
        def __init__(self, *, topic: str = ..., partitions: list[int] = ...) -> None: ...
    topics: list[DescribeLogDirsRequest.DescribableLogDirTopic] | None
    def __init__(self, *, topics: list[DescribeLogDirsRequest.DescribableLogDirTopic] | None = ...) -> None: ...

class DescribeLogDirsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeLogDirsResult(Struct):
        error_code: int
        log_dir: str
        topics: list[DescribeLogDirsResponse.DescribeLogDirsTopic]
        total_bytes: int
        usable_bytes: int
        is_cordoned: bool
        def __init__(
            self,
            *,
            error_code: int = ...,
            log_dir: str = ...,
            topics: list[DescribeLogDirsResponse.DescribeLogDirsTopic] = ...,
            total_bytes: int = ...,
            usable_bytes: int = ...,
            is_cordoned: bool = ...,
        ) -> None: ...
    class DescribeLogDirsTopic(Struct):
        name: str
        partitions: list[DescribeLogDirsResponse.DescribeLogDirsPartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[DescribeLogDirsResponse.DescribeLogDirsPartition] = ...,
        ) -> None: ...
    class DescribeLogDirsPartition(Struct):
        partition_index: int
        partition_size: int
        offset_lag: int
        is_future_key: bool
        def __init__(
            self,
            *,
            partition_index: int = ...,
            partition_size: int = ...,
            offset_lag: int = ...,
            is_future_key: bool = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    results: list[DescribeLogDirsResponse.DescribeLogDirsResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        results: list[DescribeLogDirsResponse.DescribeLogDirsResult] = ...,
    ) -> None: ...

class DescribeProducersRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicRequest(Struct):
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    topics: list[DescribeProducersRequest.TopicRequest]
    def __init__(self, *, topics: list[DescribeProducersRequest.TopicRequest] = ...) -> None: ...

class DescribeProducersResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicResponse(Struct):
        name: str
        partitions: list[DescribeProducersResponse.PartitionResponse]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[DescribeProducersResponse.PartitionResponse] = ...,
        ) -> None: ...
    class PartitionResponse(Struct):
        partition_index: int
        error_code: int
        error_message: str | None
        active_producers: list[DescribeProducersResponse.ProducerState]
        def __init__(
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
            active_producers: list[DescribeProducersResponse.ProducerState] = ...,
        ) -> None: ...
    class ProducerState(Struct):
        producer_id: int
        producer_epoch: int
        last_sequence: int
        last_timestamp: int
        coordinator_epoch: int
        current_txn_start_offset: int
        def __init__(
            self,
            *,
            producer_id: int = ...,
            producer_epoch: int = ...,
            last_sequence: int = ...,
            last_timestamp: int = ...,
            coordinator_epoch: int = ...,
            current_txn_start_offset: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    topics: list[DescribeProducersResponse.TopicResponse]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[DescribeProducersResponse.TopicResponse] = ...,
    ) -> None: ...

class DescribeQuorumRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicData(Struct):
        topic_name: str
        partitions: list[DescribeQuorumRequest.PartitionData]
        def __init__(
            self,
            *,
            topic_name: str = ...,
            partitions: list[DescribeQuorumRequest.PartitionData] = ...,
        ) -> None: ...
    class PartitionData(Struct):
        partition_index: int
        def __init__(self, *, partition_index: int = ...) -> None: ...
    topics: list[DescribeQuorumRequest.TopicData]
    def __init__(self, *, topics: list[DescribeQuorumRequest.TopicData] = ...) -> None: ...

class DescribeQuorumResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicData(Struct):
        topic_name: str
        partitions: list[DescribeQuorumResponse.PartitionData]
        def __init__(
            self,
            *,
            topic_name: str = ...,
            partitions: list[DescribeQuorumResponse.PartitionData] = ...,
        ) -> None: ...
    class PartitionData(Struct):
        partition_index: int
        error_code: int
        error_message: str | None
        leader_id: int
        leader_epoch: int
        high_watermark: int
        current_voters: list[DescribeQuorumResponse.ReplicaState]
        observers: list[DescribeQuorumResponse.ReplicaState]
        def __init__(
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            high_watermark: int = ...,
            current_voters: list[DescribeQuorumResponse.ReplicaState] = ...,
            observers: list[DescribeQuorumResponse.ReplicaState] = ...,
        ) -> None: ...
    class ReplicaState(Struct):
        replica_id: int
        replica_directory_id: uuid.UUID
        log_end_offset: int
        last_fetch_timestamp: int
        last_caught_up_timestamp: int
        def __init__(
            self,
            *,
            replica_id: int = ...,
            replica_directory_id: uuid.UUID = ...,
            log_end_offset: int = ...,
            last_fetch_timestamp: int = ...,
            last_caught_up_timestamp: int = ...,
        ) -> None: ...
    class Node(Struct):
        node_id: int
        listeners: list[DescribeQuorumResponse.Listener]
        def __init__(self, *, node_id: int = ..., listeners: list[DescribeQuorumResponse.Listener] = ...) -> None: ...
    class Listener(Struct):
        name: str
        host: str
        port: int
        def __init__(self, *, name: str = ..., host: str = ..., port: int = ...) -> None: ...
    error_code: int
    error_message: str | None
    topics: list[DescribeQuorumResponse.TopicData]
    nodes: list[DescribeQuorumResponse.Node]
    def __init__(
        self,
        *,
        error_code: int = ...,
        error_message: str | None = ...,
        topics: list[DescribeQuorumResponse.TopicData] = ...,
        nodes: list[DescribeQuorumResponse.Node] = ...,
    ) -> None: ...

class DescribeTopicPartitionsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicRequest(Struct):
        name: str
        def __init__(self, *, name: str = ...) -> None: ...
    class Cursor(Struct):
        topic_name: str
        partition_index: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ...) -> None: ...
    topics: list[DescribeTopicPartitionsRequest.TopicRequest]
    response_partition_limit: int
    cursor: DescribeTopicPartitionsRequest.Cursor | None
    def __init__(
        self,
        *,
        topics: list[DescribeTopicPartitionsRequest.TopicRequest] = ...,
        response_partition_limit: int = ...,
        cursor: DescribeTopicPartitionsRequest.Cursor | None = ...,
    ) -> None: ...

class DescribeTopicPartitionsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeTopicPartitionsResponseTopic(Struct):
        error_code: int
        name: str | None
        topic_id: uuid.UUID
        is_internal: bool
        partitions: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition]
        topic_authorized_operations: int
        def __init__(
            self,
            *,
            error_code: int = ...,
            name: str | None = ...,
            topic_id: uuid.UUID = ...,
            is_internal: bool = ...,
            partitions: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition] = ...,
            topic_authorized_operations: int = ...,
        ) -> None: ...
    class DescribeTopicPartitionsResponsePartition(Struct):
        error_code: int
        partition_index: int
        leader_id: int
        leader_epoch: int
        replica_nodes: list[int]
        isr_nodes: list[int]
        eligible_leader_replicas: list[int] | None
        last_known_elr: list[int] | None
        offline_replicas: list[int]
        def __init__(
            self,
            *,
            error_code: int = ...,
            partition_index: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            replica_nodes: list[int] = ...,
            isr_nodes: list[int] = ...,
            eligible_leader_replicas: list[int] | None = ...,
            last_known_elr: list[int] | None = ...,
            offline_replicas: list[int] = ...,
        ) -> None: ...
    class Cursor(Struct):
        topic_name: str
        partition_index: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ...) -> None: ...
    throttle_time_ms: int
    topics: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic]
    next_cursor: DescribeTopicPartitionsResponse.Cursor | None
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic] = ...,
        next_cursor: DescribeTopicPartitionsResponse.Cursor | None = ...,
    ) -> None: ...

class DescribeTransactionsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    transactional_ids: list[str]
    def __init__(self, *, transactional_ids: list[str] = ...) -> None: ...

class DescribeTransactionsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TransactionState(Struct):
        error_code: int
        transactional_id: str
        transaction_state: str
        transaction_timeout_ms: int
        transaction_start_time_ms: int
        producer_id: int
        producer_epoch: int
        topics: list[DescribeTransactionsResponse.TopicData]
        def __init__(
            self,
            *,
            error_code: int = ...,
            transactional_id: str = ...,
            transaction_state: str = ...,
            transaction_timeout_ms: int = ...,
            transaction_start_time_ms: int = ...,
            producer_id: int = ...,
            producer_epoch: int = ...,
            topics: list[DescribeTransactionsResponse.TopicData] = ...,
        ) -> None: ...
    class TopicData(Struct):
        topic: str
        partitions: list[int]
        def __init__(self, *, topic: str = ..., partitions: list[int] = ...) -> None: ...
    throttle_time_ms: int
    transaction_states: list[DescribeTransactionsResponse.TransactionState]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        transaction_states: list[DescribeTransactionsResponse.TransactionState] = ...,
    ) -> None: ...

class DescribeUserScramCredentialsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class UserName(Struct):
        name: str
        def __init__(self, *, name: str = ...) -> None: ...
    users: list[DescribeUserScramCredentialsRequest.UserName] | None
    def __init__(self, *, users: list[DescribeUserScramCredentialsRequest.UserName] | None = ...) -> None: ...

class DescribeUserScramCredentialsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class DescribeUserScramCredentialsResult(Struct):
        user: str
        error_code: int
        error_message: str | None
        credential_infos: list[DescribeUserScramCredentialsResponse.CredentialInfo]
        def __init__(
            self,
            *,
            user: str = ...,
            error_code: int = ...,
            error_message: str | None = ...,
            credential_infos: list[DescribeUserScramCredentialsResponse.CredentialInfo] = ...,
        ) -> None: ...
    class CredentialInfo(Struct):
        mechanism: int
        iterations: int
        def __init__(self, *, mechanism: int = ..., iterations: int = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: list[DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        results: list[DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult] = ...,
    ) -> None: ...

class ElectLeadersRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicPartitions(Struct):
        topic: str
        partitions: list[int]
        def __init__(self, *, topic: str = ..., partitions: list[int] = ...) -> None: ...
    election_type: int
    topic_partitions: list[ElectLeadersRequest.TopicPartitions] | None
    timeout_ms: int
    def __init__(
        self,
        *,
        election_type: int = ...,
        topic_partitions: list[ElectLeadersRequest.TopicPartitions] | None = ...,
        timeout_ms: int = ...,
    ) -> None: ...

class ElectLeadersResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ReplicaElectionResult(Struct):
        topic: str
        partition_result: list[ElectLeadersResponse.PartitionResult]
        def __init__(
            self,
            *,
            topic: str = ...,
            partition_result: list[ElectLeadersResponse.PartitionResult] = ...,
        ) -> None: ...
    class PartitionResult(Struct):
        partition_id: int
        error_code: int
        error_message: str | None
        def __init__(
            self,
            *,
            partition_id: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    replica_election_results: list[ElectLeadersResponse.ReplicaElectionResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        replica_election_results: list[ElectLeadersResponse.ReplicaElectionResult] = ...,
    ) -> None: ...

class EndTxnRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    def __init__(
        self,
        *,
        transactional_id: str = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
        committed: bool = ...,
    ) -> None: ...

class EndTxnResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
    ) -> None: ...

class FetchRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ReplicaState(Struct):
        replica_id: int
        replica_epoch: int
        def __init__(self, *, replica_id: int = ..., replica_epoch: int = ...) -> None: ...
    class FetchTopic(Struct):
        topic: str
        topic_id: uuid.UUID
        partitions: list[FetchRequest.FetchPartition]
        def __init__(
            self,
            *,
            topic: str = ...,
            topic_id: uuid.UUID = ...,
            partitions: list[FetchRequest.FetchPartition] = ...,
        ) -> None: ...
    class FetchPartition(Struct):
        partition: int
        current_leader_epoch: int
        fetch_offset: int
        last_fetched_epoch: int
        log_start_offset: int
        partition_max_bytes: int
        replica_directory_id: uuid.UUID
        high_watermark: int
        def __init__(
            self,
            *,
            partition: int = ...,
            current_leader_epoch: int = ...,
            fetch_offset: int = ...,
            last_fetched_epoch: int = ...,
            log_start_offset: int = ...,
            partition_max_bytes: int = ...,
            replica_directory_id: uuid.UUID = ...,
            high_watermark: int = ...,
        ) -> None: ...
    class ForgottenTopic(Struct):
        topic: str
        topic_id: uuid.UUID
        partitions: list[int]
        def __init__(self, *, topic: str = ..., topic_id: uuid.UUID = ..., partitions: list[int] = ...) -> None: ...
    cluster_id: str | None
    replica_id: int
    replica_state: FetchRequest.ReplicaState
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchRequest.FetchTopic]
    forgotten_topics_data: list[FetchRequest.ForgottenTopic]
    rack_id: str
    def __init__(
        self,
        *,
        cluster_id: str | None = ...,
        replica_id: int = ...,
        replica_state: FetchRequest.ReplicaState = ...,
        max_wait_ms: int = ...,
        min_bytes: int = ...,
        max_bytes: int = ...,
        isolation_level: int = ...,
        session_id: int = ...,
        session_epoch: int = ...,
        topics: list[FetchRequest.FetchTopic] = ...,
        forgotten_topics_data: list[FetchRequest.ForgottenTopic] = ...,
        rack_id: str = ...,
    ) -> None: ...

class FetchResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class FetchableTopicResponse(Struct):
        topic: str
        topic_id: uuid.UUID
        partitions: list[FetchResponse.PartitionData]
        def __init__(
            self,
            *,
            topic: str = ...,
            topic_id: uuid.UUID = ...,
            partitions: list[FetchResponse.PartitionData] = ...,
        ) -> None: ...
    class PartitionData(Struct):
        partition_index: int
        error_code: int
        high_watermark: int
        last_stable_offset: int
        log_start_offset: int
        diverging_epoch: FetchResponse.EpochEndOffset
        current_leader: FetchResponse.LeaderIdAndEpoch
        snapshot_id: FetchResponse.SnapshotId
        aborted_transactions: list[FetchResponse.AbortedTransaction] | None
        preferred_read_replica: int
        records: bytes | bytearray | memoryview | None
        def __init__(
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            high_watermark: int = ...,
            last_stable_offset: int = ...,
            log_start_offset: int = ...,
            diverging_epoch: FetchResponse.EpochEndOffset = ...,
            current_leader: FetchResponse.LeaderIdAndEpoch = ...,
            snapshot_id: FetchResponse.SnapshotId = ...,
            aborted_transactions: list[FetchResponse.AbortedTransaction] | None = ...,
            preferred_read_replica: int = ...,
            records: bytes | bytearray | memoryview | None = ...,
        ) -> None: ...
    class EpochEndOffset(Struct):
        epoch: int
        end_offset: int
        def __init__(self, *, epoch: int = ..., end_offset: int = ...) -> None: ...
    class LeaderIdAndEpoch(Struct):
        leader_id: int
        leader_epoch: int
        def __init__(self, *, leader_id: int = ..., leader_epoch: int = ...) -> None: ...
    class SnapshotId(Struct):
        end_offset: int
        epoch: int
        def __init__(self, *, end_offset: int = ..., epoch: int = ...) -> None: ...
    class AbortedTransaction(Struct):
        producer_id: int
        first_offset: int
        def __init__(self, *, producer_id: int = ..., first_offset: int = ...) -> None: ...
    class NodeEndpoint(Struct):
        node_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchResponse.FetchableTopicResponse]
    node_endpoints: list[FetchResponse.NodeEndpoint]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        session_id: int = ...,
        responses: list[FetchResponse.FetchableTopicResponse] = ...,
        node_endpoints: list[FetchResponse.NodeEndpoint] = ...,
    ) -> None: ...

class FindCoordinatorRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    key: str
    key_type: int
    coordinator_keys: list[str]
    def __init__(self, *, key: str = ..., key_type: int = ..., coordinator_keys: list[str] = ...) -> None: ...

class FindCoordinatorResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class Coordinator(Struct):
        key: str
        node_id: int
        host: str
        port: int
        error_code: int
        error_message: str | None
        def __init__(
            self,
            *,
            key: str = ...,
            node_id: int = ...,
            host: str = ...,
            port: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int
    coordinators: list[FindCoordinatorResponse.Coordinator]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        node_id: int = ...,
        host: str = ...,
        port: int = ...,
        coordinators: list[FindCoordinatorResponse.Coordinator] = ...,
    ) -> None: ...

class HeartbeatRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    def __init__(
        self,
        *,
        group_id: str = ...,
        generation_id: int = ...,
        member_id: str = ...,
        group_instance_id: str | None = ...,
    ) -> None: ...

class HeartbeatResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    throttle_time_ms: int
    error_code: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ...) -> None: ...

class IncrementalAlterConfigsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterConfigsResource(Struct):
        resource_type: int
        resource_name: str
        configs: list[IncrementalAlterConfigsRequest.AlterableConfig]
        def __init__(
            self,
            *,
            resource_type: int = ...,
            resource_name: str = ...,
            configs: list[IncrementalAlterConfigsRequest.AlterableConfig] = ...,
        ) -> None: ...
    class AlterableConfig(Struct):
        name: str
        config_operation: int
        value: str | None
        def __init__(self, *, name: str = ..., config_operation: int = ..., value: str | None = ...) -> None: ...
    resources: list[IncrementalAlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    def __init__(
        self,
        *,
        resources: list[IncrementalAlterConfigsRequest.AlterConfigsResource] = ...,
        validate_only: bool = ...,
    ) -> None: ...

class IncrementalAlterConfigsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class AlterConfigsResourceResponse(Struct):
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        def __init__(
            self,
            *,
            error_code: int = ...,
            error_message: str | None = ...,
            resource_type: int = ...,
            resource_name: str = ...,
        ) -> None: ...
    throttle_time_ms: int
    responses: list[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        responses: list[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse] = ...,
    ) -> None: ...

class InitProducerIdRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    enable2_pc: bool
    keep_prepared_txn: bool
    def __init__(
        self,
        *,
        transactional_id: str | None = ...,
        transaction_timeout_ms: int = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
        enable2_pc: bool = ...,
        keep_prepared_txn: bool = ...,
    ) -> None: ...

class InitProducerIdResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int
    ongoing_txn_producer_id: int
    ongoing_txn_producer_epoch: int
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
        ongoing_txn_producer_id: int = ...,
        ongoing_txn_producer_epoch: int = ...,
    ) -> None: ...

class JoinGroupRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class JoinGroupRequestProtocol(Struct):
        name: str
        metadata: bytes
        def __init__(self, *, name: str = ..., metadata: bytes = ...) -> None: ...
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[JoinGroupRequest.JoinGroupRequestProtocol]
    reason: str | None
    def __init__(
        self,
        *,
        group_id: str = ...,
        session_timeout_ms: int = ...,
        rebalance_timeout_ms: int = ...,
        member_id: str = ...,
        group_instance_id: str | None = ...,
        protocol_type: str = ...,
        protocols: list[JoinGroupRequest.JoinGroupRequestProtocol] = ...,
        reason: str | None = ...,
    ) -> None: ...

class JoinGroupResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class JoinGroupResponseMember(Struct):
        member_id: str
        group_instance_id: str | None
        metadata: bytes
        def __init__(
            self,
            *,
            member_id: str = ...,
            group_instance_id: str | None = ...,
            metadata: bytes = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    member_id: str
    members: list[JoinGroupResponse.JoinGroupResponseMember]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        generation_id: int = ...,
        protocol_type: str | None = ...,
        protocol_name: str | None = ...,
        leader: str = ...,
        skip_assignment: bool = ...,
        member_id: str = ...,
        members: list[JoinGroupResponse.JoinGroupResponseMember] = ...,
    ) -> None: ...

class LeaveGroupRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class MemberIdentity(Struct):
        member_id: str
        group_instance_id: str | None
        reason: str | None
        def __init__(
            self,
            *,
            member_id: str = ...,
            group_instance_id: str | None = ...,
            reason: str | None = ...,
        ) -> None: ...
    group_id: str
    member_id: str
    members: list[LeaveGroupRequest.MemberIdentity]
    def __init__(
        self,
        *,
        group_id: str = ...,
        member_id: str = ...,
        members: list[LeaveGroupRequest.MemberIdentity] = ...,
    ) -> None: ...

class LeaveGroupResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class MemberResponse(Struct):
        member_id: str
        group_instance_id: str | None
        error_code: int
        def __init__(
            self,
            *,
            member_id: str = ...,
            group_instance_id: str | None = ...,
            error_code: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    members: list[LeaveGroupResponse.MemberResponse]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        members: list[LeaveGroupResponse.MemberResponse] = ...,
    ) -> None: ...

class ListConfigResourcesRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    resource_types: list[int]
    def __init__(self, *, resource_types: list[int] = ...) -> None: ...

class ListConfigResourcesResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ConfigResource(Struct):
        resource_name: str
        resource_type: int
        def __init__(self, *, resource_name: str = ..., resource_type: int = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    config_resources: list[ListConfigResourcesResponse.ConfigResource]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        config_resources: list[ListConfigResourcesResponse.ConfigResource] = ...,
    ) -> None: ...

class ListGroupsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    states_filter: list[str]
    types_filter: list[str]
    def __init__(self, *, states_filter: list[str] = ..., types_filter: list[str] = ...) -> None: ...

class ListGroupsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ListedGroup(Struct):
        group_id: str
        protocol_type: str
        group_state: str
        group_type: str
        def __init__(
            self,
            *,
            group_id: str = ...,
            protocol_type: str = ...,
            group_state: str = ...,
            group_type: str = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    groups: list[ListGroupsResponse.ListedGroup]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        groups: list[ListGroupsResponse.ListedGroup] = ...,
    ) -> None: ...

class ListOffsetsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ListOffsetsTopic(Struct):
        name: str
        partitions: list[ListOffsetsRequest.ListOffsetsPartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[ListOffsetsRequest.ListOffsetsPartition] = ...,
        ) -> None: ...
    class ListOffsetsPartition(Struct):
        partition_index: int
        current_leader_epoch: int
        timestamp: int
        max_num_offsets: int
        def __init__(
            self,
            *,
            partition_index: int = ...,
            current_leader_epoch: int = ...,
            timestamp: int = ...,
            max_num_offsets: int = ...,
        ) -> None: ...
    replica_id: int
    isolation_level: int
    topics: list[ListOffsetsRequest.ListOffsetsTopic]
    timeout_ms: int
    def __init__(
        self,
        *,
        replica_id: int = ...,
        isolation_level: int = ...,
        topics: list[ListOffsetsRequest.ListOffsetsTopic] = ...,
        timeout_ms: int = ...,
    ) -> None: ...

class ListOffsetsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ListOffsetsTopicResponse(Struct):
        name: str
        partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse] = ...,
        ) -> None: ...
    class ListOffsetsPartitionResponse(Struct):
        partition_index: int
        error_code: int
        old_style_offsets: list[int]
        timestamp: int
        offset: int
        leader_epoch: int
        def __init__(
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            old_style_offsets: list[int] = ...,
            timestamp: int = ...,
            offset: int = ...,
            leader_epoch: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[ListOffsetsResponse.ListOffsetsTopicResponse] = ...,
    ) -> None: ...

class ListPartitionReassignmentsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class ListPartitionReassignmentsTopics(Struct):
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    timeout_ms: int
    topics: list[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics] | None
    def __init__(
        self,
        *,
        timeout_ms: int = ...,
        topics: list[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics] | None = ...,
    ) -> None: ...

class ListPartitionReassignmentsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OngoingTopicReassignment(Struct):
        name: str
        partitions: list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment] = ...,
        ) -> None: ...
    class OngoingPartitionReassignment(Struct):
        partition_index: int
        replicas: list[int]
        adding_replicas: list[int]
        removing_replicas: list[int]
        def __init__(
            self,
            *,
            partition_index: int = ...,
            replicas: list[int] = ...,
            adding_replicas: list[int] = ...,
            removing_replicas: list[int] = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[ListPartitionReassignmentsResponse.OngoingTopicReassignment]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        topics: list[ListPartitionReassignmentsResponse.OngoingTopicReassignment] = ...,
    ) -> None: ...

class ListTransactionsRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    state_filters: list[str]
    producer_id_filters: list[int]
    duration_filter: int
    transactional_id_pattern: str | None
    def __init__(
        self,
        *,
        state_filters: list[str] = ...,
        producer_id_filters: list[int] = ...,
        duration_filter: int = ...,
        transactional_id_pattern: str | None = ...,
    ) -> None: ...

class ListTransactionsResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TransactionState(Struct):
        transactional_id: str
        producer_id: int
        transaction_state: str
        def __init__(
            self,
            *,
            transactional_id: str = ...,
            producer_id: int = ...,
            transaction_state: str = ...,
        ) -> None: ...
    throttle_time_ms: int
    error_code: int
    unknown_state_filters: list[str]
    transaction_states: list[ListTransactionsResponse.TransactionState]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        unknown_state_filters: list[str] = ...,
        transaction_states: list[ListTransactionsResponse.TransactionState] = ...,
    ) -> None: ...

class MetadataRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class MetadataRequestTopic(Struct):
        topic_id: uuid.UUID
        name: str | None
        def __init__(self, *, topic_id: uuid.UUID = ..., name: str | None = ...) -> None: ...
    topics: list[MetadataRequest.MetadataRequestTopic] | None
    allow_auto_topic_creation: bool
    include_cluster_authorized_operations: bool
    include_topic_authorized_operations: bool
    def __init__(
        self,
        *,
        topics: list[MetadataRequest.MetadataRequestTopic] | None = ...,
        allow_auto_topic_creation: bool = ...,
        include_cluster_authorized_operations: bool = ...,
        include_topic_authorized_operations: bool = ...,
    ) -> None: ...

class MetadataResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class MetadataResponseBroker(Struct):
        node_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    class MetadataResponseTopic(Struct):
        error_code: int
        name: str | None
        topic_id: uuid.UUID
        is_internal: bool
        partitions: list[MetadataResponse.MetadataResponsePartition]
        topic_authorized_operations: int
        def __init__(
            self,
            *,
            error_code: int = ...,
            name: str | None = ...,
            topic_id: uuid.UUID = ...,
            is_internal: bool = ...,
            partitions: list[MetadataResponse.MetadataResponsePartition] = ...,
            topic_authorized_operations: int = ...,
        ) -> None: ...
    class MetadataResponsePartition(Struct):
        error_code: int
        partition_index: int
        leader_id: int
        leader_epoch: int
        replica_nodes: list[int]
        isr_nodes: list[int]
        offline_replicas: list[int]
        def __init__(
            self,
            *,
            error_code: int = ...,
            partition_index: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            replica_nodes: list[int] = ...,
            isr_nodes: list[int] = ...,
            offline_replicas: list[int] = ...,
        ) -> None: ...
    throttle_time_ms: int
    brokers: list[MetadataResponse.MetadataResponseBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponse.MetadataResponseTopic]
    cluster_authorized_operations: int
    error_code: int
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        brokers: list[MetadataResponse.MetadataResponseBroker] = ...,
        cluster_id: str | None = ...,
        controller_id: int = ...,
        topics: list[MetadataResponse.MetadataResponseTopic] = ...,
        cluster_authorized_operations: int = ...,
        error_code: int = ...,
    ) -> None: ...

class OffsetCommitRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetCommitRequestTopic(Struct):
        name: str
        topic_id: uuid.UUID
        partitions: list[OffsetCommitRequest.OffsetCommitRequestPartition]
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            partitions: list[OffsetCommitRequest.OffsetCommitRequestPartition] = ...,
        ) -> None: ...
    class OffsetCommitRequestPartition(Struct):
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        commit_timestamp: int
        committed_metadata: str | None
        def __init__(
            self,
            *,
            partition_index: int = ...,
            committed_offset: int = ...,
            committed_leader_epoch: int = ...,
            commit_timestamp: int = ...,
            committed_metadata: str | None = ...,
        ) -> None: ...
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int
    topics: list[OffsetCommitRequest.OffsetCommitRequestTopic]
    def __init__(
        self,
        *,
        group_id: str = ...,
        generation_id_or_member_epoch: int = ...,
        member_id: str = ...,
        group_instance_id: str | None = ...,
        retention_time_ms: int = ...,
        topics: list[OffsetCommitRequest.OffsetCommitRequestTopic] = ...,
    ) -> None: ...

class OffsetCommitResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetCommitResponseTopic(Struct):
        name: str
        topic_id: uuid.UUID
        partitions: list[OffsetCommitResponse.OffsetCommitResponsePartition]
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            partitions: list[OffsetCommitResponse.OffsetCommitResponsePartition] = ...,
        ) -> None: ...
    class OffsetCommitResponsePartition(Struct):
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    topics: list[OffsetCommitResponse.OffsetCommitResponseTopic]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[OffsetCommitResponse.OffsetCommitResponseTopic] = ...,
    ) -> None: ...

class OffsetDeleteRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetDeleteRequestTopic(Struct):
        name: str
        partitions: list[OffsetDeleteRequest.OffsetDeleteRequestPartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[OffsetDeleteRequest.OffsetDeleteRequestPartition] = ...,
        ) -> None: ...
    class OffsetDeleteRequestPartition(Struct):
        partition_index: int
        def __init__(self, *, partition_index: int = ...) -> None: ...
    group_id: str
    topics: list[OffsetDeleteRequest.OffsetDeleteRequestTopic]
    def __init__(
        self,
        *,
        group_id: str = ...,
        topics: list[OffsetDeleteRequest.OffsetDeleteRequestTopic] = ...,
    ) -> None: ...

class OffsetDeleteResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetDeleteResponseTopic(Struct):
        name: str
        partitions: list[OffsetDeleteResponse.OffsetDeleteResponsePartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[OffsetDeleteResponse.OffsetDeleteResponsePartition] = ...,
        ) -> None: ...
    class OffsetDeleteResponsePartition(Struct):
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    error_code: int
    throttle_time_ms: int
    topics: list[OffsetDeleteResponse.OffsetDeleteResponseTopic]
    def __init__(
        self,
        *,
        error_code: int = ...,
        throttle_time_ms: int = ...,
        topics: list[OffsetDeleteResponse.OffsetDeleteResponseTopic] = ...,
    ) -> None: ...

class OffsetFetchRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetFetchRequestTopic(Struct):
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    class OffsetFetchRequestGroup(Struct):
        group_id: str
        member_id: str | None
        member_epoch: int
        topics: list[OffsetFetchRequest.OffsetFetchRequestTopics] | None
        def __init__(
            self,
            *,
            group_id: str = ...,
            member_id: str | None = ...,
            member_epoch: int = ...,
            topics: list[OffsetFetchRequest.OffsetFetchRequestTopics] | None = ...,
        ) -> None: ...
    class OffsetFetchRequestTopics(Struct):
        name: str
        topic_id: uuid.UUID
        partition_indexes: list[int]
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            partition_indexes: list[int] = ...,
        ) -> None: ...
    group_id: str
    topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None
    groups: list[OffsetFetchRequest.OffsetFetchRequestGroup]
    require_stable: bool
    def __init__(
        self,
        *,
        group_id: str = ...,
        topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None = ...,
        groups: list[OffsetFetchRequest.OffsetFetchRequestGroup] = ...,
        require_stable: bool = ...,
    ) -> None: ...

class OffsetFetchResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetFetchResponseTopic(Struct):
        name: str
        partitions: list[OffsetFetchResponse.OffsetFetchResponsePartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[OffsetFetchResponse.OffsetFetchResponsePartition] = ...,
        ) -> None: ...
    class OffsetFetchResponsePartition(Struct):
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        metadata: str | None
        error_code: int
        def __init__(
            self,
            *,
            partition_index: int = ...,
            committed_offset: int = ...,
            committed_leader_epoch: int = ...,
            metadata: str | None = ...,
            error_code: int = ...,
        ) -> None: ...
    class OffsetFetchResponseGroup(Struct):
        group_id: str
        topics: list[OffsetFetchResponse.OffsetFetchResponseTopics]
        error_code: int
        def __init__(
            self,
            *,
            group_id: str = ...,
            topics: list[OffsetFetchResponse.OffsetFetchResponseTopics] = ...,
            error_code: int = ...,
        ) -> None: ...
    class OffsetFetchResponseTopics(Struct):
        name: str
        topic_id: uuid.UUID
        partitions: list[OffsetFetchResponse.OffsetFetchResponsePartitions]
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            partitions: list[OffsetFetchResponse.OffsetFetchResponsePartitions] = ...,
        ) -> None: ...
    class OffsetFetchResponsePartitions(Struct):
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        metadata: str | None
        error_code: int
        def __init__(
            self,
            *,
            partition_index: int = ...,
            committed_offset: int = ...,
            committed_leader_epoch: int = ...,
            metadata: str | None = ...,
            error_code: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    topics: list[OffsetFetchResponse.OffsetFetchResponseTopic]
    error_code: int
    groups: list[OffsetFetchResponse.OffsetFetchResponseGroup]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[OffsetFetchResponse.OffsetFetchResponseTopic] = ...,
        error_code: int = ...,
        groups: list[OffsetFetchResponse.OffsetFetchResponseGroup] = ...,
    ) -> None: ...

class OffsetForLeaderEpochRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetForLeaderTopic(Struct):
        topic: str
        partitions: list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]
        def __init__(
            self,
            *,
            topic: str = ...,
            partitions: list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition] = ...,
        ) -> None: ...
    class OffsetForLeaderPartition(Struct):
        partition: int
        current_leader_epoch: int
        leader_epoch: int
        def __init__(
            self,
            *,
            partition: int = ...,
            current_leader_epoch: int = ...,
            leader_epoch: int = ...,
        ) -> None: ...
    replica_id: int
    topics: list[OffsetForLeaderEpochRequest.OffsetForLeaderTopic]
    def __init__(
        self,
        *,
        replica_id: int = ...,
        topics: list[OffsetForLeaderEpochRequest.OffsetForLeaderTopic] = ...,
    ) -> None: ...

class OffsetForLeaderEpochResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class OffsetForLeaderTopicResult(Struct):
        topic: str
        partitions: list[OffsetForLeaderEpochResponse.EpochEndOffset]
        def __init__(
            self,
            *,
            topic: str = ...,
            partitions: list[OffsetForLeaderEpochResponse.EpochEndOffset] = ...,
        ) -> None: ...
    class EpochEndOffset(Struct):
        error_code: int
        partition: int
        leader_epoch: int
        end_offset: int
        def __init__(
            self,
            *,
            error_code: int = ...,
            partition: int = ...,
            leader_epoch: int = ...,
            end_offset: int = ...,
        ) -> None: ...
    throttle_time_ms: int
    topics: list[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult] = ...,
    ) -> None: ...

class ProduceRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicProduceData(Struct):
        name: str
        topic_id: uuid.UUID
        partition_data: list[ProduceRequest.PartitionProduceData]
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            partition_data: list[ProduceRequest.PartitionProduceData] = ...,
        ) -> None: ...
    class PartitionProduceData(Struct):
        index: int
        records: bytes | bytearray | memoryview | None
        def __init__(self, *, index: int = ..., records: bytes | bytearray | memoryview | None = ...) -> None: ...
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceRequest.TopicProduceData]
    def __init__(
        self,
        *,
        transactional_id: str | None = ...,
        acks: int = ...,
        timeout_ms: int = ...,
        topic_data: list[ProduceRequest.TopicProduceData] = ...,
    ) -> None: ...

class ProduceResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TopicProduceResponse(Struct):
        name: str
        topic_id: uuid.UUID
        partition_responses: list[ProduceResponse.PartitionProduceResponse]
        def __init__(
            self,
            *,
            name: str = ...,
            topic_id: uuid.UUID = ...,
            partition_responses: list[ProduceResponse.PartitionProduceResponse] = ...,
        ) -> None: ...
    class PartitionProduceResponse(Struct):
        index: int
        error_code: int
        base_offset: int
        log_append_time_ms: int
        log_start_offset: int
        record_errors: list[ProduceResponse.BatchIndexAndErrorMessage]
        error_message: str | None
        current_leader: ProduceResponse.LeaderIdAndEpoch
        def __init__(
            self,
            *,
            index: int = ...,
            error_code: int = ...,
            base_offset: int = ...,
            log_append_time_ms: int = ...,
            log_start_offset: int = ...,
            record_errors: list[ProduceResponse.BatchIndexAndErrorMessage] = ...,
            error_message: str | None = ...,
            current_leader: ProduceResponse.LeaderIdAndEpoch = ...,
        ) -> None: ...
    class BatchIndexAndErrorMessage(Struct):
        batch_index: int
        batch_index_error_message: str | None
        def __init__(self, *, batch_index: int = ..., batch_index_error_message: str | None = ...) -> None: ...
    class LeaderIdAndEpoch(Struct):
        leader_id: int
        leader_epoch: int
        def __init__(self, *, leader_id: int = ..., leader_epoch: int = ...) -> None: ...
    class NodeEndpoint(Struct):
        node_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    responses: list[ProduceResponse.TopicProduceResponse]
    throttle_time_ms: int
    node_endpoints: list[ProduceResponse.NodeEndpoint]
    def __init__(
        self,
        *,
        responses: list[ProduceResponse.TopicProduceResponse] = ...,
        throttle_time_ms: int = ...,
        node_endpoints: list[ProduceResponse.NodeEndpoint] = ...,
    ) -> None: ...

class SaslAuthenticateRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    auth_bytes: bytes
    def __init__(self, *, auth_bytes: bytes = ...) -> None: ...

class SaslAuthenticateResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int
    def __init__(
        self,
        *,
        error_code: int = ...,
        error_message: str | None = ...,
        auth_bytes: bytes = ...,
        session_lifetime_ms: int = ...,
    ) -> None: ...

class SaslHandshakeRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    mechanism: str
    def __init__(self, *, mechanism: str = ...) -> None: ...

class SaslHandshakeResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    error_code: int
    mechanisms: list[str]
    def __init__(self, *, error_code: int = ..., mechanisms: list[str] = ...) -> None: ...

class SyncGroupRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class SyncGroupRequestAssignment(Struct):
        member_id: str
        assignment: bytes
        def __init__(self, *, member_id: str = ..., assignment: bytes = ...) -> None: ...
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: list[SyncGroupRequest.SyncGroupRequestAssignment]
    def __init__(
        self,
        *,
        group_id: str = ...,
        generation_id: int = ...,
        member_id: str = ...,
        group_instance_id: str | None = ...,
        protocol_type: str | None = ...,
        protocol_name: str | None = ...,
        assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = ...,
    ) -> None: ...

class SyncGroupResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    throttle_time_ms: int
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        protocol_type: str | None = ...,
        protocol_name: str | None = ...,
        assignment: bytes = ...,
    ) -> None: ...

class TxnOffsetCommitRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TxnOffsetCommitRequestTopic(Struct):
        name: str
        partitions: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition] = ...,
        ) -> None: ...
    class TxnOffsetCommitRequestPartition(Struct):
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        committed_metadata: str | None
        def __init__(
            self,
            *,
            partition_index: int = ...,
            committed_offset: int = ...,
            committed_leader_epoch: int = ...,
            committed_metadata: str | None = ...,
        ) -> None: ...
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic]
    def __init__(
        self,
        *,
        transactional_id: str = ...,
        group_id: str = ...,
        producer_id: int = ...,
        producer_epoch: int = ...,
        generation_id: int = ...,
        member_id: str = ...,
        group_instance_id: str | None = ...,
        topics: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic] = ...,
    ) -> None: ...

class TxnOffsetCommitResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class TxnOffsetCommitResponseTopic(Struct):
        name: str
        partitions: list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition] = ...,
        ) -> None: ...
    class TxnOffsetCommitResponsePartition(Struct):
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    topics: list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        topics: list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic] = ...,
    ) -> None: ...

class UpdateFeaturesRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class FeatureUpdateKey(Struct):
        feature: str
        max_version_level: int
        allow_downgrade: bool
        upgrade_type: int
        def __init__(
            self,
            *,
            feature: str = ...,
            max_version_level: int = ...,
            allow_downgrade: bool = ...,
            upgrade_type: int = ...,
        ) -> None: ...
    timeout_ms: int
    feature_updates: list[UpdateFeaturesRequest.FeatureUpdateKey]
    validate_only: bool
    def __init__(
        self,
        *,
        timeout_ms: int = ...,
        feature_updates: list[UpdateFeaturesRequest.FeatureUpdateKey] = ...,
        validate_only: bool = ...,
    ) -> None: ...

class UpdateFeaturesResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class UpdatableFeatureResult(Struct):
        feature: str
        error_code: int
        error_message: str | None
        def __init__(self, *, feature: str = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: list[UpdateFeaturesResponse.UpdatableFeatureResult]
    def __init__(
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        results: list[UpdateFeaturesResponse.UpdatableFeatureResult] = ...,
    ) -> None: ...

class WriteTxnMarkersRequest(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class WritableTxnMarker(Struct):
        producer_id: int
        producer_epoch: int
        transaction_result: bool
        topics: list[WriteTxnMarkersRequest.WritableTxnMarkerTopic]
        coordinator_epoch: int
        transaction_version: int
        def __init__(
            self,
            *,
            producer_id: int = ...,
            producer_epoch: int = ...,
            transaction_result: bool = ...,
            topics: list[WriteTxnMarkersRequest.WritableTxnMarkerTopic] = ...,
            coordinator_epoch: int = ...,
            transaction_version: int = ...,
        ) -> None: ...
    class WritableTxnMarkerTopic(Struct):
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    markers: list[WriteTxnMarkersRequest.WritableTxnMarker]
    def __init__(self, *, markers: list[WriteTxnMarkersRequest.WritableTxnMarker] = ...) -> None: ...

class WriteTxnMarkersResponse(Struct):
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    class WritableTxnMarkerResult(Struct):
        producer_id: int
        topics: list[WriteTxnMarkersResponse.WritableTxnMarkerTopicResult]
        def __init__(
            self,
            *,
            producer_id: int = ...,
            topics: list[WriteTxnMarkersResponse.WritableTxnMarkerTopicResult] = ...,
        ) -> None: ...
    class WritableTxnMarkerTopicResult(Struct):
        name: str
        partitions: list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]
        def __init__(
            self,
            *,
            name: str = ...,
            partitions: list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult] = ...,
        ) -> None: ...
    class WritableTxnMarkerPartitionResult(Struct):
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    markers: list[WriteTxnMarkersResponse.WritableTxnMarkerResult]
    def __init__(self, *, markers: list[WriteTxnMarkersResponse.WritableTxnMarkerResult] = ...) -> None: ...

__all__ = [
    'APIS',
    'ApiKey',
    'api_schema',
    'body_codec',
    'is_flexible',
    'AddOffsetsToTxnRequest',
    'AddOffsetsToTxnResponse',
    'AddPartitionsToTxnRequest',
    'AddPartitionsToTxnResponse',
    'AlterConfigsRequest',
    'AlterConfigsResponse',
    'AlterPartitionReassignmentsRequest',
    'AlterPartitionReassignmentsResponse',
    'AlterReplicaLogDirsRequest',
    'AlterReplicaLogDirsResponse',
    'AlterUserScramCredentialsRequest',
    'AlterUserScramCredentialsResponse',
    'ApiVersionsRequest',
    'ApiVersionsResponse',
    'CreateAclsRequest',
    'CreateAclsResponse',
    'CreatePartitionsRequest',
    'CreatePartitionsResponse',
    'CreateTopicsRequest',
    'CreateTopicsResponse',
    'DeleteAclsRequest',
    'DeleteAclsResponse',
    'DeleteGroupsRequest',
    'DeleteGroupsResponse',
    'DeleteRecordsRequest',
    'DeleteRecordsResponse',
    'DeleteTopicsRequest',
    'DeleteTopicsResponse',
    'DescribeAclsRequest',
    'DescribeAclsResponse',
    'DescribeClusterRequest',
    'DescribeClusterResponse',
    'DescribeConfigsRequest',
    'DescribeConfigsResponse',
    'DescribeGroupsRequest',
    'DescribeGroupsResponse',
    'DescribeLogDirsRequest',
    'DescribeLogDirsResponse',
    'DescribeProducersRequest',
    'DescribeProducersResponse',
    'DescribeQuorumRequest',
    'DescribeQuorumResponse',
    'DescribeTopicPartitionsRequest',
    'DescribeTopicPartitionsResponse',
    'DescribeTransactionsRequest',
    'DescribeTransactionsResponse',
    'DescribeUserScramCredentialsRequest',
    'DescribeUserScramCredentialsResponse',
    'ElectLeadersRequest',
    'ElectLeadersResponse',
    'EndTxnRequest',
    'EndTxnResponse',
    'FetchRequest',
    'FetchResponse',
    'FindCoordinatorRequest',
    'FindCoordinatorResponse',
    'HeartbeatRequest',
    'HeartbeatResponse',
    'IncrementalAlterConfigsRequest',
    'IncrementalAlterConfigsResponse',
    'InitProducerIdRequest',
    'InitProducerIdResponse',
    'JoinGroupRequest',
    'JoinGroupResponse',
    'LeaveGroupRequest',
    'LeaveGroupResponse',
    'ListConfigResourcesRequest',
    'ListConfigResourcesResponse',
    'ListGroupsRequest',
    'ListGroupsResponse',
    'ListOffsetsRequest',
    'ListOffsetsResponse',
    'ListPartitionReassignmentsRequest',
    'ListPartitionReassignmentsResponse',
    'ListTransactionsRequest',
    'ListTransactionsResponse',
    'MetadataRequest',
    'MetadataResponse',
    'OffsetCommitRequest',
    'OffsetCommitResponse',
    'OffsetDeleteRequest',
    'OffsetDeleteResponse',
    'OffsetFetchRequest',
    'OffsetFetchResponse',
    'OffsetForLeaderEpochRequest',
    'OffsetForLeaderEpochResponse',
    'ProduceRequest',
    'ProduceResponse',
    'SaslAuthenticateRequest',
    'SaslAuthenticateResponse',
    'SaslHandshakeRequest',
    'SaslHandshakeResponse',
    'SyncGroupRequest',
    'SyncGroupResponse',
    'TxnOffsetCommitRequest',
    'TxnOffsetCommitResponse',
    'UpdateFeaturesRequest',
    'UpdateFeaturesResponse',
    'WriteTxnMarkersRequest',
    'WriteTxnMarkersResponse',
]
