"""The Kafka front end over the wire, request by request (fastmq/broker/kafka/*): what each API answers, with
fastmq's protocol codecs on a plain blocking socket."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from fastmq.broker.config import ListenerConfig
from fastmq.broker.errors import CoreError
from fastmq.broker.kafka.errors import kafka_code
from fastmq.broker.kafka.front import BROKER_VERSIONS
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.protocol import ApiKey

from tests.support.waiting import wait_for
from .conftest import Wire, fetch, metadata, produce, record_batch, records_of, small_broker


def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def create_topic(wire: Wire, name: str, partitions: int = 1, configs: dict | None = None, version: int = 5) -> Any:
    request = kp.CreateTopicsRequest(topics=[kp.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[kp.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000, validate_only=False)
    return wire.request(ApiKey.CREATE_TOPICS, version, request).topics[0]


def list_offset(wire: Wire, topic: str, timestamp: int, partition: int = 0, version: int = 7) -> Any:
    request = kp.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[kp.ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[kp.ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                                            timestamp=timestamp)])])
    return wire.request(ApiKey.LIST_OFFSETS, version, request).topics[0].partitions[0]


# -- connection setup ---------------------------------------------------------------------------------------------

def test_every_core_refusal_has_a_kafka_error_code():
    codes = {error: kafka_code(error) for error in CoreError}
    assert kafka_code(None) == 0 and all(code > 0 for code in codes.values())
    # Distinct refusals stay distinct on the wire (clients react to each differently).
    assert len(set(codes.values())) == len(codes)


def test_listeners_named_by_protocol_or_security_protocol_all_serve_kafka(tmp_path):
    listeners = [ListenerConfig.parse("kafka://127.0.0.1:0"), ListenerConfig.parse("PLAINTEXT://127.0.0.1:0")]
    with small_broker(tmp_path / "data", listeners=listeners) as broker:
        assert len(set(broker.addresses)) == 2
        assert broker.bootstrap_servers == "127.0.0.1:%d" % broker.addresses[0][1]
        for address in broker.addresses:
            wire = Wire(address)
            try:
                (broker_entry,) = metadata(wire, []).brokers
            finally:
                wire.close()
            assert (broker_entry.host, broker_entry.port) == address    # each answers with its own address


def test_api_versions_lists_exactly_what_the_broker_serves(wire):
    response = wire.request(ApiKey.API_VERSIONS, 3, kp.ApiVersionsRequest(client_software_name="t",
                                                                          client_software_version="1"))
    assert response.error_code == 0
    served = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
    assert served == {int(key): versions for key, versions in BROKER_VERSIONS.items()}
    # Every API fastmq's codecs know is served but the cluster-operations ones a single node has nothing to do
    # with (log dirs, leader elections, reassignments, the KRaft quorum, config resource listing, feature levels,
    # transaction markers: the admin client speaks them to Apache Kafka); the batched, broker-to-broker
    # AddPartitionsToTxn v4+ is not served.
    client_only = {ApiKey.DESCRIBE_LOG_DIRS, ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.ELECT_LEADERS,
                   ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_QUORUM,
                   ApiKey.LIST_CONFIG_RESOURCES, ApiKey.UPDATE_FEATURES, ApiKey.WRITE_TXN_MARKERS}
    # The admin client's transaction and producer listings, ACLs, SCRAM credentials and paged partition
    # descriptions, not served by the embedded broker yet.
    not_served_yet = {ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS,
                      ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
                      ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                      ApiKey.DESCRIBE_TOPIC_PARTITIONS}
    assert set(served) == set(ApiKey) - client_only - not_served_yet
    assert served[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 3)


def test_api_versions_newer_than_ours_gets_a_v0_unsupported_answer(broker):
    wire = Wire(broker.bootstrap_servers)
    # A version this broker does not know: the frame is hand-made (fastmq's codec would refuse to encode it).
    header = b"\x00\x12\x00\x63\x00\x00\x00\x07\x00\x01c"
    wire.sock.sendall(len(header).to_bytes(4, "big") + header)
    correlation_id, body = kp.decode_response(ApiKey.API_VERSIONS, 0, wire.receive_frame())
    assert correlation_id == 7 and body.error_code == kerrors.UnsupportedVersionError.errno
    assert {entry.api_key for entry in body.api_keys} == set(BROKER_VERSIONS)
    # The connection stays usable.
    assert wire.request(ApiKey.API_VERSIONS, 0, kp.ApiVersionsRequest()).error_code == 0
    wire.close()


def test_unadvertised_version_closes_only_that_connection(broker):
    bad, good = Wire(broker.bootstrap_servers), Wire(broker.bootstrap_servers)
    bad.send(ApiKey.PRODUCE, 2, kp.ProduceRequest(acks=1, timeout_ms=100, topic_data=[]))
    assert bad.closed_by_peer()
    assert good.request(ApiKey.API_VERSIONS, 0, kp.ApiVersionsRequest()).error_code == 0


def test_metadata_auto_creates_and_respects_the_flags(broker, wire):
    name = topic_name()
    response = metadata(wire, [name], version=12)
    assert response.brokers[0].port == broker.addresses[0][1] and response.controller_id == 0
    topic = response.topics[0]
    assert topic.error_code == 0 and topic.name == name and len(topic.partitions) == 1
    assert topic.partitions[0].leader_id == 0 and topic.partitions[0].isr_nodes == [0]
    assert topic.topic_id.int != 0
    other = topic_name()
    refused = metadata(wire, [other], allow_auto=False).topics[0]
    assert refused.error_code == kerrors.UnknownTopicOrPartitionError.errno
    assert metadata(wire, ["bad name!"]).topics[0].error_code == kerrors.InvalidTopicError.errno
    assert name in {t.name for t in metadata(wire, None).topics}
    assert metadata(wire, [], version=0).topics and not metadata(wire, [], version=1).topics


def test_metadata_without_auto_creation(tmp_path):
    with small_broker(tmp_path / "d", auto_create_topics=False) as embedded:
        wire = Wire(embedded.bootstrap_servers)
        assert metadata(wire, ["nope"]).topics[0].error_code == kerrors.UnknownTopicOrPartitionError.errno
        wire.close()


# -- produce and fetch ----------------------------------------------------------------------------------------

def test_produce_then_fetch_round_trips_keys_values_headers_and_timestamps(wire):
    name = topic_name()
    create_topic(wire, name)
    values = [b"v0", None, b"", b"\x00\x01\x02binary"]
    keys = [b"k0", None, b"\xff\xfe", b"text key"]
    headers = [[("h", b"1")], [], [("null", None), ("KEYS", b"reserved")], [("a", b"x"), ("a", b"y")]]
    timestamps = [1_700_000_000_500, 1_700_000_000_100, 1_700_000_000_900, 1_700_000_000_200]
    result = produce(wire, name, 0, record_batch(values, keys=keys, headers=headers, timestamps=timestamps))
    assert result.error_code == 0 and result.base_offset == 0 and result.log_start_offset == 0
    assert produce(wire, name, 0, record_batch([b"next"])).base_offset == 4
    data = fetch(wire, name, 0, 0)
    assert data.error_code == 0 and data.high_watermark == 5 and data.log_start_offset == 0
    records = records_of(data)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    assert [r.value for r in records[:4]] == values
    assert [r.key for r in records[:4]] == keys
    assert [list(r.headers) for r in records[:4]] == headers
    assert [r.timestamp for r in records[:4]] == timestamps
    # A fetch from the middle starts there.
    assert [r.offset for r in records_of(fetch(wire, name, 0, 3))] == [3, 4]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_stored_record_by_record(wire, codec):
    name = topic_name()
    values = [b"compressible " * 20 + bytes([i]) for i in range(50)]
    create_topic(wire, name)
    assert produce(wire, name, 0, record_batch(values, codec=codec)).error_code == 0
    assert [r.value for r in records_of(fetch(wire, name, 0, 0))] == values


def test_fetch_limits_and_out_of_range(wire):
    name = topic_name()
    create_topic(wire, name)
    produce(wire, name, 0, record_batch([b"x" * 1000] * 20))
    small = fetch(wire, name, 0, 0, partition_max_bytes=3000)
    assert 1 <= len(records_of(small)) < 20 and len(small.records) <= 3000
    # The first record comes whole even when it alone exceeds the limits (KIP-74).
    assert len(records_of(fetch(wire, name, 0, 0, partition_max_bytes=10, max_bytes=10))) == 1
    assert fetch(wire, name, 0, 20).records == b""
    assert fetch(wire, name, 0, 21).error_code == kerrors.OffsetOutOfRangeError.errno
    assert fetch(wire, name, 0, -1).error_code == kerrors.OffsetOutOfRangeError.errno
    unknown = fetch(wire, "no-such-topic", 0, 0)
    assert unknown.error_code == kerrors.UnknownTopicOrPartitionError.errno


def test_fetch_by_topic_id(wire):
    name = topic_name()
    topic_id = create_topic(wire, name, version=7).topic_id
    produce(wire, name, 0, record_batch([b"by-id"]))
    request = kp.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                              session_epoch=-1, rack_id="", topics=[kp.FetchRequest.FetchTopic(
                                  topic_id=topic_id, partitions=[kp.FetchRequest.FetchPartition(
                                      partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    response = wire.request(ApiKey.FETCH, 13, request)
    assert response.responses[0].topic_id == topic_id
    assert [r.value for r in records_of(response.responses[0].partitions[0])] == [b"by-id"]
    request.topics[0].topic_id = uuid.uuid4()
    missing = wire.request(ApiKey.FETCH, 13, request).responses[0].partitions[0]
    assert missing.error_code == kerrors.UnknownTopicIdError.errno


def test_incremental_fetch_session_is_refused(wire):
    request = kp.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1024, isolation_level=0, session_id=5,
                              session_epoch=3, topics=[], rack_id="")
    response = wire.request(ApiKey.FETCH, 11, request)
    assert response.error_code == kerrors.FetchSessionIdNotFoundError.errno and response.session_id == 0


def test_long_poll_fetch_is_held_until_data_arrives(broker, wire):
    name = topic_name()
    create_topic(wire, name)
    producer = Wire(broker.bootstrap_servers)
    timer = threading.Timer(0.3, lambda: produce(producer, name, 0, record_batch([b"late"])))
    started = time.monotonic()
    timer.start()
    data = fetch(wire, name, 0, 0, max_wait_ms=5000)
    elapsed = time.monotonic() - started
    timer.join()
    assert [r.value for r in records_of(data)] == [b"late"]
    assert 0.2 < elapsed < 4.5          # answered by the arrival, not by the timeout
    producer.close()


def test_long_poll_fetch_times_out_empty_and_min_bytes_waits_for_enough(broker, wire):
    name = topic_name()
    create_topic(wire, name)
    started = time.monotonic()
    data = fetch(wire, name, 0, 0, max_wait_ms=300)
    assert data.records == b"" and time.monotonic() - started >= 0.25
    produce(wire, name, 0, record_batch([b"a"]))
    # min_bytes larger than what is there: held for max_wait, then answered with what there is.
    started = time.monotonic()
    data = fetch(wire, name, 0, 0, max_wait_ms=300, min_bytes=100_000)
    assert len(records_of(data)) == 1 and time.monotonic() - started >= 0.25
    assert broker.broker.front_end("kafka").fetch_hold.parked == 0


def test_held_fetch_of_a_closed_connection_is_dropped(broker):
    name = topic_name()
    wire = Wire(broker.bootstrap_servers)
    create_topic(wire, name)
    request = kp.FetchRequest(max_wait_ms=10000, min_bytes=1, max_bytes=1024, isolation_level=0, session_id=0,
                              session_epoch=-1, rack_id="", topics=[kp.FetchRequest.FetchTopic(
                                  topic=name, partitions=[kp.FetchRequest.FetchPartition(
                                      partition=0, fetch_offset=0, partition_max_bytes=1024)])])
    wire.send(ApiKey.FETCH, 11, request)
    hold = broker.broker.front_end("kafka").fetch_hold
    assert wait_for(lambda: hold.parked == 1)
    wire.close()
    assert wait_for(lambda: hold.parked == 0)


def test_acks_zero_all_and_invalid(broker, wire):
    name = topic_name()
    create_topic(wire, name)
    assert produce(wire, name, 0, record_batch([b"zero"]), acks=0) is None
    result = produce(wire, name, 0, record_batch([b"all"]), acks=-1)
    assert result.error_code == 0 and result.base_offset == 1
    store = broker.broker.store
    assert store.commit_log.flushed_where >= store.commit_log.get_max_offset()    # acks=all means fsynced
    assert produce(wire, name, 0, record_batch([b"two"]), acks=2).error_code == \
        kerrors.InvalidRequiredAcksError.errno


def test_acks_zero_error_closes_the_connection(broker):
    wire = Wire(broker.bootstrap_servers)
    produce(wire, "never-created", 0, record_batch([b"x"]), acks=0)
    assert wire.closed_by_peer()


def test_produce_errors(wire):
    name = topic_name()
    create_topic(wire, name, configs={"max.message.bytes": "2000"})
    assert produce(wire, "unknown-topic", 0, record_batch([b"x"])).error_code == \
        kerrors.UnknownTopicOrPartitionError.errno
    assert produce(wire, name, 5, record_batch([b"x"])).error_code == kerrors.UnknownTopicOrPartitionError.errno
    too_large = produce(wire, name, 0, record_batch([b"y" * 3000]))
    assert too_large.error_code == kerrors.MessageSizeTooLargeError.errno and "max.message.bytes" in \
        too_large.error_message
    corrupt = bytearray(record_batch([b"z"]))
    corrupt[-1] ^= 0xFF
    assert produce(wire, name, 0, bytes(corrupt)).error_code == kerrors.CorruptRecordError.errno
    from fastmq.kafka.record.legacy_records import LegacyRecordBatchBuilder
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    legacy.append(0, 1_700_000_000_000, None, b"old")
    assert produce(wire, name, 0, bytes(legacy.build())).error_code == \
        kerrors.UnsupportedForMessageFormatError.errno
    from fastmq.kafka.record.default_records import DefaultRecordBatchBuilder
    txn = DefaultRecordBatchBuilder(2, 0, True, 1, 0, 0, 1 << 20)
    txn.append(0, 1, None, b"t", [])
    transactional = bytes(txn.build())
    # Transactional records need the request's transactional id, and a transaction open on the partition.
    assert produce(wire, name, 0, transactional).error_code == kerrors.TransactionalIdAuthorizationFailedError.errno
    assert produce(wire, name, 0, transactional, transactional_id="t").error_code == \
        kerrors.InvalidTxnStateError.errno
    assert produce(wire, name, 0, record_batch([b"t"])).error_code == 0
    # Nothing of the refused batches was stored.
    assert [r.value for r in records_of(fetch(wire, name, 0, 0))] == [b"t"]


# -- idempotent producers -------------------------------------------------------------------------------------------

def init_producer_id(wire: Wire, transactional_id: str | None = None) -> Any:
    return wire.request(ApiKey.INIT_PRODUCER_ID, 4, kp.InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60000))


def test_idempotent_duplicates_gaps_and_epochs(wire):
    name = topic_name()
    create_topic(wire, name)
    first = init_producer_id(wire)
    second = init_producer_id(wire)
    assert first.error_code == 0 and second.producer_id != first.producer_id
    pid = first.producer_id
    batch0 = record_batch([b"a", b"b"], producer=(pid, 0, 0))
    assert produce(wire, name, 0, batch0).base_offset == 0
    assert produce(wire, name, 0, record_batch([b"c"], producer=(pid, 0, 2))).base_offset == 2
    # The retry of an earlier batch is answered with its offset and not stored again.
    duplicate = produce(wire, name, 0, batch0)
    assert duplicate.error_code == 0 and duplicate.base_offset == 0
    gap = produce(wire, name, 0, record_batch([b"gap"], producer=(pid, 0, 9)))
    assert gap.error_code == kerrors.OutOfOrderSequenceNumberError.errno
    unknown = produce(wire, name, 0, record_batch([b"?"], producer=(second.producer_id, 0, 5)))
    assert unknown.error_code == kerrors.UnknownProducerIdError.errno
    # A new epoch starts at sequence 0; the old epoch is fenced.
    assert produce(wire, name, 0, record_batch([b"e1"], producer=(pid, 1, 0))).error_code == 0
    assert produce(wire, name, 0, record_batch([b"old"], producer=(pid, 0, 3))).error_code == \
        kerrors.InvalidProducerEpochError.errno
    assert [r.value for r in records_of(fetch(wire, name, 0, 0))] == [b"a", b"b", b"c", b"e1"]


# -- offsets ---------------------------------------------------------------------------------------------------------

def test_list_offsets_uses_record_timestamps_and_the_log_end(wire):
    name = topic_name()
    create_topic(wire, name)
    # Timestamps that do not grow with the offsets (client clocks, replays): 500, 100, 900, 200.
    produce(wire, name, 0, record_batch([b"a", b"b", b"c", b"d"],
                                        timestamps=[500, 100, 900, 200]))
    produce(wire, name, 0, record_batch([b"e"], timestamps=[300]))
    assert list_offset(wire, name, -2).offset == 0
    assert list_offset(wire, name, -1).offset == 5           # the log end, not the last batch's start
    assert (list_offset(wire, name, 150).offset, list_offset(wire, name, 150).timestamp) == (0, 500)
    assert (list_offset(wire, name, 600).offset, list_offset(wire, name, 600).timestamp) == (2, 900)
    assert list_offset(wire, name, 901).offset == -1
    top = list_offset(wire, name, -3)
    assert (top.offset, top.timestamp) == (2, 900)
    assert list_offset(wire, "missing", -1).error_code == kerrors.UnknownTopicOrPartitionError.errno


def test_list_offsets_by_time_across_many_windows(broker, wire):
    from fastmq.broker.kafka import log as kafka_log

    name = topic_name()
    create_topic(wire, name)
    count = kafka_log.WINDOW * 2 + 100
    # Descending timestamps in the first window, then ascending ones.
    timestamps = [10_000 - i for i in range(kafka_log.WINDOW)] + [20_000 + i for i in range(count - kafka_log.WINDOW)]
    for start in range(0, count, 1000):
        produce(wire, name, 0, record_batch([b"r"] * len(timestamps[start:start + 1000]),
                                            timestamps=timestamps[start:start + 1000]))
    logs = broker.broker.front_end("kafka").logs
    for target in (0, 6_000, 10_000, 10_001, 20_000, 20_000 + kafka_log.WINDOW + 50, 10 ** 9):
        expected = next(((i, t) for i, t in enumerate(timestamps) if t >= target), None)
        assert logs.offset_for_timestamp(name, 0, target) == expected
    assert logs.max_timestamp(name, 0) == (count - 1, timestamps[-1])


def test_offset_for_leader_epoch(wire):
    name = topic_name()
    create_topic(wire, name)
    produce(wire, name, 0, record_batch([b"a", b"b"]))
    request = kp.OffsetForLeaderEpochRequest(replica_id=-1, topics=[kp.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=name, partitions=[kp.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=0, leader_epoch=0)])])
    result = wire.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request).topics[0].partitions[0]
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 0, 2)


def test_offset_commit_and_fetch_simple_and_batched(broker, wire):
    name = topic_name()
    create_topic(wire, name, partitions=2)
    commit = kp.OffsetCommitRequest(group_id="simple", generation_id_or_member_epoch=-1, member_id="", topics=[
        kp.OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
            kp.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                                committed_leader_epoch=0, committed_metadata="m"),
            kp.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=5, committed_offset=1,
                                                                committed_metadata=None)])])
    response = wire.request(ApiKey.OFFSET_COMMIT, 8, commit)
    assert [p.error_code for p in response.topics[0].partitions] == [0, kerrors.UnknownTopicOrPartitionError.errno]
    # Durable when acknowledged: the store's file already has it.
    assert broker.broker.store.consumer_offset_manager.query_offset("simple", name, 0) == 7
    fetched = wire.request(ApiKey.OFFSET_FETCH, 7, kp.OffsetFetchRequest(group_id="simple", topics=None))
    partitions = {p.partition_index: p for p in fetched.topics[0].partitions}
    assert partitions[0].committed_offset == 7 and partitions[0].metadata == "m"
    assert partitions[0].committed_leader_epoch == 0
    batched = wire.request(ApiKey.OFFSET_FETCH, 8, kp.OffsetFetchRequest(groups=[
        kp.OffsetFetchRequest.OffsetFetchRequestGroup(group_id="simple", topics=[
            kp.OffsetFetchRequest.OffsetFetchRequestTopics(name=name, partition_indexes=[0, 1])])]))
    group = batched.groups[0]
    assert [(p.partition_index, p.committed_offset) for p in group.topics[0].partitions] == [(0, 7), (1, -1)]
    # A member of no group cannot commit with a generation.
    refused = kp.OffsetCommitRequest(group_id="nobody", generation_id_or_member_epoch=3, member_id="m", topics=[
        kp.OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
            kp.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
    assert wire.request(ApiKey.OFFSET_COMMIT, 8, refused).topics[0].partitions[0].error_code == \
        kerrors.UnknownMemberIdError.errno


# -- admin -------------------------------------------------------------------------------------------------------

def test_create_delete_and_grow_topics(broker, wire):
    name = topic_name()
    created = create_topic(wire, name, partitions=3, configs={"retention.ms": "1000"}, version=7)
    assert created.error_code == 0 and created.num_partitions == 3 and created.replication_factor == 1
    assert {c.name: c.value for c in created.configs}["retention.ms"] == "1000"
    assert create_topic(wire, name).error_code == kerrors.TopicAlreadyExistsError.errno
    assert create_topic(wire, "x" * 250).error_code == kerrors.InvalidTopicError.errno
    assert create_topic(wire, topic_name(), configs={"bogus.config": "1"}).error_code == \
        kerrors.InvalidConfigurationError.errno
    replicated = kp.CreateTopicsRequest(topics=[kp.CreateTopicsRequest.CreatableTopic(
        name=topic_name(), num_partitions=1, replication_factor=3, assignments=[], configs=[])], timeout_ms=1000)
    assert wire.request(ApiKey.CREATE_TOPICS, 5, replicated).topics[0].error_code == \
        kerrors.InvalidReplicationFactorError.errno

    grow = kp.CreatePartitionsRequest(topics=[kp.CreatePartitionsRequest.CreatePartitionsTopic(
        name=name, count=5, assignments=None)], timeout_ms=1000, validate_only=False)
    assert wire.request(ApiKey.CREATE_PARTITIONS, 2, grow).results[0].error_code == 0
    assert len(metadata(wire, [name]).topics[0].partitions) == 5
    shrink = kp.CreatePartitionsRequest(topics=[kp.CreatePartitionsRequest.CreatePartitionsTopic(
        name=name, count=2, assignments=None)], timeout_ms=1000, validate_only=False)
    assert wire.request(ApiKey.CREATE_PARTITIONS, 2, shrink).results[0].error_code == \
        kerrors.InvalidPartitionsError.errno
    produce(wire, name, 4, record_batch([b"in the new partition"]))

    deleted = wire.request(ApiKey.DELETE_TOPICS, 5, kp.DeleteTopicsRequest(topic_names=[name, "ghost"], timeout_ms=1))
    assert [r.error_code for r in deleted.responses] == [0, kerrors.UnknownTopicOrPartitionError.errno]
    assert metadata(wire, [name], allow_auto=False).topics[0].error_code == kerrors.UnknownTopicOrPartitionError.errno
    # Created again, it starts empty with a new id.
    again = create_topic(wire, name, version=7)
    assert again.topic_id != created.topic_id
    assert fetch(wire, name, 0, 0).high_watermark == 0


def test_describe_and_alter_configs(wire):
    name = topic_name()
    create_topic(wire, name, configs={"max.message.bytes": "5000"})

    def describe(version: int = 4) -> dict:
        request = kp.DescribeConfigsRequest(resources=[kp.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=name, configuration_keys=None)], include_synonyms=True)
        result = wire.request(ApiKey.DESCRIBE_CONFIGS, version, request).results[0]
        assert result.error_code == 0
        return {c.name: (c.value, c.config_source) for c in result.configs}

    configs = describe()
    assert configs["max.message.bytes"] == ("5000", 1) and configs["cleanup.policy"] == ("delete", 5)
    alter = kp.IncrementalAlterConfigsRequest(resources=[kp.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[
            kp.IncrementalAlterConfigsRequest.AlterableConfig(name="max.message.bytes", config_operation=1, value=None),
            kp.IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0,
                                                              value="99")])], validate_only=False)
    assert wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter).responses[0].error_code == 0
    configs = describe(1)
    assert configs["max.message.bytes"] == ("1048588", 5) and configs["retention.ms"] == ("99", 1)
    refused = kp.AlterConfigsRequest(resources=[kp.AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[kp.AlterConfigsRequest.AlterableConfig(
            name="cleanup.policy", value="compact")])], validate_only=False)
    assert wire.request(ApiKey.ALTER_CONFIGS, 1, refused).responses[0].error_code == \
        kerrors.InvalidConfigurationError.errno
    broker_request = kp.DescribeConfigsRequest(resources=[kp.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name="0", configuration_keys=["num.partitions"])])
    broker_configs = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, broker_request).results[0].configs
    assert [(c.name, c.value, c.read_only) for c in broker_configs] == [("num.partitions", "1", True)]


def test_describe_cluster_and_find_coordinator(broker, wire):
    cluster = wire.request(ApiKey.DESCRIBE_CLUSTER, 1, kp.DescribeClusterRequest())
    assert cluster.error_code == 0 and cluster.brokers[0].port == broker.addresses[0][1]
    assert cluster.cluster_id == broker.broker.cluster_id
    coordinator = wire.request(ApiKey.FIND_COORDINATOR, 4, kp.FindCoordinatorRequest(key_type=0,
                                                                                      coordinator_keys=["a", "b"]))
    assert [(c.key, c.node_id, c.port) for c in coordinator.coordinators] == [
        ("a", 0, broker.addresses[0][1]), ("b", 0, broker.addresses[0][1])]


def test_stats_count_puts_and_gets(broker, wire):
    name = topic_name()
    create_topic(wire, name)
    produce(wire, name, 0, record_batch([b"s"] * 10))
    fetch(wire, name, 0, 0)
    stats = broker.stats()
    assert stats["topics"][name]["put"]["messages"] == 10
    assert stats["topics"][name]["get"]["messages"] == 10
    assert stats["topics"][name]["put"]["tps_10s"] >= 0
    assert stats["groups"][""][name]["messages"] == 10
    clients = stats["clients"]
    assert clients["producers"] >= 1 and clients["producers_by_topic"][name] == 1
    assert any(c["client_id"] == "wire-test" for c in clients["clients"])
    assert stats["partitions"][name] == [{"partition": 0, "log_start_offset": 0, "high_watermark": 10,
                                          "last_stable_offset": 10}]


def test_bytes_after_a_request_body_are_ignored_as_kafka_does(broker):
    # librdkafka's Metadata v12 for all topics: a 4-byte placeholder where the null array count goes.
    wire = Wire(broker.bootstrap_servers)
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    wire.sock.sendall(len(frame).to_bytes(4, "big") + frame)
    correlation_id, body = kp.decode_response(ApiKey.METADATA, 12, wire.receive_frame())
    assert correlation_id == 3 and body.brokers[0].port == broker.addresses[0][1]
    wire.close()


def test_group_apis_over_the_wire(broker, wire):
    name = topic_name()
    create_topic(wire, name)
    # A consumer-protocol Subscription v0: version, one topic, null user data.
    subscription = (b"\x00\x00" + b"\x00\x00\x00\x01" + len(name).to_bytes(2, "big") + name.encode()
                    + b"\xff\xff\xff\xff")
    join = kp.JoinGroupRequest(group_id="wg", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                               protocol_type="consumer", protocols=[kp.JoinGroupRequest.JoinGroupRequestProtocol(
                                   name="range", metadata=subscription)])
    first = wire.request(ApiKey.JOIN_GROUP, 5, join)
    assert first.error_code == kerrors.MemberIdRequiredError.errno
    join.member_id = first.member_id
    joined = wire.request(ApiKey.JOIN_GROUP, 5, join)
    assert joined.error_code == 0 and joined.leader == first.member_id and len(joined.members) == 1
    synced = wire.request(ApiKey.SYNC_GROUP, 3, kp.SyncGroupRequest(
        group_id="wg", generation_id=joined.generation_id, member_id=first.member_id,
        assignments=[kp.SyncGroupRequest.SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"A")]))
    assert synced.error_code == 0 and bytes(synced.assignment) == b"A"
    heartbeat = kp.HeartbeatRequest(group_id="wg", generation_id=joined.generation_id, member_id=first.member_id)
    assert wire.request(ApiKey.HEARTBEAT, 3, heartbeat).error_code == 0
    # The group is recorded for RocketMQ's side too (subscriptionGroup.json).
    assert wait_for(lambda: "wg" in broker.broker.store.subscription_group_manager.subscription_group_table)
    listed = wire.request(ApiKey.LIST_GROUPS, 4, kp.ListGroupsRequest(states_filter=["Stable"]))
    assert [(g.group_id, g.group_state, g.protocol_type) for g in listed.groups] == [("wg", "Stable", "consumer")]
    described = wire.request(ApiKey.DESCRIBE_GROUPS, 5, kp.DescribeGroupsRequest(groups=["wg", "nope"])).groups
    assert described[0].group_state == "Stable" and described[0].protocol_data == "range"
    assert described[0].members[0].client_id == "wire-test" and bytes(described[0].members[0].member_assignment) == b"A"
    assert described[1].group_state == "Dead"
    commit = kp.OffsetCommitRequest(group_id="wg", generation_id_or_member_epoch=joined.generation_id,
                                    member_id=first.member_id, topics=[
                                        kp.OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
                                            kp.OffsetCommitRequest.OffsetCommitRequestPartition(
                                                partition_index=0, committed_offset=3)])])
    assert wire.request(ApiKey.OFFSET_COMMIT, 7, commit).topics[0].partitions[0].error_code == 0
    offset_delete = kp.OffsetDeleteRequest(group_id="wg", topics=[kp.OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=name, partitions=[kp.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
    # The member is subscribed to the topic: its offsets stay.
    assert wire.request(ApiKey.OFFSET_DELETE, 0, offset_delete).topics[0].partitions[0].error_code == \
        kerrors.GroupSubscribedToTopicError.errno
    delete = kp.DeleteGroupsRequest(groups_names=["wg", "ghost"])
    assert [r.error_code for r in wire.request(ApiKey.DELETE_GROUPS, 2, delete).results] == [
        kerrors.NonEmptyGroupError.errno, kerrors.GroupIdNotFoundError.errno]
    leave = kp.LeaveGroupRequest(group_id="wg", members=[kp.LeaveGroupRequest.MemberIdentity(
        member_id=first.member_id)])
    assert [m.error_code for m in wire.request(ApiKey.LEAVE_GROUP, 3, leave).members] == [0]
    assert wire.request(ApiKey.OFFSET_DELETE, 0, offset_delete).topics[0].partitions[0].error_code == 0
    assert [r.error_code for r in wire.request(ApiKey.DELETE_GROUPS, 2, kp.DeleteGroupsRequest(
        groups_names=["wg"])).results] == [0]
    assert wait_for(lambda: "wg" not in broker.broker.store.subscription_group_manager.subscription_group_table)
    assert "wg" not in {g.group_id for g in wire.request(ApiKey.LIST_GROUPS, 4, kp.ListGroupsRequest()).groups}


def test_a_store_that_refuses_writes_answers_kafka_storage_error(tmp_path):
    from fastmq.store import MessageStoreConfig

    # A disk above the store's warning level: the store refuses writes from the start.
    store_config = MessageStoreConfig(mapped_file_size_commit_log=1 << 20, message_index_enable=False,
                                      disk_usage=lambda path: 0.95)
    with small_broker(tmp_path / "d", store=store_config) as full:
        wire = Wire(full.bootstrap_servers)
        create_topic(wire, "t")
        refused = produce(wire, "t", 0, record_batch([b"x"]), acks=-1)
        assert refused.error_code == kerrors.KafkaStorageError.errno and "disk" in refused.error_message
        assert fetch(wire, "t", 0, 0).high_watermark == 0
        wire.close()


def test_a_fetch_never_exceeds_the_brokers_fetch_max_bytes(tmp_path):
    with small_broker(tmp_path / "d", fetch_max_bytes=5000) as capped:
        wire = Wire(capped.bootstrap_servers)
        create_topic(wire, "big", partitions=2)
        for partition in (0, 1):
            produce(wire, "big", partition, record_batch([b"z" * 1000] * 20))
        request = kp.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 30, session_id=0, session_epoch=-1,
                                  rack_id="", topics=[kp.FetchRequest.FetchTopic(topic="big", partitions=[
                                      kp.FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                                     partition_max_bytes=1 << 30)
                                      for p in (0, 1)])])
        partitions = wire.request(ApiKey.FETCH, 11, request).responses[0].partitions
        assert sum(len(p.records) for p in partitions) <= 5000 and len(records_of(partitions[0])) >= 1
        wire.close()
