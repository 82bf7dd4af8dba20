"""kafka-python 3.x's KafkaAdminClient methods for ACLs, SCRAM credentials, reassignments, log directories,
features, paged partition descriptions and hanging transactions: fastmq.kafka.compat_admin against kafka-python's
own client on the same Apache Kafka, and fastmq's native Admin beneath it.

ACLs need a broker with an authorizer and moving replicas between log directories a broker with two: one extra
single-node Apache Kafka for this module (`authorizing_kafka`) has both. The rest runs on the session's Apache
Kafka (which has SCRAM listeners: a user created here logs in). fastmq's embedded broker implements none of these
APIs: each method fails there with IncompatibleBrokerVersion before anything is sent, and the client goes on.
"""
from __future__ import annotations

import uuid

import kafka.admin
import kafka.errors
import pytest
from kafka import TopicPartition as PeerTopicPartition

from fastmq.kafka import compat_admin
from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import Admin
from fastmq.kafka.compat import KafkaProducer
from fastmq.kafka.compat_admin import (
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, AbortTransactionSpec, KafkaAdminClient,
    NewTopic, ResourcePattern, ResourcePatternFilter, ResourceType, ScramMechanism, UpdateFeatureType,
    UserScramCredentialDeletion, UserScramCredentialUpsertion,
)
from fastmq.kafka.structs import TopicPartition, TopicPartitionReplica
from tests.support.apache_kafka import KafkaCluster
from tests.support.brokers import create_served_topic
from tests.support.kafka_python_oracle import same_error
from tests.support.servers import SERVER_LOGS
from tests.support.waiting import wait_for

TIMEOUT_MS = 10000
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              # The tests connect over PLAINTEXT, as ANONYMOUS.
              "super.users": "User:ANONYMOUS"}


def topic_name(prefix: str = "cops") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def authorizing_kafka(tmp_path_factory):
    """One Apache Kafka node with the KRaft authorizer (StandardAuthorizer) and two log directories."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("apache-kafka-authorizer"), 1, properties=AUTHORIZER, log_dirs=2,
                           heap="384m")
    with cluster:
        SERVER_LOGS["authorizing_kafka"] = cluster.log_tails
        try:
            yield cluster
        finally:
            del SERVER_LOGS["authorizing_kafka"]


def admin_clients(bootstrap_servers: str):
    """fastmq's compat KafkaAdminClient and kafka-python's, on one broker (a fixture's body)."""
    ours = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=TIMEOUT_MS)
    theirs = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=TIMEOUT_MS)
    try:
        yield ours, theirs
    finally:
        ours.close()
        theirs.close()


@pytest.fixture(scope="module")
def on_authorizer(authorizing_kafka):
    yield from admin_clients(authorizing_kafka.bootstrap_servers)


@pytest.fixture(scope="module")
def on_apache(apache_kafka):
    yield from admin_clients(apache_kafka.bootstrap_servers)


def names(error_map: dict) -> dict:
    """{key: error class name or None}: fastmq's and kafka-python's classes compare by name."""
    return {key: None if error is None else error.__name__ for key, error in error_map.items()}


# ---- ACLs ------------------------------------------------------------------------------------------------

def test_acls_are_created_described_and_deleted_as_kafka_python_does(on_authorizer):
    ours, theirs = on_authorizer
    topic = topic_name()
    literal = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, topic))
    # kafka-python's own ACL objects are taken too.
    prefixed = kafka.admin.ACL("User:bob", "127.0.0.1", kafka.admin.ACLOperation.WRITE,
                               kafka.admin.ACLPermissionType.DENY, kafka.admin.ResourcePattern(
                                   kafka.admin.ResourceType.TOPIC, topic[:-2],
                                   kafka.admin.ACLResourcePatternType.PREFIXED))
    assert ours.create_acls([literal, prefixed]) == {"succeeded": [literal, prefixed], "failed": []}
    matching = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                         ResourcePatternFilter(ResourceType.TOPIC, topic, ACLResourcePatternType.MATCH))
    peer_matching = kafka.admin.ACLFilter(None, None, kafka.admin.ACLOperation.ANY, kafka.admin.ACLPermissionType.ANY,
                                          kafka.admin.ResourcePatternFilter(kafka.admin.ResourceType.TOPIC, topic,
                                                                            kafka.admin.ACLResourcePatternType.MATCH))
    # The broker's authorizer learns of new ACLs from the metadata log a moment after CreateAcls answered.
    found, error = wait_for(lambda: (lambda answer: answer if len(answer[0]) == 2 else None)(
        ours.describe_acls(matching)), message="both ACLs described")
    assert error is kerrors.NoError and set(found) == {literal, prefixed}
    peer_found, peer_error = theirs.describe_acls(peer_matching)
    assert set(found) == set(peer_found) and peer_error is kafka.errors.NoError
    assert all(isinstance(acl, ACL) and isinstance(acl.resource_pattern.pattern_type, ACLResourcePatternType)
               for acl in found)

    ((given, deleted, delete_error),) = ours.delete_acls([matching])
    assert given is matching and set(deleted) == {literal, prefixed} and delete_error is kerrors.NoError
    wait_for(lambda: ours.describe_acls(matching)[0] == [], message="the ACLs gone")
    assert theirs.describe_acls(peer_matching)[0] == []
    ((_, none_deleted, _),) = theirs.delete_acls([peer_matching])
    assert none_deleted == []


def test_acl_input_is_checked_as_kafka_python_checks_it(on_authorizer):
    ours, theirs = on_authorizer
    any_topic = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))
    peer_any_topic = kafka.admin.ACLFilter(None, None, kafka.admin.ACLOperation.ANY, kafka.admin.ACLPermissionType.ANY,
                                           kafka.admin.ResourcePatternFilter(kafka.admin.ResourceType.TOPIC, None,
                                                                             kafka.admin.ACLResourcePatternType.ANY))
    # A filter is not an ACL; kafka-python's types and fastmq's refuse the same values.
    same_error(lambda: ours.create_acls([any_topic]), lambda: theirs.create_acls([peer_any_topic]))
    same_error(lambda: ours.delete_acls(["not a filter"]), lambda: theirs.delete_acls(["not a filter"]))
    for make in (lambda m: m.ACL("User:a", "*", m.ACLOperation.ANY, m.ACLPermissionType.ALLOW,
                                 m.ResourcePattern(m.ResourceType.TOPIC, "t")),
                 lambda m: m.ResourcePattern(m.ResourceType.ANY, "t"),
                 lambda m: m.ResourcePattern(m.ResourceType.TOPIC, "t", m.ACLResourcePatternType.MATCH),
                 lambda m: m.ACLFilter(None, None, 3, m.ACLPermissionType.ANY,
                                       m.ResourcePatternFilter(m.ResourceType.TOPIC, None, m.ACLResourcePatternType.ANY))):
        assert same_error(lambda: make(compat_admin), lambda: make(kafka.admin)) is kerrors.IllegalArgumentError


def test_native_admin_answers_each_acl(authorizing_kafka):
    topic = topic_name()
    good = ACL("User:carol", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
               ResourcePattern(ResourceType.GROUP, topic))
    unparsable = ACL("carol-without-a-type", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                     ResourcePattern(ResourceType.GROUP, topic))
    with Admin(authorizing_kafka.bootstrap_servers) as admin:
        created, refused = admin.create_acls([good, unparsable])
        assert created is None and isinstance(refused, kerrors.BrokerResponseError)
        groups = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.GROUP, topic, ACLResourcePatternType.LITERAL))
        assert wait_for(lambda: admin.describe_acls(groups)) == [good]
        assert admin.delete_acls([groups]) == [(groups, [good], None)]


def test_acls_without_an_authorizer_fail_as_in_kafka_python(on_apache):
    ours, theirs = on_apache
    error = same_error(
        lambda: ours.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(
            ResourceType.ANY, None, ACLResourcePatternType.ANY))),
        lambda: theirs.describe_acls(kafka.admin.ACLFilter(
            None, None, kafka.admin.ACLOperation.ANY, kafka.admin.ACLPermissionType.ANY,
            kafka.admin.ResourcePatternFilter(kafka.admin.ResourceType.ANY, None,
                                              kafka.admin.ACLResourcePatternType.ANY))))
    assert error is kerrors.SecurityDisabledError


# ---- SCRAM credentials --------------------------------------------------------------------------------------

def test_a_scram_user_is_created_logs_in_and_is_removed(on_apache, apache_kafka):
    ours, theirs = on_apache
    user, password = f"kadmin-{uuid.uuid4().hex[:8]}", "kadmin-secret"
    upsert = UserScramCredentialUpsertion(user, "SCRAM-SHA-512", password, iterations=8192)
    assert ours.alter_user_scram_credentials([upsert]) == {user: None}
    described = wait_for(lambda: (lambda d: d if d[user]["error"] is None else None)(
        ours.describe_user_scram_credentials([user])), message=f"{user} described")
    assert described == {user: {"error": None, "credential_infos": [
        {"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 8192}]}}
    assert described == theirs.describe_user_scram_credentials([user])
    assert user in ours.describe_user_scram_credentials()

    def logs_in() -> bool:
        try:
            with Admin(apache_kafka.listener("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user, sasl_plain_password=password,
                       request_timeout_ms=3000) as admin:
                return isinstance(admin.list_topics(timeout=3), list)
        except kerrors.KafkaError:
            return False
    wait_for(logs_in, timeout=20, interval=0.2, message=f"{user} logs in with SCRAM-SHA-512")

    # kafka-python's own deletion object is taken too; deleting what is not there is the user's error.
    assert ours.alter_user_scram_credentials([kafka.admin.UserScramCredentialDeletion(user, "SCRAM-SHA-512")]) == {
        user: None}
    gone = wait_for(lambda: (lambda d: d if d[user]["error"] else None)(ours.describe_user_scram_credentials([user])))
    assert gone == theirs.describe_user_scram_credentials([user])
    assert gone[user]["credential_infos"] == []
    again = ours.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])
    assert isinstance(again[user], str) and again == theirs.alter_user_scram_credentials(
        [kafka.admin.UserScramCredentialDeletion(user, "SCRAM-SHA-512")])
    with pytest.raises(kerrors.IllegalArgumentError):
        ours.alter_user_scram_credentials(["not an alteration"])
    with pytest.raises(kerrors.IllegalArgumentError):
        UserScramCredentialUpsertion(user, "UNKNOWN", password)


def test_scram_salted_password_is_pbkdf2_as_in_kafka_python():
    mine = UserScramCredentialUpsertion("u", "scram-sha-256", "pw", iterations=4096, salt=b"salt")
    peer = kafka.admin.UserScramCredentialUpsertion("u", "scram-sha-256", "pw", iterations=4096, salt=b"salt")
    assert (mine.mechanism, mine.salted_password) == (peer.mechanism, peer.salted_password)


# ---- partitions, replicas, features ---------------------------------------------------------------------------

def test_topic_partitions_are_described_page_by_page(on_apache, apache_kafka):
    ours, theirs = on_apache
    topic = topic_name()
    create_served_topic(apache_kafka.bootstrap_servers, topic, 3)
    first = ours.describe_topic_partitions([topic], response_partition_limit=2)
    assert first == theirs.describe_topic_partitions([topic], response_partition_limit=2)
    (described,) = first["topics"]
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1]
    assert described["error_code"] == 0 and isinstance(described["topic_id"], uuid.UUID)
    assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}
    rest = ours.describe_topic_partitions([topic], cursor=first["next_cursor"])
    assert rest == theirs.describe_topic_partitions([topic], cursor=first["next_cursor"])
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2] and rest["next_cursor"] is None
    unknown = topic_name("unknown")
    missing = ours.describe_topic_partitions([unknown])
    assert missing == theirs.describe_topic_partitions([unknown])
    assert missing["topics"][0]["error_code"] == kerrors.UnknownTopicOrPartitionError.errno


def test_partition_reassignments_answer_per_partition_as_in_kafka_python(on_apache, apache_kafka):
    ours, theirs = on_apache
    topic = topic_name()
    create_served_topic(apache_kafka.bootstrap_servers, topic, 3)
    broker = apache_kafka.nodes[0].node_id
    assert ours.alter_partition_reassignments({TopicPartition(topic, 0): [broker]}) == {TopicPartition(topic, 0): None}
    for request in ({TopicPartition(topic, 1): [broker + 40]}, {TopicPartition(topic, 2): None}):
        mine = ours.alter_partition_reassignments(request)
        peer = theirs.alter_partition_reassignments({PeerTopicPartition(*tp): r for tp, r in request.items()})
        assert names(mine) == names(peer) and all(error is not None for error in mine.values())
    assert names(ours.alter_partition_reassignments({TopicPartition(topic, 2): None})) == {
        TopicPartition(topic, 2): "NoReassignmentInProgressError"}
    with pytest.raises(ValueError):
        ours.alter_partition_reassignments({TopicPartition(topic, 0): []})
    wait_for(lambda: ours.list_partition_reassignments([TopicPartition(topic, 0)]) == {},
             message="the no-op reassignment done")


def test_feature_updates_are_validated_on_the_controller(on_apache):
    ours, theirs = on_apache
    level = ours.describe_features()["metadata.version"]["finalized"][1]
    assert ours.update_features({"metadata.version": level}, validate_only=True) == {"metadata.version": "OK"}
    assert ours.update_features({"metadata.version": (UpdateFeatureType.SAFE_DOWNGRADE, level)},
                                validate_only=True) == {"metadata.version": "OK"}
    assert theirs.update_features({"metadata.version": level}, validate_only=True) == {"metadata.version": "OK"}
    same_error(lambda: ours.update_features({"fastmq.no.such.feature": 1}, validate_only=True),
               lambda: theirs.update_features({"fastmq.no.such.feature": 1}, validate_only=True))
    same_error(lambda: ours.update_features([("metadata.version", level)]),
               lambda: theirs.update_features([("metadata.version", level)]))


def test_a_replica_moves_to_another_log_directory(on_authorizer, authorizing_kafka):
    ours, theirs = on_authorizer
    topic = topic_name()
    ours.create_topics([NewTopic(topic, 1, 1)], wait_for_metadata=True)
    node = authorizing_kafka.nodes[0]
    replica = TopicPartitionReplica(topic, 0, node.node_id)

    def directory_of_partition() -> str | None:
        (broker,) = ours.describe_log_dirs({topic: [0]})
        return next((d["log_dir"] for d in broker["log_dirs"] for t in d["topics"] for p in t["partitions"]
                     if t["name"] == topic and not p["is_future_key"]), None)

    current = wait_for(directory_of_partition)
    (target,) = [str(path) for path in authorizing_kafka.data_dirs(node) if str(path) != current]
    assert ours.alter_replica_log_dirs({replica: target}) == {replica: kerrors.NoError}
    wait_for(lambda: directory_of_partition() == target, timeout=20, interval=0.1, message=f"{replica} in {target}")
    nowhere = {(topic, 0, node.node_id): str(authorizing_kafka.directory / "no-such-dir")}
    mine = ours.alter_replica_log_dirs(nowhere)
    peer = theirs.alter_replica_log_dirs(nowhere)
    assert {r: e.__name__ for r, e in mine.items()} == {r: e.__name__ for r, e in peer.items()} == {
        replica: "LogDirNotFoundError"}
    assert ours.alter_replica_log_dirs({}) == {}


# ---- hanging transactions ----------------------------------------------------------------------------------

def test_a_hanging_transaction_is_found_and_aborted(on_apache, apache_kafka):
    ours, theirs = on_apache
    topic, txn_id = topic_name(), topic_name("txn")
    create_served_topic(apache_kafka.bootstrap_servers, topic, 1)
    partition = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap_servers, transactional_id=txn_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"left open", partition=0).get(TIMEOUT_MS / 1000)
        # Any open transaction is "hanging" once the threshold (timeout + 5 minutes) is 0.
        hanging = ours.find_hanging_transactions(max_transaction_timeout_ms=-5 * 60 * 1000)
        mine = [h for h in hanging if h["transactional_id"] == txn_id]
        peer = [h for h in theirs.find_hanging_transactions(max_transaction_timeout_ms=-5 * 60 * 1000)
                if h["transactional_id"] == txn_id]
        assert [{k: v for k, v in h.items() if k != "age_ms"} for h in mine] == [
            {k: v for k, v in h.items() if k != "age_ms"} for h in peer]
        (found,) = mine
        assert found["state"] == "Ongoing" and found["topic_partitions"] == [partition] and found["age_ms"] >= 0
        assert ours.find_hanging_transactions() == [h for h in ours.find_hanging_transactions()
                                                     if h["transactional_id"] != txn_id]

        assert ours.abort_transaction(AbortTransactionSpec(partition, found["producer_id"],
                                                           found["producer_epoch"])) is None
        wait_for(lambda: ours.describe_producers([partition])[partition].active_producers[0]
                 .current_transaction_start_offset == -1, message="the partition's transaction aborted")
        with pytest.raises(kerrors.UnknownTopicOrPartitionError):
            ours.abort_transaction(AbortTransactionSpec(TopicPartition(topic, 7), found["producer_id"],
                                                        found["producer_epoch"]))
        producer.abort_transaction()
    finally:
        producer.close()


# ---- the embedded broker -------------------------------------------------------------------------------------

def test_the_embedded_broker_refuses_each_operation_clearly(embedded_broker):
    acl_filter = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    acl = ACL("User:a", "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, "t"))
    topic = topic_name()
    with KafkaAdminClient(bootstrap_servers=embedded_broker.bootstrap_servers, request_timeout_ms=TIMEOUT_MS) as ours:
        ours.create_topics([NewTopic(topic, 1, 1)])
        calls = {
            "describe_acls": lambda: ours.describe_acls(acl_filter),
            "create_acls": lambda: ours.create_acls([acl]),
            "delete_acls": lambda: ours.delete_acls([acl_filter]),
            "describe_user_scram_credentials": lambda: ours.describe_user_scram_credentials(),
            "alter_user_scram_credentials": lambda: ours.alter_user_scram_credentials(
                [UserScramCredentialDeletion("u", "SCRAM-SHA-256")]),
            "update_features": lambda: ours.update_features({"metadata.version": 1}),
            "alter_partition_reassignments": lambda: ours.alter_partition_reassignments(
                {TopicPartition(topic, 0): [0]}),
            "alter_replica_log_dirs": lambda: ours.alter_replica_log_dirs(
                {(topic, 0, ours.describe_cluster()["brokers"][0]["broker_id"]): "/nowhere"}),
            "describe_topic_partitions": lambda: ours.describe_topic_partitions([topic]),
            "abort_transaction": lambda: ours.abort_transaction(AbortTransactionSpec(TopicPartition(topic, 0), 1, 0)),
            "find_hanging_transactions": lambda: ours.find_hanging_transactions(),
        }
        for name, call in calls.items():
            with pytest.raises(kerrors.IncompatibleBrokerVersion, match="does not support"):
                call()
            assert topic in ours.list_topics(), f"the connection went on after {name}"
