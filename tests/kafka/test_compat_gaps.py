"""What a kafka-python user meets after changing only the imports: consumers without a group_id, kafka-python's
own value objects (TopicPartition, OffsetAndMetadata, ConfigResource, NewTopic, NewPartitions) passed to the
compat faces, and the error classes they raise, against fastmq's embedded broker."""
from __future__ import annotations

import time
import uuid

import kafka.admin as peer_admin
import kafka.structs as peer_structs
import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka.compat import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetSpec
from fastmq.kafka.structs import TopicPartition
from tests.support.waiting import wait_for

WAIT = 20.0


def topic_name() -> str:
    return f"gap-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def admin(embedded_broker):
    with KafkaAdminClient(bootstrap_servers=embedded_broker.bootstrap_servers) as client:
        yield client


def fill(servers: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5)
    try:
        for partition in range(partitions):
            for i in range(per_partition):
                producer.send(topic, b"v%d-%d" % (partition, i), partition=partition)
        producer.flush(WAIT)
    finally:
        producer.close()


def read(consumer: KafkaConsumer, count: int) -> list:
    records, deadline = [], time.monotonic() + WAIT
    while len(records) < count and time.monotonic() < deadline:
        for chunk in consumer.poll(timeout_ms=200).values():
            records.extend(chunk)
    return records


def test_subscription_without_group_id_reads_every_partition_and_commits_nothing(embedded_broker, admin):
    topic = topic_name()
    admin.create_topics([peer_admin.NewTopic(topic, 3, 1)])
    fill(embedded_broker.bootstrap_servers, topic, 3, 4)
    consumer = KafkaConsumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers,
                             auto_offset_reset="earliest")
    try:
        first = consumer.poll(timeout_ms=int(WAIT * 1000))     # waits for the metadata, then for records
        assert first and all(chunk for chunk in first.values())
        records = [r for chunk in first.values() for r in chunk]
        records += read(consumer, 12 - len(records))
        assert sorted((r.partition, r.value) for r in records) == sorted(
            (p, b"v%d-%d" % (p, i)) for p in range(3) for i in range(4))
        assert consumer.subscription() == {topic}
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(3)}
        with pytest.raises(kerrors.IllegalStateError):
            consumer.commit()
        with pytest.raises(kerrors.IllegalStateError):
            consumer.assign([TopicPartition(topic, 0)])
    finally:
        consumer.close()


def test_pattern_subscription_without_group_id_picks_up_new_topics(embedded_broker, admin):
    prefix = topic_name()
    consumer = KafkaConsumer(bootstrap_servers=embedded_broker.bootstrap_servers, auto_offset_reset="earliest",
                             metadata_max_age_ms=200)
    try:
        consumer.subscribe(pattern=f"{prefix}-.*")
        assert consumer.poll(timeout_ms=100) == {}
        admin.create_topics([f"{prefix}-a", f"{prefix}-b"])
        fill(embedded_broker.bootstrap_servers, f"{prefix}-a", 1, 2)
        fill(embedded_broker.bootstrap_servers, f"{prefix}-b", 1, 3)
        records = read(consumer, 5)
        assert sorted((r.topic, r.offset) for r in records) == [
            (f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0), (f"{prefix}-b", 1), (f"{prefix}-b", 2)]
        assert consumer.subscription() == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        consumer.close()


def test_consumer_takes_kafka_pythons_topic_partition_and_offset_and_metadata(embedded_broker, admin):
    topic = topic_name()
    admin.create_topics([peer_admin.NewTopic(topic, 2, 1)])
    fill(embedded_broker.bootstrap_servers, topic, 2, 3)
    theirs = [peer_structs.TopicPartition(topic, 0), peer_structs.TopicPartition(topic, 1)]
    consumer = KafkaConsumer(bootstrap_servers=embedded_broker.bootstrap_servers, group_id=topic,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign(theirs)
        assert consumer.assignment() == set(theirs)
        consumer.pause(theirs[1])
        assert consumer.paused() == {theirs[1]}
        records = read(consumer, 3)
        assert {r.partition for r in records} == {0}
        consumer.resume(theirs[1])
        consumer.seek_to_end(theirs[0])
        assert consumer.position(theirs[0]) == 3
        consumer.seek(theirs[0], 1)
        consumer.seek_to_beginning(*theirs)
        assert consumer.beginning_offsets(theirs) == {theirs[0]: 0, theirs[1]: 0}
        assert consumer.end_offsets(theirs) == {theirs[0]: 3, theirs[1]: 3}
        consumer.commit({theirs[0]: peer_structs.OffsetAndMetadata(2, "m", -1)})
        assert consumer.committed(theirs[0]) == 2
        assert consumer.committed(theirs[0], metadata=True).metadata == "m"
        consumer.assign([TopicPartition(topic, 0)])
        assert consumer.highwater(theirs[0]) in (None, 3)
        with pytest.raises(TypeError, match="TopicPartition"):
            consumer.pause((topic, 0)[0])
    finally:
        consumer.close()


def test_admin_takes_kafka_pythons_new_topic_new_partitions_and_config_resource(admin):
    topic = topic_name()
    admin.create_topics([peer_admin.NewTopic(topic, 1, 1, topic_configs={"retention.ms": "123456"})])
    admin.create_partitions({topic: peer_admin.NewPartitions(3)})
    assert len(admin.describe_topics([topic])[0]["partitions"]) == 3
    resource = peer_admin.ConfigResource(peer_admin.ConfigResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])
    assert described["topic"][topic]["retention.ms"]["value"] == "123456"
    change = peer_admin.ConfigResource(peer_admin.ConfigResourceType.TOPIC, topic, {"retention.ms": "654321"})
    assert admin.alter_configs([change]) == {"topic": {topic: "OK"}}
    assert admin.describe_configs([resource])["topic"][topic]["retention.ms"]["value"] == "654321"
    with pytest.raises(TypeError, match="NewPartitions"):
        admin.create_partitions({topic: object()})


def test_delete_records_takes_kafka_pythons_topic_partition_and_raises_kafka_python_errors(embedded_broker, admin):
    topic = topic_name()
    admin.create_topics([peer_admin.NewTopic(topic, 1, 1)])
    fill(embedded_broker.bootstrap_servers, topic, 1, 5)
    result = admin.delete_records({peer_structs.TopicPartition(topic, 0): 2})
    assert result[TopicPartition(topic, 0)]["low_watermark"] == 2
    with pytest.raises(kerrors.UnknownTopicOrPartitionError) as caught:
        admin.delete_records({peer_structs.TopicPartition(topic_name(), 0): 1}, timeout_ms=3000)
    import kafka.errors as peer_errors

    # kafka-python code catches its own names; ours carry them (and its error codes).
    assert type(caught.value).__name__ == "UnknownTopicOrPartitionError"
    assert caught.value.errno == peer_errors.UnknownTopicOrPartitionError.errno


def test_describe_groups_decodes_member_metadata_and_assignment_as_kafka_python(embedded_broker, admin):
    import kafka

    topic = topic_name()
    admin.create_topics([peer_admin.NewTopic(topic, 2, 1)])
    consumer = KafkaConsumer(topic, bootstrap_servers=embedded_broker.bootstrap_servers, group_id=topic)
    peer = kafka.KafkaAdminClient(bootstrap_servers=embedded_broker.bootstrap_servers)
    try:
        deadline = time.monotonic() + WAIT
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        ours, theirs = admin.describe_groups([topic])[topic], peer.describe_groups([topic])[topic]
        assert ours["members"] == theirs["members"]
        member = ours["members"][0]
        assert member["member_metadata"]["topics"] == [topic]
        assert sorted(member["member_assignment"]["assigned_partitions"][0]["partitions"]) == [0, 1]
    finally:
        peer.close()
        consumer.close()


def test_list_partition_offsets_answers_as_kafka_python(embedded_broker, admin):
    import kafka

    topic = topic_name()
    admin.create_topics([peer_admin.NewTopic(topic, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=embedded_broker.bootstrap_servers)
    try:
        for i in range(4):
            producer.send(topic, b"v", partition=0, timestamp_ms=1_000_000 + i * 1000)
        producer.flush(WAIT)
    finally:
        producer.close()
    p0, p1 = peer_structs.TopicPartition(topic, 0), peer_structs.TopicPartition(topic, 1)
    specs = {p0: kafka.OffsetSpec.LATEST, p1: kafka.OffsetSpec.EARLIEST}
    peer = kafka.KafkaAdminClient(bootstrap_servers=embedded_broker.bootstrap_servers)
    try:
        assert admin.list_partition_offsets(specs) == peer.list_partition_offsets(specs)
        ours = admin.list_partition_offsets({p0: 1_001_500, p1: OffsetSpec.LATEST},
                                            isolation_level=kafka.IsolationLevel.READ_COMMITTED)
        assert ours[p0].offset == 2 and ours[p0].timestamp == 1_002_000
        assert ours[p1].offset == 0
        assert ours == peer.list_partition_offsets({p0: 1_001_500, p1: -1}, kafka.IsolationLevel.READ_COMMITTED)
    finally:
        peer.close()
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        admin.list_partition_offsets({TopicPartition(topic_name(), 0): OffsetSpec.EARLIEST})
    with pytest.raises(TypeError):
        admin.list_partition_offsets({p0: "latest"})


# ---- admin calls over APIs fastmq's embedded broker does not serve (Apache Kafka does) ----------------------

def cluster_calls(topic: str) -> dict:
    return {"describe_log_dirs": ({topic: [0]},), "list_partition_reassignments": (),
            "describe_metadata_quorum": (), "elect_leaders": (0, {topic: [0, 1]}, None, False),
            "list_config_resources": (["topic"],), "list_transactions": ()}


def comparable(answer):
    """An answer as data: elect_leaders' response as {(topic, partition): error code}, without live values."""
    if hasattr(answer, "replica_election_results"):
        return {(r.topic, p.partition_id): p.error_code for r in answer.replica_election_results
                for p in r.partition_result}
    return without_live_values(answer)


# Values that move between two calls: the metadata quorum's progress, a log directory's disk space.
LIVE = {"last_fetch_timestamp", "last_caught_up_timestamp", "log_end_offset", "high_watermark", "total_bytes",
        "usable_bytes"}


def without_live_values(value):
    if isinstance(value, dict):
        return {k: without_live_values(v) for k, v in value.items() if k not in LIVE}
    if isinstance(value, list):
        return [without_live_values(v) for v in value]
    return value


def log_dirs_hold(admin, topic: str) -> bool:
    """Whether the broker's log directories hold the topic's first partition (a moment after its creation); true
    where the broker has no DescribeLogDirs."""
    import kafka

    try:
        answer = admin.describe_log_dirs({topic: [0]})
    except kafka.errors.IncompatibleBrokerVersion:
        return True
    return any(found["name"] == topic for broker in answer
               for directory in broker["log_dirs"] for found in directory["topics"])


def test_calls_the_broker_lacks_raise_incompatible_broker_version(admin):
    for name, args in cluster_calls(topic_name()).items():
        with pytest.raises(kerrors.IncompatibleBrokerVersion):
            getattr(admin, name)(*args)


def test_cluster_calls_answer_as_kafka_python(kafka_broker):
    """Compared with kafka-python's answers on a broker that has the APIs (Apache Kafka in the test kit)."""
    import kafka

    ours = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    theirs = kafka.KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        topic = topic_name()
        ours.create_topics([peer_admin.NewTopic(topic, 2, 1)], wait_for_metadata=True)
        assert wait_for(lambda: log_dirs_hold(theirs, topic), 30.0)
        answered = 0
        for name, args in cluster_calls(topic).items():
            try:
                expected = getattr(theirs, name)(*args)
            except kafka.errors.IncompatibleBrokerVersion:
                with pytest.raises(kerrors.IncompatibleBrokerVersion):
                    getattr(ours, name)(*args)
                continue
            assert comparable(getattr(ours, name)(*args)) == comparable(expected), name
            answered += 1
        if not answered:
            pytest.skip("this broker has none of DescribeLogDirs, ListPartitionReassignments, DescribeQuorum")
    finally:
        theirs.close()
        ours.close()
