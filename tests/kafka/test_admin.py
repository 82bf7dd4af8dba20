"""fastmq.kafka.admin.Admin against a real broker (Tansu 0.6.0), cross-checked with kafka-python's and
confluent-kafka's admin clients; routing and retries against scripted brokers.

Tansu lacks CreatePartitions, AlterConfigs and OffsetDelete (tested for a clear IncompatibleBrokerVersion) and
gets some admin behaviour wrong (tests marked xfail(strict=True) naming the bug). Those tests state what Kafka
does, so that they pass against fastmq's embedded broker.

The scripted brokers (ScriptedCluster) speak the real wire protocol on 127.0.0.1 and answer from per-test
scripts: they stand in for what no single Tansu can do (move its controller, coordinator or leaders, answer
NOT_CONTROLLER, speak old API versions).
"""
from __future__ import annotations

import contextlib
import socket
import time
import uuid
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from kafka import KafkaConsumer as PeerConsumer
from kafka import OffsetAndMetadata as PeerOffsetAndMetadata
from kafka import TopicPartition as PeerTopicPartition
from kafka.admin import ConfigResource as PeerConfigResource
from kafka.admin import KafkaAdminClient as PeerAdmin
from kafka.admin import NewTopic as PeerNewTopic

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient
from fastmq.kafka.admin import (
    Admin, AlterConfigOp, ConfigResource, ConfigResourceType, ConfigSourceType, DeleteRecordsResult, GroupListing,
    NewPartitions, NewTopic,
)
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition
from tests.support.brokers import create_served_topic, on_all_brokers, on_brokers
from tests.support.scripted_kafka import ScriptedCluster
from tests.support.waiting import wait_for

TIMEOUT = 10.0
TANSU_NO_CREATE_PARTITIONS = "Tansu 0.6.0 does not implement CreatePartitions"
TANSU_NO_ALTER_CONFIGS = "Tansu 0.6.0 does not implement AlterConfigs"
TANSU_NO_OFFSET_DELETE = "Tansu 0.6.0 does not implement OffsetDelete"


def topic_name(prefix: str = "adm") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_known(admin, topics: list) -> None:
    """Create topics and wait until the brokers know them: Apache Kafka answers CreateTopics once its controller
    has them and spreads them to the brokers' metadata a moment later."""
    results = admin.create_topics(topics)
    admin.wait_for_topics(list(results), timeout=TIMEOUT)


def described_topic_configs(admin, name: str) -> dict:
    return admin.describe_configs([ConfigResource("topic", name)])[ConfigResourceType.TOPIC, name].entries


def eventually_configs(admin, name: str, holds) -> dict:
    """The topic's described configs once `holds(entries)` is true: an altered configuration reaches the
    broker answering DescribeConfigs a moment after the controller took it."""
    return wait_for(lambda: (lambda entries: holds(entries) and entries)(described_topic_configs(admin, name)),
                    TIMEOUT, message=f"the configuration of {name} changing")


@pytest.fixture(scope="module")
def admin(kafka_broker):
    with Admin(kafka_broker.bootstrap_servers, request_timeout_ms=TIMEOUT * 1000) as admin:
        yield admin


@pytest.fixture(scope="module")
def peer_admin(kafka_broker):
    client = PeerAdmin(bootstrap_servers=kafka_broker.bootstrap_servers, request_timeout_ms=int(TIMEOUT * 1000))
    yield client
    client.close()


@pytest.fixture(scope="module")
def confluent_admin(kafka_broker):
    return confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})


def confluent_topics(confluent_admin) -> set[str]:
    return set(confluent_admin.list_topics(timeout=TIMEOUT).topics)


# ---- cluster ----------------------------------------------------------------------------------------------

def test_describe_cluster_agrees_with_kafka_python(admin, peer_admin, kafka_broker):
    cluster = admin.describe_cluster()
    peer = peer_admin.describe_cluster()
    assert cluster.cluster_id == peer["cluster_id"]
    assert cluster.controller_id == peer["controller_id"]
    assert [(b.node_id, b.host, b.port) for b in cluster.brokers] == [
        (b["broker_id"], b["host"], b["port"]) for b in peer["brokers"]]
    assert [b.port for b in cluster.brokers] == [kafka_broker.port]
    assert cluster.controller_id in {b.node_id for b in cluster.brokers}


# ---- topics -----------------------------------------------------------------------------------------------

def test_created_topics_are_seen_by_the_peer_clients(admin, peer_admin, confluent_admin):
    name, other = topic_name(), topic_name()
    results = admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1), NewTopic(other, 1, 1)])
    assert set(results) == {name, other}
    assert all(r.error is None for r in results.values())
    assert (results[name].num_partitions, results[name].replication_factor) == (3, 1)
    assert results[name].topic_id is not None
    admin.wait_for_topics([name, other], timeout=TIMEOUT)
    assert {name, other} <= confluent_topics(confluent_admin)
    (described,) = peer_admin.describe_topics([name])
    assert described["error_code"] == 0 and len(described["partitions"]) == 3
    assert described["topic_id"] == str(results[name].topic_id)


def test_topics_created_by_the_peers_are_seen_by_admin(admin, peer_admin, confluent_admin):
    by_kafka_python, by_confluent = topic_name("kp"), topic_name("ck")
    peer_admin.create_topics([PeerNewTopic(by_kafka_python, 2, 1)])
    futures = confluent_admin.create_topics([confluent_kafka.admin.NewTopic(by_confluent, num_partitions=5,
                                                                            replication_factor=1)])
    futures[by_confluent].result(TIMEOUT)
    admin.wait_for_topics([by_kafka_python, by_confluent], timeout=TIMEOUT)
    assert {by_kafka_python, by_confluent} <= set(admin.list_topics())
    described = admin.describe_topics([by_kafka_python, by_confluent])
    assert [p.partition for p in described[by_kafka_python].partitions] == [0, 1]
    assert len(described[by_confluent].partitions) == 5
    broker_ids = {b.node_id for b in admin.describe_cluster().brokers}
    for info in described.values():
        for p in info.partitions:
            assert p.leader in broker_ids and p.replicas == (p.leader,) and p.isr == (p.leader,)


def test_topic_names_alone_take_the_broker_defaults(admin):
    name = topic_name()
    result = admin.create_topics([name])[name]
    assert result.error is None and result.num_partitions >= 1
    admin.wait_for_topics([name], timeout=TIMEOUT)     # a created topic reaches the brokers' metadata later
    assert len(admin.describe_topics([name])[name].partitions) == result.num_partitions


def test_creating_an_existing_topic_fails_for_that_topic_only(admin):
    existing, new = topic_name(), topic_name()
    create_known(admin, [existing])
    with pytest.raises(kerrors.TopicAlreadyExistsError, match=existing) as info:
        admin.create_topics([NewTopic(existing, 1, 1), NewTopic(new, 1, 1)])
    results = info.value.results
    assert results[new].error is None
    assert isinstance(results[existing].error, kerrors.TopicAlreadyExistsError)
    assert new not in str(info.value)
    admin.wait_for_topics([new], timeout=TIMEOUT)
    assert new in admin.list_topics()
    quiet = admin.create_topics([existing], raise_errors=False)
    assert isinstance(quiet[existing].error, kerrors.TopicAlreadyExistsError)


@pytest.mark.parametrize("topics, error", [
    ([NewTopic("dup-x", 1, 1), NewTopic("dup-x", 2, 1)], kerrors.InvalidRequestError),
    ([NewTopic("", 1, 1)], kerrors.InvalidTopicError),
    ([NewTopic("has space", 1, 1)], kerrors.InvalidTopicError),
    ([NewTopic("..", 1, 1)], kerrors.InvalidTopicError),
    ([NewTopic("x" * 250, 1, 1)], kerrors.InvalidTopicError),
    ([NewTopic("zero-partitions", 0, 1)], kerrors.InvalidPartitionsError),
    ([NewTopic("negative-partitions", -2, 1)], kerrors.InvalidPartitionsError),
    ([NewTopic("zero-replicas", 1, 0)], kerrors.InvalidReplicationFactorError),
    ([NewTopic("huge-replicas", 1, 40000)], kerrors.InvalidReplicationFactorError),
    ([NewTopic("str-partitions", "3", 1)], TypeError),
    ([NewTopic("int-config", 1, 1, topic_configs={"retention.ms": 1000})], TypeError),
    ([123], TypeError),
], ids=["duplicate", "empty-name", "space", "dot-dot", "long-name", "zero-partitions", "negative-partitions",
        "zero-replicas", "huge-replicas", "str-partitions", "int-config", "not-a-topic"])
def test_bad_topics_are_refused_before_anything_is_created(admin, topics, error):
    valid = topic_name("valid")
    with pytest.raises(error):
        admin.create_topics([NewTopic(valid, 1, 1), *topics])
    assert valid not in admin.list_topics()


def test_creating_no_topics_is_an_error(admin):
    with pytest.raises(ValueError, match="no topics"):
        admin.create_topics([])


@on_all_brokers(reason="Tansu 0.6.0 creates the topic although CreateTopics asks validate_only")
def test_validate_only_creates_nothing(admin):
    name = topic_name()
    result = admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)[name]
    assert result.error is None and result.num_partitions == 2
    assert name not in admin.list_topics()


@on_all_brokers(reason="Tansu 0.6.0 accepts a replication factor above its broker count")
def test_replication_factor_above_the_broker_count_fails(admin):
    with pytest.raises(kerrors.InvalidReplicationFactorError):
        admin.create_topics([NewTopic(topic_name(), 1, len(admin.describe_cluster().brokers) + 1)])


def test_list_and_describe_topics_never_create_topics(admin):
    missing = topic_name("missing")
    with pytest.raises(kerrors.UnknownTopicOrPartitionError, match=missing):
        admin.describe_topics([missing])
    assert missing not in admin.list_topics(include_internal=True)
    everything = admin.describe_topics()
    assert sorted(everything) == admin.list_topics(include_internal=True)
    with pytest.raises(TypeError):
        admin.describe_topics("one-name")


def test_wait_for_a_topic_that_never_comes_times_out(admin):
    started = time.monotonic()
    with pytest.raises(kerrors.KafkaTimeoutError, match="not ready"):
        admin.wait_for_topics([topic_name("never")], timeout=0.5)
    assert time.monotonic() - started < 5.0


def test_wait_for_topics_counts_a_lost_metadata_request_as_not_ready(proxied_kafka):
    """A Metadata request that gets no answer within the wait (a broker that stopped answering) is a pass that
    found the topics not ready, as kafka-python's wait_for_topics counts it: KafkaTimeoutError naming them, with
    what the request met as its cause (it raised RequestTimedOutError before)."""
    name = topic_name("lost")
    with Admin(bootstrap_servers=proxied_kafka.bootstrap_servers, request_timeout_ms=300) as admin:
        admin.create_topics([NewTopic(name, 1, 1)], timeout=TIMEOUT)
        admin.wait_for_topics([name], timeout=TIMEOUT)
        proxied_kafka.proxy.blackhole()
        try:
            with pytest.raises(kerrors.KafkaTimeoutError, match=f"not ready.*{name}") as caught:
                admin.wait_for_topics([name], timeout=1.0)
        finally:
            proxied_kafka.proxy.heal()
    assert getattr(caught.value.__cause__, "retriable", False)


def test_deleted_topics_are_gone_for_the_peers(admin, confluent_admin):
    name = topic_name("gone")
    futures = confluent_admin.create_topics([confluent_kafka.admin.NewTopic(name, num_partitions=1,
                                                                            replication_factor=1)])
    futures[name].result(TIMEOUT)
    admin.wait_for_topics([name], timeout=TIMEOUT)
    assert admin.delete_topics([name]) == {name: None}
    # Apache Kafka's brokers learn of a deletion a moment after the controller made it.
    wait_for(lambda: name not in admin.list_topics(), TIMEOUT, message=f"{name} gone from the metadata")
    assert name not in confluent_topics(confluent_admin)


def test_topics_can_be_deleted_by_topic_id(admin):
    name = topic_name("by-id")
    topic_id = admin.create_topics([NewTopic(name, 1, 1)])[name].topic_id
    assert admin.delete_topics([topic_id]) == {topic_id: None}
    wait_for(lambda: name not in admin.list_topics(), TIMEOUT, message=f"{name} gone from the metadata")


def test_deleting_unknown_or_repeated_topics_fails_clearly(admin):
    missing = topic_name("missing")
    with pytest.raises(kerrors.UnknownTopicOrPartitionError, match=missing) as info:
        admin.delete_topics([missing])
    assert isinstance(info.value.results[missing], kerrors.UnknownTopicOrPartitionError)
    assert isinstance(admin.delete_topics([missing], raise_errors=False)[missing],
                      kerrors.UnknownTopicOrPartitionError)
    kept = topic_name()
    create_known(admin, [kept])
    with pytest.raises(kerrors.InvalidRequestError, match="more than once"):
        admin.delete_topics([kept, kept])
    assert kept in admin.list_topics()
    with pytest.raises(TypeError):
        admin.delete_topics(kept)


# ---- partitions -------------------------------------------------------------------------------------------

@on_brokers("tansu")
def test_create_partitions_on_a_broker_without_it_names_the_api(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1)])
    with pytest.raises(kerrors.IncompatibleBrokerVersion, match="CreatePartitions") as info:
        admin.create_partitions({name: 2})
    assert isinstance(info.value, kerrors.UnsupportedVersionError)


@on_all_brokers(raises=kerrors.IncompatibleBrokerVersion, reason=TANSU_NO_CREATE_PARTITIONS)
def test_create_partitions_raises_the_count(admin, peer_admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1)])
    assert admin.create_partitions({name: NewPartitions(3)}) == {name: None}
    wait_for(lambda: len(admin.describe_topics([name])[name].partitions) == 3, TIMEOUT,
             message="the brokers knowing the new partitions")
    (described,) = peer_admin.describe_topics([name])
    assert len(described["partitions"]) == 3
    with pytest.raises(kerrors.InvalidPartitionsError):
        admin.create_partitions({name: 2})


def test_bad_partition_counts_are_refused_before_sending(admin):
    with pytest.raises(kerrors.InvalidPartitionsError):
        admin.create_partitions({"any-topic": 0})
    with pytest.raises(TypeError):
        admin.create_partitions({"any-topic": "3"})
    with pytest.raises(TypeError):
        admin.create_partitions(["any-topic"])


# ---- records ----------------------------------------------------------------------------------------------

@on_all_brokers(raises=kerrors.KafkaConnectionError,
                 reason="Tansu 0.6.0's memory storage panics on DeleteRecords (not yet implemented) and drops "
                        "the connection")
def test_delete_records_moves_the_log_start(admin, kafka_broker):
    name = topic_name()
    create_known(admin, [NewTopic(name, 2, 1)])
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(5):
        producer.produce(name, b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0
    results = admin.delete_records({TopicPartition(name, 0): 3, TopicPartition(name, 1): -1})
    assert results[TopicPartition(name, 0)].low_watermark == 3
    assert results[TopicPartition(name, 1)].low_watermark == 0
    consumer = PeerConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, enable_auto_commit=False)
    try:
        tp = PeerTopicPartition(name, 0)
        assert consumer.beginning_offsets([tp])[tp] == 3
    finally:
        consumer.close()


def test_delete_records_of_unknown_partitions_or_bad_offsets_fails_before_sending(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1)])
    with pytest.raises(kerrors.UnknownTopicOrPartitionError, match=f"{name}-5"):
        admin.delete_records({TopicPartition(name, 5): 0})
    with pytest.raises(kerrors.OffsetOutOfRangeError):
        admin.delete_records({TopicPartition(name, 0): -2})
    with pytest.raises(TypeError):
        admin.delete_records({(name, "0"): 1})


# ---- configurations ---------------------------------------------------------------------------------------

def test_topic_configs_set_at_creation_are_described(admin, peer_admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1, topic_configs={"retention.ms": "3600000"})])
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    resource = described[ConfigResourceType.TOPIC, name]
    assert resource.error is None
    assert resource.entries["retention.ms"].value == "3600000"
    with_synonyms = admin.describe_configs([ConfigResource("topic", name)], include_synonyms=True,
                                           include_documentation=True)
    assert with_synonyms[ConfigResourceType.TOPIC, name].entries["retention.ms"].value == "3600000"
    peer = peer_admin.describe_configs([PeerConfigResource("TOPIC", name)], config_filter="all")
    assert peer["topic"][name]["retention.ms"]["value"] == "3600000"


@on_all_brokers(raises=kerrors.KafkaConnectionError, reason=(
    "Tansu 0.6.0 cannot read DescribeConfigs v4 with configuration keys (StringWithoutLength) and drops the "
    "connection; kafka-python's identical request fails the same way"))
def test_describe_configs_of_chosen_keys(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1, topic_configs={"retention.ms": "1000", "max.message.bytes": "50000"})])
    only = admin.describe_configs([ConfigResource("topic", name, ["retention.ms"])])
    assert set(only[ConfigResourceType.TOPIC, name].entries) == {"retention.ms"}


@on_all_brokers(reason="Tansu 0.6.0 reports a topic's own settings as DEFAULT_CONFIG")
def test_topic_overrides_are_described_as_dynamic_topic_configs(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1, topic_configs={"retention.ms": "3600000"})])
    entry = admin.describe_configs([ConfigResource("topic", name)])[ConfigResourceType.TOPIC, name].entries[
        "retention.ms"]
    assert entry.source is ConfigSourceType.DYNAMIC_TOPIC_CONFIG and not entry.is_default


@on_all_brokers(reason="Tansu 0.6.0 describes only the settings made on a topic, no defaults")
def test_describe_configs_includes_the_defaults(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1)])
    entries = admin.describe_configs([ConfigResource("topic", name)])[ConfigResourceType.TOPIC, name].entries
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].is_default


@on_all_brokers(reason="Tansu 0.6.0 describes no broker configuration")
def test_describe_configs_of_a_broker(admin):
    broker = admin.describe_cluster().brokers[0].node_id
    entries = admin.describe_configs([ConfigResource("broker", str(broker))])[ConfigResourceType.BROKER,
                                                                                str(broker)].entries
    assert "log.retention.hours" in entries


@on_all_brokers(reason="Tansu 0.6.0 answers DescribeConfigs of an unknown topic without an error")
def test_describe_configs_of_an_unknown_topic_fails(admin):
    missing = topic_name("missing")
    with pytest.raises(kerrors.UnknownTopicOrPartitionError, match=missing):
        admin.describe_configs([ConfigResource("topic", missing)])


def test_bad_config_resources_are_refused(admin):
    with pytest.raises(ValueError, match="broker id"):
        admin.describe_configs([ConfigResource("broker", "not-a-number")])
    with pytest.raises(kerrors.BrokerNotAvailableError):
        admin.describe_configs([ConfigResource("broker", "987654")])
    with pytest.raises(kerrors.InvalidRequestError):
        admin.describe_configs([ConfigResource("topic", "t"), ConfigResource("topic", "t")])
    with pytest.raises(ValueError):
        ConfigResource("no-such-type", "t")
    with pytest.raises(TypeError):
        admin.describe_configs(["t"])


def test_incremental_alter_configs_sets_and_deletes(admin, peer_admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1)])
    resource = (ConfigResourceType.TOPIC, name)
    assert admin.incremental_alter_configs([ConfigResource("topic", name, {
        "retention.ms": "5000", "cleanup.policy": (AlterConfigOp.SET, "compact")})]) == {resource: None}
    entries = eventually_configs(admin, name, lambda entries: entries["retention.ms"].value == "5000")
    assert (entries["retention.ms"].value, entries["cleanup.policy"].value) == ("5000", "compact")
    peer = peer_admin.describe_configs([PeerConfigResource("TOPIC", name)], config_filter="all")
    assert peer["topic"][name]["retention.ms"]["value"] == "5000"
    admin.incremental_alter_configs([ConfigResource("topic", name, {"retention.ms": ("DELETE", None)})])
    entries = eventually_configs(admin, name, lambda entries: "retention.ms" not in entries
                                 or entries["retention.ms"].value != "5000")
    # Gone (Tansu describes only what is set), or back to its default (Apache Kafka describes everything).
    assert "retention.ms" not in entries or entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "compact"


@on_all_brokers(reason="Tansu 0.6.0 applies IncrementalAlterConfigs asked to validate only")
def test_incremental_alter_configs_validate_only_changes_nothing(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1, topic_configs={"retention.ms": "1000"})])
    admin.incremental_alter_configs([ConfigResource("topic", name, {"retention.ms": "2000"})], validate_only=True)
    entries = admin.describe_configs([ConfigResource("topic", name)])[ConfigResourceType.TOPIC, name].entries
    assert entries["retention.ms"].value == "1000"


@on_all_brokers(reason="Tansu 0.6.0 accepts IncrementalAlterConfigs of a topic it does not have")
def test_incremental_alter_configs_of_an_unknown_topic_fails(admin):
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        admin.incremental_alter_configs([ConfigResource("topic", topic_name("missing"), {"retention.ms": "1"})])


@on_brokers("tansu")
def test_alter_configs_on_a_broker_without_it_names_the_api(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1)])
    with pytest.raises(kerrors.IncompatibleBrokerVersion, match="AlterConfigs"):
        admin.alter_configs([ConfigResource("topic", name, {"retention.ms": "1000"})])
    with pytest.raises(ValueError, match="incremental_alter_configs"):
        admin.alter_configs([ConfigResource("topic", name, {"retention.ms": (AlterConfigOp.DELETE, None)})])
    with pytest.raises(ValueError):
        admin.incremental_alter_configs([ConfigResource("topic", name, {"retention.ms": ("REPLACE", "1")})])


@on_all_brokers(raises=kerrors.IncompatibleBrokerVersion, reason=TANSU_NO_ALTER_CONFIGS)
def test_alter_configs_replaces_the_whole_configuration(admin):
    name = topic_name()
    create_known(admin, [NewTopic(name, 1, 1, topic_configs={"retention.ms": "1000"})])
    admin.alter_configs([ConfigResource("topic", name, {"max.message.bytes": "50000"})])
    entries = eventually_configs(admin, name, lambda entries: entries["max.message.bytes"].value == "50000")
    assert entries["retention.ms"].is_default


# ---- groups -----------------------------------------------------------------------------------------------

def commit_with_kafka_python(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """Offsets committed by kafka-python's consumer, as a group without members (assign, not subscribe)."""
    consumer = PeerConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([PeerTopicPartition(*tp) for tp in offsets])
        consumer.commit({PeerTopicPartition(*tp): PeerOffsetAndMetadata(offset, "", -1)
                         for tp, offset in offsets.items()})
    finally:
        consumer.close()


@pytest.fixture
def committed_group(admin, kafka_broker):
    name, group = topic_name(), topic_name("group")
    create_known(admin, [NewTopic(name, 3, 1)])
    offsets = {TopicPartition(name, 0): 5, TopicPartition(name, 2): 7}
    commit_with_kafka_python(kafka_broker.bootstrap_servers, group, offsets)
    return group, name, offsets


def test_group_offsets_committed_by_kafka_python(admin, peer_admin, committed_group):
    group, name, offsets = committed_group
    listed = admin.list_group_offsets(group)
    assert {tp: o.offset for tp, o in listed.items()} == offsets
    peer = peer_admin.list_group_offsets(group)[group]
    assert {(tp.topic, tp.partition): o.offset for tp, o in peer.items()} == {tuple(tp): o for tp, o in offsets.items()}
    some = admin.list_group_offsets(group, [TopicPartition(name, 0), TopicPartition(name, 1)])
    assert {tp: (o.offset, o.leader_epoch) for tp, o in some.items()} == {
        TopicPartition(name, 0): (5, -1), TopicPartition(name, 1): (-1, -1)}
    assert admin.list_group_offsets(topic_name("nobody")) == {}


@on_all_brokers(reason="Tansu 0.6.0 does not store the metadata of committed offsets")
def test_committed_offset_metadata_is_kept(admin, kafka_broker):
    name, group = topic_name(), topic_name("group")
    create_known(admin, [NewTopic(name, 1, 1)])
    consumer = PeerConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([PeerTopicPartition(name, 0)])
        consumer.commit({PeerTopicPartition(name, 0): PeerOffsetAndMetadata(3, "checkpoint-1", -1)})
    finally:
        consumer.close()
    assert admin.list_group_offsets(group)[TopicPartition(name, 0)].metadata == "checkpoint-1"


def test_deleted_groups_lose_their_offsets(admin, committed_group):
    group, _, _ = committed_group
    assert admin.delete_groups([group]) == {group: None}
    assert admin.list_group_offsets(group) == {}


def test_group_ids_are_checked_before_sending(admin):
    with pytest.raises(kerrors.InvalidGroupIdError):
        admin.describe_groups([""])
    with pytest.raises(kerrors.InvalidRequestError, match="more than once"):
        admin.delete_groups(["g", "g"])
    with pytest.raises(TypeError):
        admin.describe_groups("one-group")
    with pytest.raises(TypeError):
        admin.delete_groups([7])


@on_brokers("tansu")
def test_delete_group_offsets_on_a_broker_without_it_names_the_api(admin, committed_group):
    group, name, _ = committed_group
    with pytest.raises(kerrors.IncompatibleBrokerVersion, match="OffsetDelete"):
        admin.delete_group_offsets(group, [TopicPartition(name, 0)])


@on_all_brokers(raises=kerrors.IncompatibleBrokerVersion, reason=TANSU_NO_OFFSET_DELETE)
def test_delete_group_offsets_forgets_those_partitions(admin, committed_group):
    group, name, offsets = committed_group
    assert admin.delete_group_offsets(group, [TopicPartition(name, 0)]) == {TopicPartition(name, 0): None}
    assert admin.list_group_offsets(group) == {TopicPartition(name, 2): OffsetAndMetadata(7, "", -1)}


@contextlib.contextmanager
def joined_group(admin, bootstrap: str):
    """A consumer group with one kafka-python member that joined and holds its partitions (about 3 s with
    Tansu, which holds the second JoinGroup for half the session timeout)."""
    name, group = topic_name(), topic_name("group")
    create_served_topic(bootstrap, name, 2)
    consumer = PeerConsumer(name, bootstrap_servers=bootstrap, group_id=group, client_id="admin-test-member",
                            session_timeout_ms=6000, heartbeat_interval_ms=1000, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 30.0
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.assignment(), "the kafka-python member never got its partitions"
        yield group, name, consumer
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def active_group(admin, kafka_broker):
    """Shared by the tests that only read the group."""
    with joined_group(admin, kafka_broker.bootstrap_servers) as group:
        yield group


@pytest.fixture
def own_active_group(admin, kafka_broker):
    """For tests that change the group."""
    with joined_group(admin, kafka_broker.bootstrap_servers) as group:
        yield group


def test_an_active_group_is_described_and_listed(admin, active_group):
    group, _, _ = active_group
    described = admin.describe_groups([group])[group]
    assert described.error is None
    assert (described.state, described.protocol_type) == ("Stable", "consumer")
    assert len(described.members) == 1 and described.members[0].member_id


def test_groups_with_committed_offsets_are_listed(admin, committed_group):
    group, _, _ = committed_group
    listing = [g for g in admin.list_groups() if g.group_id == group]
    # A group that only committed offsets never had a protocol: Apache Kafka lists its type as "", Tansu as
    # "consumer".
    assert len(listing) == 1 and listing[0].protocol_type in ("", "consumer")


@on_all_brokers(reason="Tansu 0.6.0 lists only groups that committed offsets")
def test_an_active_group_without_commits_is_listed(admin, active_group):
    group, _, _ = active_group
    assert group in {g.group_id for g in admin.list_groups()}


@on_all_brokers(reason="Tansu 0.6.0 describes members without client id, host, metadata or "
                                     "assignment, and the group without its assignor")
def test_describe_groups_shows_member_details(admin, active_group):
    group, _, _ = active_group
    described = admin.describe_groups([group])[group]
    member = described.members[0]
    assert described.protocol in ("range", "roundrobin", "sticky", "cooperative-sticky")
    assert member.client_id == "admin-test-member" and member.client_host
    assert member.metadata and member.assignment


@on_all_brokers(reason="Tansu 0.6.0 lists every group in state 'Unknown'")
def test_list_groups_shows_and_filters_the_state(admin, own_active_group):
    group, name, consumer = own_active_group
    consumer.commit({PeerTopicPartition(name, 0): PeerOffsetAndMetadata(0, "", -1)})  # Tansu lists it then
    assert next(g for g in admin.list_groups() if g.group_id == group).state == "Stable"
    assert group in {g.group_id for g in admin.list_groups(states=["Stable"])}
    assert group not in {g.group_id for g in admin.list_groups(states=["Empty"])}


@on_all_brokers(reason="Tansu 0.6.0 deletes a group that still has members")
def test_delete_groups_refuses_a_group_with_members(admin, own_active_group):
    group, _, _ = own_active_group
    with pytest.raises(kerrors.NonEmptyGroupError):
        admin.delete_groups([group])


@on_all_brokers(reason="Tansu 0.6.0 deletes (and describes) groups that do not exist")
def test_unknown_groups_are_reported(admin):
    missing = topic_name("no-group")
    try:
        state = admin.describe_groups([missing])[missing].state
    except kerrors.GroupIdNotFoundError:
        state = "Dead"      # Kafka 4 answers DescribeGroups v6 on an unknown group with GROUP_ID_NOT_FOUND
    assert state == "Dead"
    with pytest.raises(kerrors.GroupIdNotFoundError):
        admin.delete_groups([missing])


# ---- the admin itself -------------------------------------------------------------------------------------

def test_closed_admin_and_bad_arguments(kafka_broker):
    with pytest.raises(kerrors.KafkaConfigurationError, match="no_such_option"):
        Admin(kafka_broker.bootstrap_servers, no_such_option=1)
    admin = Admin(kafka_broker.bootstrap_servers)
    with pytest.raises(ValueError, match="timeout"):
        admin.list_topics(timeout=0)
    admin.close()
    admin.close()
    with pytest.raises(kerrors.IllegalStateError):
        admin.list_topics()


def test_an_admin_can_share_a_client(kafka_broker):
    with KafkaClient(bootstrap_servers=kafka_broker.bootstrap_servers) as client:
        with pytest.raises(kerrors.KafkaConfigurationError, match="request_timeout_ms"):
            Admin(client=client, request_timeout_ms=1000)
        admin = Admin(client=client)
        assert admin.describe_cluster().brokers
        admin.close()
        assert client.request(None, kp.MetadataRequest(topics=[]), TIMEOUT).brokers   # still open


@contextlib.contextmanager
def closed_port():
    """A loopback port with nothing listening (bound but not listening, so that nobody else takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_unreachable_cluster_times_out_within_the_timeout():
    with closed_port() as port, Admin(f"127.0.0.1:{port}") as admin:
        started = time.monotonic()
        with pytest.raises(kerrors.KafkaTimeoutError):
            admin.list_topics(timeout=1.0)
        assert time.monotonic() - started < 5.0


# ---- routing and retries, against scripted brokers ----------------------------------------------------------

@pytest.fixture
def scripted(scripted_loop):
    clusters = []

    def make(**kwargs: Any) -> tuple[ScriptedCluster, Admin]:
        cluster = ScriptedCluster(scripted_loop, **kwargs)
        admin = Admin(cluster.bootstrap_servers, retry_backoff_ms=20, request_timeout_ms=5000)
        clusters.append((cluster, admin))
        return cluster, admin

    yield make
    for cluster, admin in clusters:
        admin.close()
        cluster.close()


def _created(request: Any) -> list[str]:
    return [t.name for t in request.topics]


def test_items_refused_by_a_former_controller_go_to_the_new_one(scripted):
    cluster, admin = scripted()
    CT = kp.CreateTopicsResponse

    def create_topics(node_id, request, version):
        results = []
        for t in request.topics:
            moved = node_id == 1 and t.name == "b"
            if moved:
                cluster.controller = 2   # the controller moved while node 1 handled "a"
            results.append(CT.CreatableTopicResult(name=t.name, error_code=kerrors.NotControllerError.errno if moved
                                                   else 0, num_partitions=t.num_partitions, replication_factor=1))
        return CT(topics=results)

    cluster.handlers[kp.ApiKey.CREATE_TOPICS] = create_topics
    results = admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 2, 1)])
    assert {name: r.error for name, r in results.items()} == {"a": None, "b": None}
    assert results["b"].num_partitions == 2
    assert [(node, _created(r)) for node, r in cluster.calls("CreateTopics")] == [(1, ["a", "b"]), (2, ["b"])]


def test_a_controller_that_never_settles_fails_within_the_timeout(scripted):
    cluster, admin = scripted()
    cluster.handlers[kp.ApiKey.DELETE_TOPICS] = lambda node_id, request, version: kp.DeleteTopicsResponse(
        responses=[kp.DeleteTopicsResponse.DeletableTopicResult(name=t.name,
                                                                error_code=kerrors.NotControllerError.errno)
                   for t in request.topics])
    admin.list_topics()   # connected first, so that the timeout goes to the retries
    started = time.monotonic()
    with pytest.raises(kerrors.NotControllerError, match="'gone'"):
        admin.delete_topics(["gone"], timeout=1.0)
    assert time.monotonic() - started < 5.0
    assert len(cluster.calls("DeleteTopics")) >= 2


def test_a_coordinator_that_stays_busy_is_reported_after_the_timeout(scripted):
    cluster, admin = scripted()
    FC, DG = kp.FindCoordinatorResponse, kp.DescribeGroupsResponse
    port = cluster.listeners[1].address[1]
    cluster.handlers[kp.ApiKey.FIND_COORDINATOR] = lambda node_id, request, version: FC(coordinators=[
        FC.Coordinator(key=k, node_id=1, host="127.0.0.1", port=port) for k in request.coordinator_keys])
    cluster.handlers[kp.ApiKey.DESCRIBE_GROUPS] = lambda node_id, request, version: DG(groups=[
        DG.DescribedGroup(group_id=g, error_code=kerrors.CoordinatorLoadInProgressError.errno)
        for g in request.groups])
    admin.list_topics()
    with pytest.raises(kerrors.CoordinatorLoadInProgressError, match="'busy'"):
        admin.describe_groups(["busy"], timeout=1.0)
    assert len(cluster.calls("DescribeGroups")) >= 2
    quiet = admin.describe_groups(["busy"], timeout=0.5, raise_errors=False)
    assert isinstance(quiet["busy"].error, kerrors.CoordinatorLoadInProgressError)


def test_group_requests_follow_the_coordinator(scripted):
    cluster, admin = scripted()
    FC, DG = kp.FindCoordinatorResponse, kp.DescribeGroupsResponse
    coordinator = {"node": None}
    described = []

    def find_coordinator(node_id, request, version):
        if coordinator["node"] is None:   # the first lookup: the coordinator is still being elected
            coordinator["node"] = 2
            return FC(coordinators=[FC.Coordinator(key=k, error_code=kerrors.CoordinatorNotAvailableError.errno)
                                    for k in request.coordinator_keys])
        port = cluster.listeners[coordinator["node"]].address[1]
        return FC(coordinators=[FC.Coordinator(key=k, node_id=coordinator["node"], host="127.0.0.1", port=port)
                                for k in request.coordinator_keys])

    def describe_groups(node_id, request, version):
        described.append(node_id)
        if len(described) == 1:
            code = kerrors.CoordinatorLoadInProgressError.errno
        elif len(described) == 2:
            code, coordinator["node"] = kerrors.NotCoordinatorError.errno, 1
        else:
            code = 0
        return DG(groups=[DG.DescribedGroup(group_id=g, error_code=code, group_state="Stable" if not code else "",
                                            protocol_type="consumer", protocol_data="range")
                          for g in request.groups])

    cluster.handlers[kp.ApiKey.FIND_COORDINATOR] = find_coordinator
    cluster.handlers[kp.ApiKey.DESCRIBE_GROUPS] = describe_groups
    group = admin.describe_groups(["g"])["g"]
    assert (group.error, group.state, group.protocol) == (None, "Stable", "range")
    assert described == [2, 2, 1]
    assert len(cluster.calls("FindCoordinator")) == 4


def test_delete_records_follows_moved_leaders(scripted):
    cluster, admin = scripted()
    cluster.topics["t"] = [1, 2]
    DR = kp.DeleteRecordsResponse

    def delete_records(node_id, request, version):
        partitions = []
        for p in request.topics[0].partitions:
            if node_id == 1:
                cluster.topics["t"] = [2, 2]   # partition 0's leadership moved to node 2 before this arrived
                partitions.append(DR.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1,
                    error_code=kerrors.NotLeaderForPartitionError.errno))
            else:
                partitions.append(DR.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                                  low_watermark=p.offset))
        return DR(topics=[DR.DeleteRecordsTopicResult(name="t", partitions=partitions)])

    cluster.handlers[kp.ApiKey.DELETE_RECORDS] = delete_records
    results = admin.delete_records({TopicPartition("t", 0): 10, TopicPartition("t", 1): 20})
    assert results == {TopicPartition("t", 0): DeleteRecordsResult(10, None),
                       TopicPartition("t", 1): DeleteRecordsResult(20, None)}
    calls = [(node, [(p.partition_index, p.offset) for t in r.topics for p in t.partitions])
             for node, r in cluster.calls("DeleteRecords")]
    assert sorted(calls[:2]) == [(1, [(0, 10)]), (2, [(1, 20)])]
    assert calls[2:] == [(2, [(0, 10)])]


def test_broker_configs_and_group_listings_go_to_each_broker(scripted):
    cluster, admin = scripted()
    DC, LG = kp.DescribeConfigsResponse, kp.ListGroupsResponse
    cluster.handlers[kp.ApiKey.DESCRIBE_CONFIGS] = lambda node_id, request, version: DC(results=[
        DC.DescribeConfigsResult(resource_type=r.resource_type, resource_name=r.resource_name, configs=[
            DC.DescribeConfigsResourceResult(name="broker.id", value=str(node_id), read_only=True, config_source=4)])
        for r in request.resources])
    cluster.handlers[kp.ApiKey.LIST_GROUPS] = lambda node_id, request, version: LG(groups=[
        LG.ListedGroup(group_id=f"group-of-{node_id}", protocol_type="consumer", group_state="Empty")])
    described = admin.describe_configs([ConfigResource("broker", "2"), ConfigResource("broker", "1")])
    assert described[ConfigResourceType.BROKER, "2"].entries["broker.id"].value == "2"
    assert described[ConfigResourceType.BROKER, "1"].entries["broker.id"].source is \
        ConfigSourceType.STATIC_BROKER_CONFIG
    assert sorted(node for node, _ in cluster.calls("DescribeConfigs")) == [1, 2]
    assert sorted(g.group_id for g in admin.list_groups()) == ["group-of-1", "group-of-2"]
    assert {g.state for g in admin.list_groups()} == {"Empty"}


def test_old_api_versions_are_spoken_where_a_broker_has_only_those(scripted):
    """A broker of about Kafka 2.2: FindCoordinator v2 (one key per request), OffsetFetch v5 (no `groups`),
    DeleteTopics v3 (topic names), DescribeConfigs v0 (no config source), ListGroups v2 (no state), no
    DescribeCluster."""
    cluster, admin = scripted(max_versions={
        kp.ApiKey.FIND_COORDINATOR: 2, kp.ApiKey.OFFSET_FETCH: 5, kp.ApiKey.DELETE_TOPICS: 3,
        kp.ApiKey.DESCRIBE_CONFIGS: 0, kp.ApiKey.DESCRIBE_GROUPS: 2, kp.ApiKey.DESCRIBE_CLUSTER: None,
        kp.ApiKey.LIST_GROUPS: 2})
    FC, OF, DT, DC, DG = (kp.FindCoordinatorResponse, kp.OffsetFetchResponse, kp.DeleteTopicsResponse,
                          kp.DescribeConfigsResponse, kp.DescribeGroupsResponse)
    port = cluster.listeners[2].address[1]
    cluster.handlers[kp.ApiKey.FIND_COORDINATOR] = lambda node_id, request, version: FC(
        node_id=2, host="127.0.0.1", port=port)
    cluster.handlers[kp.ApiKey.DESCRIBE_GROUPS] = lambda node_id, request, version: DG(groups=[
        DG.DescribedGroup(group_id=g, group_state="Empty") for g in request.groups])
    cluster.handlers[kp.ApiKey.OFFSET_FETCH] = lambda node_id, request, version: OF(topics=[
        OF.OffsetFetchResponseTopic(name=t.name, partitions=[
            OF.OffsetFetchResponsePartition(partition_index=i, committed_offset=100 + i, metadata="m")
            for i in t.partition_indexes]) for t in request.topics])
    cluster.handlers[kp.ApiKey.DELETE_TOPICS] = lambda node_id, request, version: DT(responses=[
        DT.DeletableTopicResult(name=name) for name in request.topic_names])
    cluster.handlers[kp.ApiKey.DESCRIBE_CONFIGS] = lambda node_id, request, version: DC(results=[
        DC.DescribeConfigsResult(resource_type=2, resource_name=r.resource_name, configs=[
            DC.DescribeConfigsResourceResult(name="retention.ms", value="1", is_default=False),
            DC.DescribeConfigsResourceResult(name="cleanup.policy", value="delete", is_default=True)])
        for r in request.resources])

    assert {g: d.state for g, d in admin.describe_groups(["g1", "g2"]).items()} == {"g1": "Empty", "g2": "Empty"}
    assert sorted(r.key for _, r in cluster.calls("FindCoordinator")) == ["g1", "g2"]
    assert {node for node, _ in cluster.calls("DescribeGroups")} == {2}
    offsets = admin.list_group_offsets("g1", [TopicPartition("t", 0), TopicPartition("t", 3)])
    assert offsets == {TopicPartition("t", 0): OffsetAndMetadata(100, "m", -1),
                       TopicPartition("t", 3): OffsetAndMetadata(103, "m", -1)}
    assert cluster.calls("OffsetFetch")[0][1].group_id == "g1"
    assert admin.delete_topics(["x", "y"]) == {"x": None, "y": None}
    entries = admin.describe_configs([ConfigResource("topic", "x")])[ConfigResourceType.TOPIC, "x"].entries
    assert entries["retention.ms"].source is ConfigSourceType.DYNAMIC_TOPIC_CONFIG
    assert entries["cleanup.policy"].source is ConfigSourceType.DEFAULT_CONFIG
    cluster_description = admin.describe_cluster()
    assert (cluster_description.cluster_id, cluster_description.controller_id) == ("scripted", 1)
    assert sorted(b.node_id for b in cluster_description.brokers) == [1, 2]
    LG = kp.ListGroupsResponse
    cluster.handlers[kp.ApiKey.LIST_GROUPS] = lambda node_id, request, version: LG(groups=[
        LG.ListedGroup(group_id="g1", protocol_type="consumer")] if node_id == 2 else [])
    assert admin.list_groups() == [GroupListing("g1", "consumer", None, None)]
    with pytest.raises(kerrors.IncompatibleBrokerVersion, match="state"):
        admin.list_groups(states=["Stable"])


def test_a_broker_that_leaves_items_out_gets_them_reported(scripted):
    """Tansu's CreatePartitions answered nothing at all; any item missing from an answer is an error."""
    cluster, admin = scripted()
    cluster.handlers[kp.ApiKey.CREATE_PARTITIONS] = lambda node_id, request, version: kp.CreatePartitionsResponse()
    with pytest.raises(kerrors.UnknownError, match="does not mention it"):
        admin.create_partitions({"t": 3})
    results = admin.create_partitions({"t": 3}, raise_errors=False)
    assert isinstance(results["t"], kerrors.UnknownError)


@on_brokers("embedded", "apache")
def test_offsets_altered_by_admin_are_what_kafka_python_reads(admin, peer_admin):
    name, group = topic_name(), topic_name("group")
    create_known(admin, [NewTopic(name, 2, 1)])
    altered = admin.alter_group_offsets(group, {TopicPartition(name, 0): OffsetAndMetadata(0, "by-admin", -1),
                                                TopicPartition(name, 1): 0})
    assert altered == {TopicPartition(name, 0): None, TopicPartition(name, 1): None}
    assert {tuple(tp): (meta.offset, meta.metadata) for tp, meta in peer_admin.list_group_offsets(group)[group].items()
            } == {(name, 0): (0, "by-admin"), (name, 1): (0, "")}
    with pytest.raises(kerrors.InvalidGroupIdError):
        admin.alter_group_offsets("", {TopicPartition(name, 0): 0})


@on_brokers("embedded", "apache")
def test_removed_members_are_named_as_asked(admin, committed_group):
    group, _, _ = committed_group
    results = admin.remove_group_members(group, [(None, "nobody"), ("no-such-member", None)], raise_errors=False)
    assert {key: type(error) for key, error in results.items()} == {
        "nobody": kerrors.UnknownMemberIdError, "no-such-member": kerrors.UnknownMemberIdError}
    with pytest.raises(kerrors.UnknownMemberIdError):
        admin.remove_group_members(group, [(None, "nobody")])
