"""The broker's core, without a wire: topics (fastmq/broker/topics.py), committed offsets (offsets.py), producer
state (idempotence.py), statistics (stats.py), the config writer (persist.py), the configuration (config.py)."""
from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import pytest

import fastmq.broker
from fastmq.broker.config import BrokerConfig, ListenerConfig
from fastmq.broker.frontends import front_end_class, known_protocols
from fastmq.broker.errors import CoreError, TopicError
from fastmq.broker.idempotence import ProducerStateManager
from fastmq.broker.offsets import CommittedOffset, OffsetStore
from fastmq.broker.persist import ConfigWriter
from fastmq.broker.stats import BrokerStats, ConnectionRegistry, Meter
from fastmq.broker.topics import TopicConfigDef, TopicManager, TopicRules
from fastmq.errors import ConfigurationError
from fastmq.store import MessageStore, MessageStoreConfig


@pytest.fixture
def store(tmp_path):
    with MessageStore(tmp_path / "store", MessageStoreConfig(mapped_file_size_commit_log=1 << 20,
                                                             message_index_enable=False)) as opened:
        yield opened


@pytest.fixture
def writer():
    config_writer = ConfigWriter()
    yield config_writer
    config_writer.close()


def durable(call) -> bool:
    done = threading.Event()
    outcome = []
    call(lambda ok: (outcome.append(ok), done.set()))
    assert done.wait(10)
    return outcome[0]


# -- topics -------------------------------------------------------------------------------------------------

# A protocol's rules as a front end gives them: lower-case names only, one config of its own.
LOWER_CASE_RULES = TopicRules("lower", lambda name: name.islower(), "lower case only", {
    "retention.ms": TopicConfigDef("100", True, str.isdigit),
    "history": TopicConfigDef("kept", True, lambda v: v == "kept", fixed=True)}, {"retention.ms": "7"})


def topic_manager(store, partitions: int) -> TopicManager:
    topics = TopicManager(store, partitions)
    topics.add_rules(LOWER_CASE_RULES)
    return topics


def test_topics_live_in_the_store_config_and_keep_their_ids(store):
    topics = topic_manager(store, 3)
    created = topics.create("orders", None, {"retention.ms": "5"})
    assert created.partitions == 3 and topics.by_id(created.topic_id) is created
    table = store.topic_config_manager.topic_config_table["orders"]
    assert (table.read_queue_nums, table.write_queue_nums, table.perm) == (3, 3, 6)
    assert topics.get_or_create("orders") is created
    again = topic_manager(store, 3)                     # what a restart reads back
    assert again.get("orders").topic_id == created.topic_id and again.get("orders").configs == {"retention.ms": "5"}
    for bad, code in (("a/b", CoreError.INVALID_TOPIC_NAME), ("..", CoreError.INVALID_TOPIC_NAME),
                      ("Upper", CoreError.INVALID_TOPIC_NAME), ("orders", CoreError.TOPIC_EXISTS)):
        with pytest.raises(TopicError) as error:
            topics.create(bad)
        assert error.value.error is code
    with pytest.raises(TopicError) as error:
        topics.create("x", 0)
    assert error.value.error is CoreError.INVALID_PARTITIONS
    for configs in ({"retention.ms": "soon"}, {"cleanup.policy": "delete"}):
        with pytest.raises(TopicError) as error:
            topics.create("y", 1, configs)
        assert error.value.error is CoreError.INVALID_CONFIG


def test_the_store_alone_knows_no_configs_and_only_its_own_name_rule(store):
    topics = TopicManager(store, 1)
    assert topics.create("Upper%Case|ok").configs == {}
    with pytest.raises(TopicError) as error:
        topics.create("t", 1, {"retention.ms": "5"})
    assert error.value.error is CoreError.INVALID_CONFIG
    with pytest.raises(TopicError, match="store"):
        topics.create("a b")


def test_topic_growth_configs_and_deletion(store):
    topics = topic_manager(store, 1)
    forgotten = []
    topics.deletion_listeners.append(forgotten.append)
    created = topics.create("t", 2)
    assert created.configs == {"retention.ms": "7"}          # the rules' creation default
    store.put_message("t", 1, b"x")
    topics.add_partitions("t", 4)
    assert topics.get("t").partitions == 4
    with pytest.raises(TopicError):
        topics.add_partitions("t", 3)
    topics.alter_configs("t", {"retention.ms": "100"})
    assert topics.get("t").config("retention.ms") == "100"
    topics.alter_configs("t", {}, ["retention.ms"])
    assert topics.get("t").config("retention.ms") == "100" and topics.get("t").configs == {}
    with pytest.raises(TopicError):
        topics.alter_configs("t", {"history": "rewritten"})
    topics.delete("t")
    assert topics.get("t") is None and forgotten == ["t"] and store.get_max_offset("t", 1) == 0
    assert "t" not in store.topic_config_manager.topic_config_table


# -- offsets ------------------------------------------------------------------------------------------------

def test_offsets_are_durable_when_acknowledged_and_shared_with_rocketmq(store, writer):
    offsets = OffsetStore(store, writer)
    assert durable(lambda cb: offsets.commit("g", [("t", 0, CommittedOffset(5)),
                                                   ("t", 1, CommittedOffset(9, ("meta", 3, None)))], cb))
    # consumerOffset.json on disk already has them, in RocketMQ's format.
    on_disk = json.loads((store.root / "config" / "consumerOffset.json").read_text())
    assert on_disk["offsetTable"]["t@g"] == {"0": 5, "1": 9}
    assert offsets.fetch("g", "t", 1) == CommittedOffset(9, ("meta", 3, None))
    assert offsets.fetch("g", "t", 0) == CommittedOffset(5)
    assert offsets.fetch("g", "t", 2) is None
    # What a restart reads back.
    again = OffsetStore(store, writer)
    assert again.fetch("g", "t", 1).extra == ("meta", 3, None)
    assert offsets.partitions("g") == {"t": [0, 1]} and offsets.groups() == {"g"}
    durable(lambda cb: offsets.delete("g", [("t", 1)], cb))
    assert offsets.fetch("g", "t", 1) is None and offsets.fetch("g", "t", 0).offset == 5
    offsets.forget_topic("t")
    assert offsets.groups() == set()


def test_group_names_with_the_separator_do_not_mix(store, writer):
    offsets = OffsetStore(store, writer)
    durable(lambda cb: offsets.commit("b", [("t", 0, CommittedOffset(1))], cb))
    durable(lambda cb: offsets.commit("a@b", [("t", 0, CommittedOffset(2))], cb))
    assert offsets.partitions("b") == {"t": [0]} and offsets.fetch("a@b", "t", 0).offset == 2
    assert offsets.groups() == {"b", "a@b"}


# -- producer state -----------------------------------------------------------------------------------------

def test_producer_sequences(store, writer):
    producers = ProducerStateManager(store, writer, 86_400_000)
    pid = producers.allocate_producer_id()
    assert producers.check("t", 0, pid, 0, 5, 5) == (CoreError.UNKNOWN_PRODUCER, -1)
    assert producers.check("t", 0, pid, 0, 0, 4) == (None, -1)
    producers.record("t", 0, pid, 0, 0, 4, 100)
    assert producers.check("t", 0, pid, 0, 0, 4) == (None, 100)               # duplicate
    assert producers.check("t", 0, pid, 0, 6, 7) == (CoreError.OUT_OF_ORDER_SEQUENCE, -1)
    assert producers.check("t", 0, pid, 0, 5, 7) == (None, -1)
    assert producers.check("t", 0, pid, 1, 3, 3) == (CoreError.OUT_OF_ORDER_SEQUENCE, -1)   # new epoch: from 0
    producers.record("t", 0, pid, 1, 0, 0, 200)
    assert producers.check("t", 0, pid, 0, 5, 5) == (CoreError.STALE_PRODUCER_EPOCH, -1)
    # Only the last five batches are remembered.
    for i in range(1, 8):
        producers.record("t", 0, pid, 1, i, i, 200 + i)
    assert producers.check("t", 0, pid, 1, 1, 1) == (CoreError.OUT_OF_ORDER_SEQUENCE, -1)
    assert producers.check("t", 0, pid, 1, 7, 7) == (None, 207)
    # Sequences wrap after 2**31 - 1.
    producers.record("t", 1, pid, 0, 2 ** 31 - 3, 2 ** 31 - 1, 0)
    assert producers.check("t", 1, pid, 0, 0, 0) == (None, -1)


def test_producer_state_snapshot_and_id_reservation(store, writer):
    producers = ProducerStateManager(store, writer, 86_400_000)
    ids = [producers.allocate_producer_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    store.put_message("t", 0, b"x")
    producers.record("t", 0, 2, 0, 0, 0, 0)
    producers.save(wait=True)
    restarted = ProducerStateManager(store, writer, 86_400_000)
    assert restarted.check("t", 0, 2, 0, 0, 0) == (None, 0)
    # Ids handed out before a crash may not be in the snapshot: the reserved block is skipped.
    assert restarted.allocate_producer_id() >= 3


def test_expired_producers_are_dropped_from_snapshots(store, writer):
    now = [1000.0]
    producers = ProducerStateManager(store, writer, 10_000, clock=lambda: now[0])
    store.put_message("t", 0, b"x")
    producers.record("t", 0, 7, 0, 0, 0, 0)
    now[0] += 11
    assert producers.snapshot()["partitions"]["0@t"]["producers"] == {}


# -- statistics ---------------------------------------------------------------------------------------------

def test_meter_rates_over_windows():
    meter = Meter()
    for second in range(100, 110):
        meter.add(second, 10, 1000)
    assert (meter.messages, meter.bytes) == (100, 10000)
    assert meter.rate(110, 10) == (10.0, 1000.0)
    assert meter.rate(110, 60) == (100 / 60, 10000 / 60)
    assert meter.rate(200, 10) == (0.0, 0.0)               # old buckets no longer count


def test_stats_attribute_gets_to_groups_by_client_id():
    now = [500.0]
    stats = BrokerStats(clock=lambda: now[0])
    stats.put("t", 5, 50)
    stats.member_changed("billing", "client-a", True)
    stats.get("t", "client-a", 3, 30)
    stats.get("t", "unknown", 1, 10)
    snapshot = stats.snapshot()
    assert snapshot["topics"]["t"]["put"]["messages"] == 5
    assert snapshot["topics"]["t"]["get"]["messages"] == 4
    assert snapshot["groups"]["billing"]["t"]["messages"] == 3 and snapshot["groups"][""]["t"]["messages"] == 1
    stats.member_changed("billing", "client-a", False)
    stats.forget_topic("t")
    assert stats.snapshot()["topics"] == {}


def test_connection_registry_counts_producers_consumers_and_members():
    registry = ConnectionRegistry()
    producer = registry.opened(1, "127.0.0.1:1", "PLAINTEXT")
    consumer = registry.opened(2, "127.0.0.1:2", "PLAINTEXT")
    producer.produced.add("t")
    consumer.fetched.update({"t", "u"})
    registry.member_changed("g", "m1", "c1", True)
    snapshot = registry.snapshot()
    assert (snapshot["connections"], snapshot["producers"], snapshot["consumers"]) == (2, 1, 1)
    assert snapshot["consumers_by_topic"] == {"t": 1, "u": 1} and snapshot["members_by_group"] == {"g": 1}
    registry.closed(1)
    registry.member_changed("g", "m1", "c1", False)
    assert registry.snapshot()["connections"] == 1 and registry.snapshot()["members_by_group"] == {}


# -- config writer and configuration -------------------------------------------------------------------------

class Target:
    def __init__(self, fail: bool = False) -> None:
        self.writes = 0
        self.fail = fail

    def persist(self) -> None:
        if self.fail:
            raise OSError("disk gone")
        self.writes += 1


def test_config_writer_coalesces_and_reports_failures():
    writer = ConfigWriter()
    try:
        target, broken = Target(), Target(fail=True)
        assert durable(lambda cb: writer.write(target, cb))
        assert not durable(lambda cb: writer.write(broken, cb))
        results = []
        done = threading.Event()
        for i in range(50):
            writer.write(target, lambda ok, i=i: (results.append(ok), i == 49 and done.set()))
        assert done.wait(10) and results == [True] * 50
        assert target.writes < 51
    finally:
        writer.close()
    late = Target()
    writer.write(late, None)                   # after close: written in the caller's thread
    assert late.writes == 1


def test_listeners_name_their_protocol():
    secured = ListenerConfig.parse("SASL_SSL://0.0.0.0:9093")
    assert (secured.protocol, secured.security_protocol, secured.host) == ("kafka", "SASL_SSL", "0.0.0.0")
    assert ListenerConfig.parse("[::1]:9092").host == "::1"
    plain = ListenerConfig.parse("kafka://127.0.0.1:9092")
    assert (plain.protocol, plain.security_protocol, plain.port, plain.url) == (
        "kafka", "PLAINTEXT", 9092, "kafka://127.0.0.1:9092")
    both = ListenerConfig.parse("kafka+ssl://[::1]:9093")
    assert (both.protocol, both.security_protocol, both.url) == ("kafka", "SSL", "kafka://[::1]:9093")
    assert plain.advertised(("127.0.0.1", 9092)) == ("127.0.0.1", 9092)
    with pytest.raises(ConfigurationError):
        ListenerConfig.parse("no-port")


def test_front_ends_are_found_by_protocol_name():
    from fastmq.broker.kafka.frontend import KafkaFrontEnd
    assert "kafka" in known_protocols()
    assert front_end_class("kafka") is KafkaFrontEnd
    with pytest.raises(ConfigurationError, match="no front end speaks 'carrier-pigeon'"):
        front_end_class("carrier-pigeon")


def test_the_broker_core_imports_no_front_end():
    # The core (fastmq/broker/*.py) builds on the store, the I/O layer and itself: no front end (its
    # subpackages), no protocol package, no protocol's compiled codec.
    core = Path(fastmq.broker.__file__).parent
    # `fastmq` itself: the package root, which locates the installed package for child processes.
    allowed = ("fastmq.closeable", "fastmq.errors", "fastmq.io", "fastmq.store",
               *(f"fastmq.broker.{module.stem}" for module in core.glob("*.py")))
    for module in sorted(core.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text("utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.startswith("fastmq."):
                    assert any(name == ok or name.startswith(ok + ".") for ok in allowed), (
                        f"{module.name} imports {name}")


def test_broker_config_validation(tmp_path):
    for bad in (dict(listeners=[]), dict(num_partitions=0), dict(listeners=[ListenerConfig(security_protocol="SSL")]),
                dict(listeners=[ListenerConfig(security_protocol="SASL_PLAINTEXT")]),
                dict(sasl_mechanisms=("GSSAPI",)), dict(group_min_session_timeout_ms=0),
                dict(listeners=[ListenerConfig(protocol="carrier-pigeon")])):
        with pytest.raises(ConfigurationError):
            BrokerConfig(data_dir=tmp_path, **bad).validate()
    store = BrokerConfig(data_dir=tmp_path, max_message_bytes=8 << 20).store_config()
    assert store.max_message_size == 8 << 20 and not store.message_index_enable
