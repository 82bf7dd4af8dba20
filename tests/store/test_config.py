"""The JSON config files: RocketMQ's format, fastjson's bare integer keys, the seed's variants, atomic
replacement with a backup, and damaged files (fuzz)."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.errors import FastMQError
from fastmq.store import (ConsumerOffsetManager, CorruptStoreError, SubscriptionGroupConfig,
                          SubscriptionGroupManager, TopicConfig, TopicConfigManager)
from fastmq.store.config import quote_bare_keys


def test_topics_round_trip_in_rocketmq_format(tmp_path):
    manager = TopicConfigManager(tmp_path)
    manager.update_topic_config(TopicConfig("TopicTest", read_queue_nums=4, write_queue_nums=4))
    manager.close()         # the journal goes into the file
    obj = json.loads((tmp_path / "topics.json").read_text())
    assert obj["topicConfigTable"]["TopicTest"] == {
        "topicName": "TopicTest", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    assert obj["dataVersion"]["counter"] == 1
    again = TopicConfigManager(tmp_path)
    again.load()
    assert again.select_topic_config("TopicTest") == TopicConfig("TopicTest", 4, 4)


def test_seed_variant_of_topics(tmp_path):
    # The seed's SmartGo nests topicConfigTable twice and writes topicFilterType as a number.
    (tmp_path / "topics.json").write_text(json.dumps({"topicConfigTable": {"topicConfigTable": {
        "%RETRY%g": {"SEPARATOR": "", "topicName": "%RETRY%g", "readQueueNums": 1, "writeQueueNums": 1,
                     "perm": 6, "topicFilterType": 0, "topicSysFlag": 0, "order": False}}},
        "dataVersion": {"timestamp": 1511333414604049700, "counter": 2023}}))
    manager = TopicConfigManager(tmp_path)
    manager.load()
    assert manager.select_topic_config("%RETRY%g").read_queue_nums == 1
    assert manager.data_version.counter == 2023


def test_consumer_offsets_with_fastjson_bare_keys(tmp_path):
    (tmp_path / "consumerOffset.json").write_text(
        '{"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:250,3:250}}}')
    manager = ConsumerOffsetManager(tmp_path)
    manager.load()
    assert manager.query_offset("please_rename_unique_group_name_4", "TopicTest", 1) == 249
    assert manager.query_offset("other", "TopicTest", 1) == -1
    manager.commit_offset("g", "T", 0, 7)
    manager.persist()
    assert json.loads((tmp_path / "consumerOffset.json").read_text())["offsetTable"]["T@g"] == {"0": 7}


def test_seed_variant_of_offsets(tmp_path):
    (tmp_path / "consumerOffset.json").write_text('{"offsets": {"group@Topic": {"0": 5}}}')
    manager = ConsumerOffsetManager(tmp_path)
    manager.load()
    assert manager.query_offset("group", "Topic", 0) == 5


def test_subscription_groups(tmp_path):
    manager = SubscriptionGroupManager(tmp_path)
    manager.update_subscription_group_config(SubscriptionGroupConfig("g", retry_max_times=3))
    obj = json.loads((tmp_path / "subscriptionGroup.json").read_text())
    assert obj["subscriptionGroupTable"]["g"]["retryMaxTimes"] == 3
    assert obj["subscriptionGroupTable"]["g"]["groupName"] == "g"
    again = SubscriptionGroupManager(tmp_path)
    again.load()
    assert again.find_subscription_group_config("g").retry_max_times == 3
    again.delete_subscription_group_config("g")
    assert again.find_subscription_group_config("g") is None


def test_atomic_replacement_keeps_a_backup(tmp_path):
    manager = TopicConfigManager(tmp_path)
    manager.update_topic_config(TopicConfig("A"))
    manager.persist()
    manager.update_topic_config(TopicConfig("B"))
    manager.persist()
    assert not (tmp_path / "topics.json.tmp").exists()
    backup = json.loads((tmp_path / "topics.json.bak").read_text())
    assert set(backup["topicConfigTable"]) == {"A"}
    # A torn main file falls back to the backup.
    (tmp_path / "topics.json").write_text('{"topicConfigTable": {"A": ')
    again = TopicConfigManager(tmp_path)
    again.load()
    assert set(again.topic_config_table) == {"A"}


def test_both_files_damaged_is_a_clear_error(tmp_path):
    (tmp_path / "topics.json").write_text("not json")
    (tmp_path / "topics.json.bak").write_text("[]")
    with pytest.raises(CorruptStoreError, match="topics.json"):
        TopicConfigManager(tmp_path).load()


def test_read_only_manager_refuses_to_persist(tmp_path):
    with pytest.raises(FastMQError):
        TopicConfigManager(tmp_path, read_only=True).persist()


def test_quote_bare_keys_leaves_strings_alone():
    text = '{"a,{1:": [1, {2: "x{3:y"}], 4 : {-5:6}}'
    assert json.loads(quote_bare_keys(text)) == {"a,{1:": [1, {"2": "x{3:y"}], "4": {"-5": 6}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=200), json_values.map(json.dumps)),
       manager_class=st.sampled_from([TopicConfigManager, ConsumerOffsetManager, SubscriptionGroupManager]))
def test_any_file_content_loads_or_raises_clearly(tmp_path_factory, text, manager_class):
    directory = tmp_path_factory.mktemp("config")
    (directory / manager_class.file_name).write_text(text)
    manager = manager_class(directory)
    try:
        manager.load()
    except CorruptStoreError:
        return
    manager.persist()      # whatever loaded can be written back


@pytest.mark.parametrize("manager_class, text", [
    (ConsumerOffsetManager, '{"offsetTable": {"T@g": {"0": Infinity}}}'),
    (ConsumerOffsetManager, "[" * 100_000),
    (TopicConfigManager, '{"topicConfigTable": {"T": {"perm": NaN}}}'),
    (TopicConfigManager, "\ufeff{}"),
])
def test_hostile_json(tmp_path, manager_class, text):
    (tmp_path / manager_class.file_name).write_text(text)
    with pytest.raises(CorruptStoreError):
        manager_class(tmp_path).load()
