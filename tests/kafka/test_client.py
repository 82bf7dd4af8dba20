"""KafkaClient: bootstrap, version negotiation, metadata upkeep and requests from any thread, against real brokers."""
from __future__ import annotations

import time
import uuid

import pytest

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import KafkaClient, parse_bootstrap_servers
from fastmq.kafka.protocol.versions import CLIENT_MAX_VERSIONS
from tests.support.brokers import on_brokers
from tests.support.kafka_wire import Wire


@pytest.fixture
def client(kafka_broker):
    made = []

    def make(**options):
        options.setdefault("bootstrap_servers", kafka_broker.bootstrap_servers)
        made.append(KafkaClient(**options))
        return made[-1]

    yield make
    for c in made:
        c.close()


def test_parse_bootstrap_servers():
    assert parse_bootstrap_servers("a:1, b ,[::1]:3") == [("a", 1), ("b", 9092), ("::1", 3)]
    with pytest.raises(kerrors.KafkaConfigurationError):
        parse_bootstrap_servers("host:notaport")
    with pytest.raises(kerrors.KafkaConfigurationError):
        parse_bootstrap_servers(" , ")


def test_bootstrap_skips_a_dead_server(client, kafka_broker):
    c = client(bootstrap_servers=f"127.0.0.1:1,{kafka_broker.bootstrap_servers}", reconnect_backoff_ms=10)
    c.bootstrap(10)
    assert c.cluster.brokers and c.cluster.cluster_id


def test_unreachable_cluster_gives_a_clear_timeout(client):
    c = client(bootstrap_servers="127.0.0.1:1", reconnect_backoff_ms=10)
    with pytest.raises(kerrors.KafkaTimeoutError, match="Unable to bootstrap .*refused"):
        c.bootstrap(1.0)


def advertised_versions(bootstrap_servers: str) -> dict[int, tuple[int, int]]:
    """The broker's own ApiVersions answer, asked over a plain wire connection."""
    wire = Wire(bootstrap_servers.split(",")[0])
    try:
        answer = wire.request(kp.ApiKey.API_VERSIONS, 0, kp.ApiVersionsRequest())
    finally:
        wire.close()
    return {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}


def test_versions_are_the_highest_both_sides_support(client, kafka_broker):
    c = client()
    c.bootstrap(10)
    node = next(iter(c.cluster.brokers))
    c.request(node, kp.MetadataRequest(topics=[]))          # connected and negotiated
    advertised = advertised_versions(kafka_broker.bootstrap_servers)
    for key in (kp.ApiKey.PRODUCE, kp.ApiKey.FETCH, kp.ApiKey.METADATA, kp.ApiKey.ADD_PARTITIONS_TO_TXN):
        expected = min(kp.SUPPORTED_VERSIONS[key][1], advertised[key][1], CLIENT_MAX_VERSIONS.get(key, 1 << 15))
        assert c.loop.run_in_loop(c.api_version, node, key) == expected, kp.ApiKey(key).name


@on_brokers("tansu")
def test_an_api_the_broker_lacks_is_refused_clearly(client):
    c = client()
    c.bootstrap(10)
    node = next(iter(c.cluster.brokers))
    c.request(node, kp.MetadataRequest(topics=[]))
    with pytest.raises(kerrors.UnsupportedVersionError):
        c.loop.run_in_loop(c.api_version, node, kp.ApiKey.CREATE_PARTITIONS)   # Tansu 0.6 lacks it


def test_metadata_refreshes_periodically_and_on_demand(client):
    c = client(metadata_max_age_ms=200)
    c.bootstrap(10)
    first = c.cluster.version
    assert c.wait_for_metadata(first, 5) and c.cluster.version > first
    topic = f"client-{uuid.uuid4().hex[:8]}"
    info = c.topic_metadata(topic, 10)                       # auto-created by the Metadata request
    assert info.name == topic and len(info.partitions) >= 1
    assert all(p.leader in c.cluster.brokers for p in info.partitions)


def test_requests_from_other_threads_and_futures(client):
    c = client()
    futures = [c.call(None, kp.MetadataRequest(topics=[])) for _ in range(20)]
    assert all(f.result(10).brokers for f in futures)


def test_plain_mechanism_refused_by_a_scram_only_broker(authenticating_tansu):
    # Tansu answers a PLAIN handshake by closing the connection; the error says why the bootstrap failed.
    c = KafkaClient(bootstrap_servers=authenticating_tansu.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="PLAIN", sasl_plain_username="u", sasl_plain_password="p")
    try:
        with pytest.raises(kerrors.KafkaTimeoutError, match="does not offer SASL mechanism PLAIN|closed by the peer"):
            c.bootstrap(2)
    finally:
        c.close()


def test_bad_security_settings_fail_at_construction():
    with pytest.raises(kerrors.KafkaConfigurationError):
        KafkaClient(bootstrap_servers="x:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                    sasl_plain_username="u", sasl_plain_password="p")
    with pytest.raises(kerrors.KafkaConfigurationError):
        KafkaClient(bootstrap_servers="x:1", security_protocol="TLS")


def test_close_is_prompt_and_idempotent(client):
    c = client()
    c.bootstrap(10)
    start = time.monotonic()
    c.close()
    c.close()
    assert time.monotonic() - start < 5


def test_call_to_an_unknown_node_fails_its_future(client):
    c = client()
    with pytest.raises(kerrors.BrokerNotAvailableError):
        c.call(424242, kp.MetadataRequest(topics=[])).result(5)


def test_retry_classification():
    from fastmq.io import ConnectFailedError
    from fastmq.kafka.client import is_retriable

    assert is_retriable(ConnectFailedError("refused"))                   # network errors of the engine
    assert is_retriable(kerrors.NotLeaderForPartitionError("stale"))    # metadata a refresh fixes
    assert is_retriable(kerrors.RequestTimedOutError("slow"))
    assert not is_retriable(kerrors.TopicAuthorizationFailedError("no"))


def test_unresolved_metadata_is_refreshed_with_backoff(embedded_broker):
    """A topic the broker does not have keeps being asked for, backing off (no storm, no five-minute wait)."""
    with KafkaClient(bootstrap_servers=embedded_broker.bootstrap_servers, allow_auto_create_topics=False,
                     metadata_max_age_ms=600000) as c:
        c.bootstrap(30)
        c.add_topics([f"absent-{uuid.uuid4().hex[:8]}"])
        first = c.cluster.version
        time.sleep(2.0)                    # a window to count refreshes in, not a wait for a condition
        refreshes = c.cluster.version - first
        assert 2 <= refreshes <= 2.0 / 0.1 + 2, refreshes
