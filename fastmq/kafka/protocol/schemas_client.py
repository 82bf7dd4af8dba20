"""Schemas of the messages of connection setup and of the data path.

ApiVersions (version negotiation), SASL, Metadata, DescribeCluster, Produce, Fetch, ListOffsets and
OffsetForLeaderEpoch, in the notation of schema.py. Facts from Apache Kafka's message specifications.
Notes on the wire that the notation does not show:
- ApiVersions responses always use response header v0 (a client may not know yet which versions the broker
  speaks), and a broker answers an ApiVersions request of a version it does not know with a v0 response
  carrying UNSUPPORTED_VERSION (framing.py handles both).
- Metadata v0: an empty `topics` means all topics; v1+: null means all topics, empty means none.
- `records` hold RecordBatches (or v0/v1 message sets); fastmq.kafka.record reads and builds them.
"""

SCHEMAS = """
ApiVersions 18 versions=0-4 flexible=3+
request
  client_software_name: string 3+
  client_software_version: string 3+
response
  error_code: int16 0+
  api_keys: []ApiVersion 0+
    api_key: int16 0+
    min_version: int16 0+
    max_version: int16 0+
  throttle_time_ms: int32 1+
  supported_features: []SupportedFeatureKey 3+ tag=0
    name: string 3+
    min_version: int16 3+
    max_version: int16 3+
  finalized_features_epoch: int64 3+ tag=1 =-1
  finalized_features: []FinalizedFeatureKey 3+ tag=2
    name: string 3+
    max_version_level: int16 3+
    min_version_level: int16 3+
  zk_migration_ready: bool 3+ tag=3

SaslHandshake 17 versions=0-1 flexible=none
request
  mechanism: string 0+
response
  error_code: int16 0+
  mechanisms: []string 0+

SaslAuthenticate 36 versions=0-2 flexible=2+
request
  auth_bytes: bytes 0+
response
  error_code: int16 0+
  error_message: string 0+ nullable=0+
  auth_bytes: bytes 0+
  session_lifetime_ms: int64 1+

Metadata 3 versions=0-13 flexible=9+
request
  topics: []MetadataRequestTopic 0+ nullable=1+
    topic_id: uuid 10+
    name: string 0+ nullable=10+
  allow_auto_topic_creation: bool 4+ =true
  include_cluster_authorized_operations: bool 8-10
  include_topic_authorized_operations: bool 8+
response
  throttle_time_ms: int32 3+
  brokers: []MetadataResponseBroker 0+
    node_id: int32 0+
    host: string 0+
    port: int32 0+
    rack: string 1+ nullable=1+ =null
  cluster_id: string 2+ nullable=2+ =null
  controller_id: int32 1+ =-1
  topics: []MetadataResponseTopic 0+
    error_code: int16 0+
    name: string 0+ nullable=12+
    topic_id: uuid 10+
    is_internal: bool 1+
    partitions: []MetadataResponsePartition 0+
      error_code: int16 0+
      partition_index: int32 0+
      leader_id: int32 0+
      leader_epoch: int32 7+ =-1
      replica_nodes: []int32 0+
      isr_nodes: []int32 0+
      offline_replicas: []int32 5+
    topic_authorized_operations: int32 8+ =-2147483648
  cluster_authorized_operations: int32 8-10 =-2147483648
  error_code: int16 13+

DescribeCluster 60 versions=0-2 flexible=0+
request
  include_cluster_authorized_operations: bool 0+
  endpoint_type: int8 1+ =1
  include_fenced_brokers: bool 2+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  error_message: string 0+ nullable=0+ =null
  endpoint_type: int8 1+ =1
  cluster_id: string 0+
  controller_id: int32 0+ =-1
  brokers: []DescribeClusterBroker 0+
    broker_id: int32 0+
    host: string 0+
    port: int32 0+
    rack: string 0+ nullable=0+ =null
    is_fenced: bool 2+
  cluster_authorized_operations: int32 0+ =-2147483648

Produce 0 versions=0-13 flexible=9+
request
  transactional_id: string 3+ nullable=3+ =null
  acks: int16 0+
  timeout_ms: int32 0+
  topic_data: []TopicProduceData 0+
    name: string 0-12
    topic_id: uuid 13+
    partition_data: []PartitionProduceData 0+
      index: int32 0+
      records: records 0+ nullable=0+
response
  responses: []TopicProduceResponse 0+
    name: string 0-12
    topic_id: uuid 13+
    partition_responses: []PartitionProduceResponse 0+
      index: int32 0+
      error_code: int16 0+
      base_offset: int64 0+
      log_append_time_ms: int64 2+ =-1
      log_start_offset: int64 5+ =-1
      record_errors: []BatchIndexAndErrorMessage 8+
        batch_index: int32 8+
        batch_index_error_message: string 8+ nullable=8+ =null
      error_message: string 8+ nullable=8+ =null
      current_leader: LeaderIdAndEpoch 10+ tag=0
        leader_id: int32 10+ =-1
        leader_epoch: int32 10+ =-1
  throttle_time_ms: int32 1+
  node_endpoints: []NodeEndpoint 10+ tag=0
    node_id: int32 10+
    host: string 10+
    port: int32 10+
    rack: string 10+ nullable=10+ =null

Fetch 1 versions=0-18 flexible=12+
request
  cluster_id: string 12+ nullable=12+ tag=0 =null
  replica_id: int32 0-14 =-1
  replica_state: ReplicaState 15+ tag=1
    replica_id: int32 15+ =-1
    replica_epoch: int64 15+ =-1
  max_wait_ms: int32 0+
  min_bytes: int32 0+
  max_bytes: int32 3+ =0x7fffffff
  isolation_level: int8 4+
  session_id: int32 7+
  session_epoch: int32 7+ =-1
  topics: []FetchTopic 0+
    topic: string 0-12
    topic_id: uuid 13+
    partitions: []FetchPartition 0+
      partition: int32 0+
      current_leader_epoch: int32 9+ =-1
      fetch_offset: int64 0+
      last_fetched_epoch: int32 12+ =-1
      log_start_offset: int64 5+ =-1
      partition_max_bytes: int32 0+
      replica_directory_id: uuid 17+ tag=0
      high_watermark: int64 18+ tag=1 =9223372036854775807
  forgotten_topics_data: []ForgottenTopic 7+
    topic: string 7-12
    topic_id: uuid 13+
    partitions: []int32 7+
  rack_id: string 11+
response
  throttle_time_ms: int32 1+
  error_code: int16 7+
  session_id: int32 7+
  responses: []FetchableTopicResponse 0+
    topic: string 0-12
    topic_id: uuid 13+
    partitions: []PartitionData 0+
      partition_index: int32 0+
      error_code: int16 0+
      high_watermark: int64 0+
      last_stable_offset: int64 4+ =-1
      log_start_offset: int64 5+ =-1
      diverging_epoch: EpochEndOffset 12+ tag=0
        epoch: int32 12+ =-1
        end_offset: int64 12+ =-1
      current_leader: LeaderIdAndEpoch 12+ tag=1
        leader_id: int32 12+ =-1
        leader_epoch: int32 12+ =-1
      snapshot_id: SnapshotId 12+ tag=2
        end_offset: int64 0+ =-1
        epoch: int32 0+ =-1
      aborted_transactions: []AbortedTransaction 4+ nullable=4+
        producer_id: int64 4+
        first_offset: int64 4+
      preferred_read_replica: int32 11+ =-1
      records: records 0+ nullable=0+
  node_endpoints: []NodeEndpoint 16+ tag=0
    node_id: int32 16+
    host: string 16+
    port: int32 16+
    rack: string 16+ nullable=16+ =null

ListOffsets 2 versions=0-11 flexible=6+
request
  replica_id: int32 0+
  isolation_level: int8 2+
  topics: []ListOffsetsTopic 0+
    name: string 0+
    partitions: []ListOffsetsPartition 0+
      partition_index: int32 0+
      current_leader_epoch: int32 4+ =-1
      timestamp: int64 0+
      max_num_offsets: int32 0 =1
  timeout_ms: int32 10+
response
  throttle_time_ms: int32 2+
  topics: []ListOffsetsTopicResponse 0+
    name: string 0+
    partitions: []ListOffsetsPartitionResponse 0+
      partition_index: int32 0+
      error_code: int16 0+
      old_style_offsets: []int64 0
      timestamp: int64 1+ =-1
      offset: int64 1+ =-1
      leader_epoch: int32 4+ =-1

OffsetForLeaderEpoch 23 versions=0-4 flexible=4+
request
  replica_id: int32 3+ =-2
  topics: []OffsetForLeaderTopic 0+
    topic: string 0+
    partitions: []OffsetForLeaderPartition 0+
      partition: int32 0+
      current_leader_epoch: int32 2+ =-1
      leader_epoch: int32 0+
response
  throttle_time_ms: int32 2+
  topics: []OffsetForLeaderTopicResult 0+
    topic: string 0+
    partitions: []EpochEndOffset 0+
      error_code: int16 0+
      partition: int32 0+
      leader_epoch: int32 1+ =-1
      end_offset: int64 0+ =-1
"""
