"""Schemas of the admin client's messages: topics, partitions, records, configurations.

In the notation of schema.py; facts from Apache Kafka's message specifications. Config resource types:
2 = topic, 4 = broker, 8 = broker logger; IncrementalAlterConfigs operations: 0 set, 1 delete, 2 append,
3 subtract.
"""

SCHEMAS = """
CreateTopics 19 versions=0-7 flexible=5+
request
  topics: []CreatableTopic 0+
    name: string 0+
    num_partitions: int32 0+
    replication_factor: int16 0+
    assignments: []CreatableReplicaAssignment 0+
      partition_index: int32 0+
      broker_ids: []int32 0+
    configs: []CreatableTopicConfig 0+
      name: string 0+
      value: string 0+ nullable=0+
  timeout_ms: int32 0+ =60000
  validate_only: bool 1+
response
  throttle_time_ms: int32 2+
  topics: []CreatableTopicResult 0+
    name: string 0+
    topic_id: uuid 7+
    error_code: int16 0+
    error_message: string 1+ nullable=0+
    topic_config_error_code: int16 5+ tag=0
    num_partitions: int32 5+ =-1
    replication_factor: int16 5+ =-1
    configs: []CreatableTopicConfigs 5+ nullable=5+
      name: string 5+
      value: string 5+ nullable=5+
      read_only: bool 5+
      config_source: int8 5+ =-1
      is_sensitive: bool 5+

DeleteTopics 20 versions=0-6 flexible=4+
request
  topics: []DeleteTopicState 6+
    name: string 6+ nullable=6+ =null
    topic_id: uuid 6+
  topic_names: []string 0-5
  timeout_ms: int32 0+
response
  throttle_time_ms: int32 1+
  responses: []DeletableTopicResult 0+
    name: string 0+ nullable=6+
    topic_id: uuid 6+
    error_code: int16 0+
    error_message: string 5+ nullable=5+ =null

CreatePartitions 37 versions=0-3 flexible=2+
request
  topics: []CreatePartitionsTopic 0+
    name: string 0+
    count: int32 0+
    assignments: []CreatePartitionsAssignment 0+ nullable=0+
      broker_ids: []int32 0+
  timeout_ms: int32 0+
  validate_only: bool 0+
response
  throttle_time_ms: int32 0+
  results: []CreatePartitionsTopicResult 0+
    name: string 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+ =null

DeleteRecords 21 versions=0-2 flexible=2+
request
  topics: []DeleteRecordsTopic 0+
    name: string 0+
    partitions: []DeleteRecordsPartition 0+
      partition_index: int32 0+
      offset: int64 0+
  timeout_ms: int32 0+
response
  throttle_time_ms: int32 0+
  topics: []DeleteRecordsTopicResult 0+
    name: string 0+
    partitions: []DeleteRecordsPartitionResult 0+
      partition_index: int32 0+
      low_watermark: int64 0+
      error_code: int16 0+

DescribeConfigs 32 versions=0-4 flexible=4+
request
  resources: []DescribeConfigsResource 0+
    resource_type: int8 0+
    resource_name: string 0+
    configuration_keys: []string 0+ nullable=0+
  include_synonyms: bool 1+
  include_documentation: bool 3+
response
  throttle_time_ms: int32 0+
  results: []DescribeConfigsResult 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+
    resource_type: int8 0+
    resource_name: string 0+
    configs: []DescribeConfigsResourceResult 0+
      name: string 0+
      value: string 0+ nullable=0+
      read_only: bool 0+
      config_source: int8 1+ =-1
      is_default: bool 0
      is_sensitive: bool 0+
      synonyms: []DescribeConfigsSynonym 1+
        name: string 1+
        value: string 1+ nullable=0+
        source: int8 1+
      config_type: int8 3+
      documentation: string 3+ nullable=0+

AlterConfigs 33 versions=0-2 flexible=2+
request
  resources: []AlterConfigsResource 0+
    resource_type: int8 0+
    resource_name: string 0+
    configs: []AlterableConfig 0+
      name: string 0+
      value: string 0+ nullable=0+
  validate_only: bool 0+
response
  throttle_time_ms: int32 0+
  responses: []AlterConfigsResourceResponse 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+
    resource_type: int8 0+
    resource_name: string 0+

IncrementalAlterConfigs 44 versions=0-1 flexible=1+
request
  resources: []AlterConfigsResource 0+
    resource_type: int8 0+
    resource_name: string 0+
    configs: []AlterableConfig 0+
      name: string 0+
      config_operation: int8 0+
      value: string 0+ nullable=0+
  validate_only: bool 0+
response
  throttle_time_ms: int32 0+
  responses: []AlterConfigsResourceResponse 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+
    resource_type: int8 0+
    resource_name: string 0+

DescribeLogDirs 35 versions=0-5 flexible=2+
request
  topics: []DescribableLogDirTopic 0+ nullable=0+
    topic: string 0+
    partitions: []int32 0+
response
  throttle_time_ms: int32 0+
  error_code: int16 3+
  results: []DescribeLogDirsResult 0+
    error_code: int16 0+
    log_dir: string 0+
    topics: []DescribeLogDirsTopic 0+
      name: string 0+
      partitions: []DescribeLogDirsPartition 0+
        partition_index: int32 0+
        partition_size: int64 0+
        offset_lag: int64 0+
        is_future_key: bool 0+
    total_bytes: int64 4+ =-1
    usable_bytes: int64 4+ =-1
    is_cordoned: bool 5+

ListPartitionReassignments 46 versions=0 flexible=0+
request
  timeout_ms: int32 0+ =60000
  topics: []ListPartitionReassignmentsTopics 0+ nullable=0+ =null
    name: string 0+
    partition_indexes: []int32 0+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  error_message: string 0+ nullable=0+
  topics: []OngoingTopicReassignment 0+
    name: string 0+
    partitions: []OngoingPartitionReassignment 0+
      partition_index: int32 0+
      replicas: []int32 0+
      adding_replicas: []int32 0+
      removing_replicas: []int32 0+

ElectLeaders 43 versions=0-2 flexible=2+
request
  election_type: int8 1+
  topic_partitions: []TopicPartitions 0+ nullable=0+
    topic: string 0+
    partitions: []int32 0+
  timeout_ms: int32 0+ =60000
response
  throttle_time_ms: int32 0+
  error_code: int16 1+
  replica_election_results: []ReplicaElectionResult 0+
    topic: string 0+
    partition_result: []PartitionResult 0+
      partition_id: int32 0+
      error_code: int16 0+
      error_message: string 0+ nullable=0+

ListConfigResources 74 versions=0-1 flexible=0+
request
  resource_types: []int8 1+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  config_resources: []ConfigResource 0+
    resource_name: string 0+
    resource_type: int8 1+ =16

DescribeProducers 61 versions=0-0 flexible=0+
request
  topics: []TopicRequest 0+
    name: string 0+
    partition_indexes: []int32 0+
response
  throttle_time_ms: int32 0+
  topics: []TopicResponse 0+
    name: string 0+
    partitions: []PartitionResponse 0+
      partition_index: int32 0+
      error_code: int16 0+
      error_message: string 0+ nullable=0+ =null
      active_producers: []ProducerState 0+
        producer_id: int64 0+
        producer_epoch: int32 0+
        last_sequence: int32 0+ =-1
        last_timestamp: int64 0+ =-1
        coordinator_epoch: int32 0+
        current_txn_start_offset: int64 0+ =-1

DescribeTransactions 65 versions=0-0 flexible=0+
request
  transactional_ids: []string 0+
response
  throttle_time_ms: int32 0+
  transaction_states: []TransactionState 0+
    error_code: int16 0+
    transactional_id: string 0+
    transaction_state: string 0+
    transaction_timeout_ms: int32 0+
    transaction_start_time_ms: int64 0+
    producer_id: int64 0+
    producer_epoch: int16 0+
    topics: []TopicData 0+
      topic: string 0+
      partitions: []int32 0+

ListTransactions 66 versions=0-2 flexible=0+
request
  state_filters: []string 0+
  producer_id_filters: []int64 0+
  duration_filter: int64 1+ =-1
  transactional_id_pattern: string 2+ nullable=2+ =null
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  unknown_state_filters: []string 0+
  transaction_states: []TransactionState 0+
    transactional_id: string 0+
    producer_id: int64 0+
    transaction_state: string 0+

DescribeQuorum 55 versions=0-2 flexible=0+
request
  topics: []TopicData 0+
    topic_name: string 0+
    partitions: []PartitionData 0+
      partition_index: int32 0+
response
  error_code: int16 0+
  error_message: string 2+ nullable=2+
  topics: []TopicData 0+
    topic_name: string 0+
    partitions: []PartitionData 0+
      partition_index: int32 0+
      error_code: int16 0+
      error_message: string 2+ nullable=2+
      leader_id: int32 0+
      leader_epoch: int32 0+
      high_watermark: int64 0+
      current_voters: []ReplicaState 0+
      observers: []ReplicaState 0+
  nodes: []Node 2+
    node_id: int32 2+
    listeners: []Listener 2+
      name: string 2+
      host: string 2+
      port: uint16 2+
  struct ReplicaState
    replica_id: int32 0+
    replica_directory_id: uuid 2+
    log_end_offset: int64 0+
    last_fetch_timestamp: int64 1+ =-1
    last_caught_up_timestamp: int64 1+ =-1

AlterReplicaLogDirs 34 versions=0-2 flexible=2+
request
  dirs: []AlterReplicaLogDir 0+
    path: string 0+
    topics: []AlterReplicaLogDirTopic 0+
      name: string 0+
      partitions: []int32 0+
response
  throttle_time_ms: int32 0+
  results: []AlterReplicaLogDirTopicResult 0+
    topic_name: string 0+
    partitions: []AlterReplicaLogDirPartitionResult 0+
      partition_index: int32 0+
      error_code: int16 0+

AlterPartitionReassignments 45 versions=0-1 flexible=0+
request
  timeout_ms: int32 0+ =60000
  allow_replication_factor_change: bool 1+ =true
  topics: []ReassignableTopic 0+
    name: string 0+
    partitions: []ReassignablePartition 0+
      partition_index: int32 0+
      replicas: []int32 0+ nullable=0+ =null
response
  throttle_time_ms: int32 0+
  allow_replication_factor_change: bool 1+ =true
  error_code: int16 0+
  error_message: string 0+ nullable=0+
  responses: []ReassignableTopicResponse 0+
    name: string 0+
    partitions: []ReassignablePartitionResponse 0+
      partition_index: int32 0+
      error_code: int16 0+
      error_message: string 0+ nullable=0+

UpdateFeatures 57 versions=0-2 flexible=0+
request
  timeout_ms: int32 0+ =60000
  feature_updates: []FeatureUpdateKey 0+
    feature: string 0+
    max_version_level: int16 0+
    allow_downgrade: bool 0
    upgrade_type: int8 1+ =1
  validate_only: bool 1+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  error_message: string 0+ nullable=0+
  results: []UpdatableFeatureResult 0-1
    feature: string 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+

DescribeTopicPartitions 75 versions=0 flexible=0+
request
  topics: []TopicRequest 0+
    name: string 0+
  response_partition_limit: int32 0+ =2000
  cursor: Cursor 0+ nullable=0+ =null
    topic_name: string 0+
    partition_index: int32 0+
response
  throttle_time_ms: int32 0+
  topics: []DescribeTopicPartitionsResponseTopic 0+
    error_code: int16 0+
    name: string 0+ nullable=0+
    topic_id: uuid 0+
    is_internal: bool 0+
    partitions: []DescribeTopicPartitionsResponsePartition 0+
      error_code: int16 0+
      partition_index: int32 0+
      leader_id: int32 0+
      leader_epoch: int32 0+ =-1
      replica_nodes: []int32 0+
      isr_nodes: []int32 0+
      eligible_leader_replicas: []int32 0+ nullable=0+ =null
      last_known_elr: []int32 0+ nullable=0+ =null
      offline_replicas: []int32 0+
    topic_authorized_operations: int32 0+ =-2147483648
  next_cursor: Cursor 0+ nullable=0+ =null
    topic_name: string 0+
    partition_index: int32 0+
"""
