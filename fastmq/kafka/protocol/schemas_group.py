"""Schemas of the consumer-group messages: coordinator lookup, membership, committed offsets.

In the notation of schema.py; facts from Apache Kafka's message specifications. JoinGroup/SyncGroup carry
the consumer protocol's subscription and assignment as opaque bytes (ConsumerProtocol, encoded by the
group membership code, not here).
"""

SCHEMAS = """
FindCoordinator 10 versions=0-6 flexible=3+
request
  key: string 0-3
  key_type: int8 1+
  coordinator_keys: []string 4+
response
  throttle_time_ms: int32 1+
  error_code: int16 0-3
  error_message: string 1-3 nullable=1-3
  node_id: int32 0-3
  host: string 0-3
  port: int32 0-3
  coordinators: []Coordinator 4+
    key: string 4+
    node_id: int32 4+
    host: string 4+
    port: int32 4+
    error_code: int16 4+
    error_message: string 4+ nullable=4+

JoinGroup 11 versions=0-9 flexible=6+
request
  group_id: string 0+
  session_timeout_ms: int32 0+
  rebalance_timeout_ms: int32 1+ =-1
  member_id: string 0+
  group_instance_id: string 5+ nullable=5+ =null
  protocol_type: string 0+
  protocols: []JoinGroupRequestProtocol 0+
    name: string 0+
    metadata: bytes 0+
  reason: string 8+ nullable=8+ =null
response
  throttle_time_ms: int32 2+
  error_code: int16 0+
  generation_id: int32 0+ =-1
  protocol_type: string 7+ nullable=7+ =null
  protocol_name: string 0+ nullable=7+
  leader: string 0+
  skip_assignment: bool 9+
  member_id: string 0+
  members: []JoinGroupResponseMember 0+
    member_id: string 0+
    group_instance_id: string 5+ nullable=5+ =null
    metadata: bytes 0+

SyncGroup 14 versions=0-5 flexible=4+
request
  group_id: string 0+
  generation_id: int32 0+
  member_id: string 0+
  group_instance_id: string 3+ nullable=3+ =null
  protocol_type: string 5+ nullable=5+ =null
  protocol_name: string 5+ nullable=5+ =null
  assignments: []SyncGroupRequestAssignment 0+
    member_id: string 0+
    assignment: bytes 0+
response
  throttle_time_ms: int32 1+
  error_code: int16 0+
  protocol_type: string 5+ nullable=5+ =null
  protocol_name: string 5+ nullable=5+ =null
  assignment: bytes 0+

Heartbeat 12 versions=0-4 flexible=4+
request
  group_id: string 0+
  generation_id: int32 0+
  member_id: string 0+
  group_instance_id: string 3+ nullable=3+ =null
response
  throttle_time_ms: int32 1+
  error_code: int16 0+

LeaveGroup 13 versions=0-5 flexible=4+
request
  group_id: string 0+
  member_id: string 0-2
  members: []MemberIdentity 3+
    member_id: string 3+
    group_instance_id: string 3+ nullable=3+ =null
    reason: string 5+ nullable=5+ =null
response
  throttle_time_ms: int32 1+
  error_code: int16 0+
  members: []MemberResponse 3+
    member_id: string 3+
    group_instance_id: string 3+ nullable=3+
    error_code: int16 3+

DescribeGroups 15 versions=0-6 flexible=5+
request
  groups: []string 0+
  include_authorized_operations: bool 3+
response
  throttle_time_ms: int32 1+
  groups: []DescribedGroup 0+
    error_code: int16 0+
    error_message: string 6+ nullable=6+ =null
    group_id: string 0+
    group_state: string 0+
    protocol_type: string 0+
    protocol_data: string 0+
    members: []DescribedGroupMember 0+
      member_id: string 0+
      group_instance_id: string 4+ nullable=4+ =null
      client_id: string 0+
      client_host: string 0+
      member_metadata: bytes 0+
      member_assignment: bytes 0+
    authorized_operations: int32 3+ =-2147483648

ListGroups 16 versions=0-5 flexible=3+
request
  states_filter: []string 4+
  types_filter: []string 5+
response
  throttle_time_ms: int32 1+
  error_code: int16 0+
  groups: []ListedGroup 0+
    group_id: string 0+
    protocol_type: string 0+
    group_state: string 4+
    group_type: string 5+

DeleteGroups 42 versions=0-2 flexible=2+
request
  groups_names: []string 0+
response
  throttle_time_ms: int32 0+
  results: []DeletableGroupResult 0+
    group_id: string 0+
    error_code: int16 0+

OffsetCommit 8 versions=0-10 flexible=8+
request
  group_id: string 0+
  generation_id_or_member_epoch: int32 1+ =-1
  member_id: string 1+
  group_instance_id: string 7+ nullable=7+ =null
  retention_time_ms: int64 2-4 =-1
  topics: []OffsetCommitRequestTopic 0+
    name: string 0-9
    topic_id: uuid 10+
    partitions: []OffsetCommitRequestPartition 0+
      partition_index: int32 0+
      committed_offset: int64 0+
      committed_leader_epoch: int32 6+ =-1
      commit_timestamp: int64 1 =-1
      committed_metadata: string 0+ nullable=0+
response
  throttle_time_ms: int32 3+
  topics: []OffsetCommitResponseTopic 0+
    name: string 0-9
    topic_id: uuid 10+
    partitions: []OffsetCommitResponsePartition 0+
      partition_index: int32 0+
      error_code: int16 0+

OffsetFetch 9 versions=0-10 flexible=6+
request
  group_id: string 0-7
  topics: []OffsetFetchRequestTopic 0-7 nullable=2-7
    name: string 0-7
    partition_indexes: []int32 0-7
  groups: []OffsetFetchRequestGroup 8+
    group_id: string 8+
    member_id: string 9+ nullable=9+ =null
    member_epoch: int32 9+ =-1
    topics: []OffsetFetchRequestTopics 8+ nullable=8+
      name: string 8-9
      topic_id: uuid 10+
      partition_indexes: []int32 8+
  require_stable: bool 7+
response
  throttle_time_ms: int32 3+
  topics: []OffsetFetchResponseTopic 0-7
    name: string 0-7
    partitions: []OffsetFetchResponsePartition 0-7
      partition_index: int32 0-7
      committed_offset: int64 0-7
      committed_leader_epoch: int32 5-7 =-1
      metadata: string 0-7 nullable=0-7
      error_code: int16 0-7
  error_code: int16 2-7
  groups: []OffsetFetchResponseGroup 8+
    group_id: string 8+
    topics: []OffsetFetchResponseTopics 8+
      name: string 8-9
      topic_id: uuid 10+
      partitions: []OffsetFetchResponsePartitions 8+
        partition_index: int32 8+
        committed_offset: int64 8+
        committed_leader_epoch: int32 8+ =-1
        metadata: string 8+ nullable=8+
        error_code: int16 8+
    error_code: int16 8+

OffsetDelete 47 versions=0 flexible=none
request
  group_id: string 0+
  topics: []OffsetDeleteRequestTopic 0+
    name: string 0+
    partitions: []OffsetDeleteRequestPartition 0+
      partition_index: int32 0+
response
  error_code: int16 0+
  throttle_time_ms: int32 0+
  topics: []OffsetDeleteResponseTopic 0+
    name: string 0+
    partitions: []OffsetDeleteResponsePartition 0+
      partition_index: int32 0+
      error_code: int16 0+
"""
