"""fastmq's native Admin: SCRAM credentials, partition reassignments and feature updates against the session's
Apache Kafka, in fastmq's own shapes (errors as exception instances or None). The kafka-python faces of the same
operations, and ACLs, log directories and transaction aborts, are tested in test_compat_admin_operations.py."""
from __future__ import annotations

import uuid

import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import Admin, ScramCredentials, ScramMechanism, UpdateFeatureType, UserScramCredentialUpsertion
from fastmq.kafka.structs import TopicPartition
from tests.support.brokers import KAFKA_USERS, create_served_topic
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def admin(apache_kafka):
    with Admin(apache_kafka.bootstrap_servers, request_timeout_ms=10000) as client:
        yield client


def test_scram_credentials_are_described_per_user(admin):
    user = next(iter(KAFKA_USERS))
    described = admin.describe_user_scram_credentials([user, "kadmin-nobody"])
    assert set(described[user].iterations) == {ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512}
    assert described[user].error is None and all(n >= 4096 for n in described[user].iterations.values())
    nobody = described["kadmin-nobody"]
    assert isinstance(nobody, ScramCredentials) and isinstance(nobody.error, kerrors.ResourceNotFoundError)
    fresh = f"kadmin-{uuid.uuid4().hex[:8]}"
    assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(fresh, "SCRAM-SHA-256", "pw")]) == {
        fresh: None}
    wait_for(lambda: admin.describe_user_scram_credentials([fresh])[fresh].iterations == {
        ScramMechanism.SCRAM_SHA_256: UserScramCredentialUpsertion.DEFAULT_ITERATIONS})
    with pytest.raises(TypeError):
        admin.describe_user_scram_credentials(user)


def test_reassignments_and_feature_updates_answer_per_item(admin, apache_kafka):
    topic = f"kadmin-{uuid.uuid4().hex[:10]}"
    create_served_topic(apache_kafka.bootstrap_servers, topic, 2)
    broker = apache_kafka.nodes[0].node_id
    answers = admin.alter_partition_reassignments({TopicPartition(topic, 0): [broker], TopicPartition(topic, 1): None})
    assert answers[TopicPartition(topic, 0)] is None
    assert isinstance(answers[TopicPartition(topic, 1)], kerrors.NoReassignmentInProgressError)
    with pytest.raises(ValueError, match="int broker ids"):
        admin.alter_partition_reassignments({TopicPartition(topic, 0): ["1"]})
    with pytest.raises(ValueError, match="unknown feature update type"):
        admin.update_features({"metadata.version": ("SIDEWAYS", 1)})
    with pytest.raises(kerrors.BrokerResponseError):
        admin.update_features({"fastmq.no.such.feature": (UpdateFeatureType.UPGRADE, 1)}, validate_only=True)
