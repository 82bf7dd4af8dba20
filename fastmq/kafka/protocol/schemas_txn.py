"""Schemas of the messages of idempotent and transactional producers.

In the notation of schema.py; facts from Apache Kafka's message specifications. AddPartitionsToTxn v4+
batches several transactions (broker to broker); clients use the v3_and_below_* fields up to v3.
"""

SCHEMAS = """
InitProducerId 22 versions=0-6 flexible=2+
request
  transactional_id: string 0+ nullable=0+
  transaction_timeout_ms: int32 0+
  producer_id: int64 3+ =-1
  producer_epoch: int16 3+ =-1
  enable2_pc: bool 6+
  keep_prepared_txn: bool 6+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  producer_id: int64 0+ =-1
  producer_epoch: int16 0+
  ongoing_txn_producer_id: int64 6+ =-1
  ongoing_txn_producer_epoch: int16 6+ =-1

AddPartitionsToTxn 24 versions=0-5 flexible=3+
request
  struct AddPartitionsToTxnTopic
    name: string 0+
    partitions: []int32 0+
  transactions: []AddPartitionsToTxnTransaction 4+
    transactional_id: string 4+
    producer_id: int64 4+
    producer_epoch: int16 4+
    verify_only: bool 4+
    topics: []AddPartitionsToTxnTopic 4+
  v3_and_below_transactional_id: string 0-3
  v3_and_below_producer_id: int64 0-3
  v3_and_below_producer_epoch: int16 0-3
  v3_and_below_topics: []AddPartitionsToTxnTopic 0-3
response
  struct AddPartitionsToTxnTopicResult
    name: string 0+
    results_by_partition: []AddPartitionsToTxnPartitionResult 0+
  struct AddPartitionsToTxnPartitionResult
    partition_index: int32 0+
    partition_error_code: int16 0+
  throttle_time_ms: int32 0+
  error_code: int16 4+
  results_by_transaction: []AddPartitionsToTxnResult 4+
    transactional_id: string 4+
    topic_results: []AddPartitionsToTxnTopicResult 4+
  results_by_topic_v3_and_below: []AddPartitionsToTxnTopicResult 0-3

AddOffsetsToTxn 25 versions=0-4 flexible=3+
request
  transactional_id: string 0+
  producer_id: int64 0+
  producer_epoch: int16 0+
  group_id: string 0+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+

EndTxn 26 versions=0-5 flexible=3+
request
  transactional_id: string 0+
  producer_id: int64 0+
  producer_epoch: int16 0+
  committed: bool 0+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  producer_id: int64 5+ =-1
  producer_epoch: int16 5+ =-1

TxnOffsetCommit 28 versions=0-5 flexible=3+
request
  transactional_id: string 0+
  group_id: string 0+
  producer_id: int64 0+
  producer_epoch: int16 0+
  generation_id: int32 3+ =-1
  member_id: string 3+
  group_instance_id: string 3+ nullable=3+ =null
  topics: []TxnOffsetCommitRequestTopic 0+
    name: string 0+
    partitions: []TxnOffsetCommitRequestPartition 0+
      partition_index: int32 0+
      committed_offset: int64 0+
      committed_leader_epoch: int32 2+ =-1
      committed_metadata: string 0+ nullable=0+
response
  throttle_time_ms: int32 0+
  topics: []TxnOffsetCommitResponseTopic 0+
    name: string 0+
    partitions: []TxnOffsetCommitResponsePartition 0+
      partition_index: int32 0+
      error_code: int16 0+

WriteTxnMarkers 27 versions=0-2 flexible=1+
request
  markers: []WritableTxnMarker 0+
    producer_id: int64 0+
    producer_epoch: int16 0+
    transaction_result: bool 0+
    topics: []WritableTxnMarkerTopic 0+
      name: string 0+
      partition_indexes: []int32 0+
    coordinator_epoch: int32 0+
    transaction_version: int8 2+
response
  markers: []WritableTxnMarkerResult 0+
    producer_id: int64 0+
    topics: []WritableTxnMarkerTopicResult 0+
      name: string 0+
      partitions: []WritableTxnMarkerPartitionResult 0+
        partition_index: int32 0+
        error_code: int16 0+
"""
