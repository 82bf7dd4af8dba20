"""The journal of topics.json and kafkaTopics.json: one appended line a change, the file rewritten a logarithmic
number of times as a table grows, torn last lines dropped, damaged journals refused clearly (fuzz), and every
acknowledged change kept through kill -9 at random moments."""
from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastmq.store import CorruptStoreError, TopicConfig, TopicConfigManager

CHILD = Path(__file__).with_name("config_crash_child.py")
STARTUP_TIMEOUT = 30
ROUNDS = 4


def loaded(directory: Path) -> TopicConfigManager:
    manager = TopicConfigManager(directory)
    manager.load()
    return manager


def test_creating_many_topics_rewrites_the_file_a_logarithmic_number_of_times(tmp_path, monkeypatch):
    manager = TopicConfigManager(tmp_path)
    rewrites = []
    original = TopicConfigManager.persist

    def counting_persist(self):
        rewrites.append(len(self.topic_config_table))
        original(self)
    monkeypatch.setattr(TopicConfigManager, "persist", counting_persist)
    for i in range(300):
        manager.update_topic_config(TopicConfig(f"t{i}", 4, 4))
        # Never more journal lines than the file held entries when written (or the minimum).
        assert manager.journal_lines < max(manager.min_compaction_lines, manager.file_entries)
    assert rewrites == [64, 128, 256]          # the table doubled between rewrites: O(1) amortised a change
    journal = (tmp_path / "topics.json.log").read_text().splitlines()
    assert len(journal) == 300 - 256
    assert json.loads(journal[0]) == {"key": "t256", "value": TopicConfig("t256", 4, 4).to_json()}
    monkeypatch.undo()
    assert loaded(tmp_path).topic_config_table == manager.topic_config_table
    manager.close()
    assert (tmp_path / "topics.json.log").read_bytes() == b""
    assert len(json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]) == 300


def test_loading_replays_the_journal_then_folds_it_into_the_file(tmp_path):
    manager = TopicConfigManager(tmp_path)
    manager.update_topic_config(TopicConfig("a", 1, 1))
    manager.persist()
    manager.update_topic_config(TopicConfig("b", 2, 2))
    manager.delete_topic_config("a")
    again = loaded(tmp_path)
    assert set(again.topic_config_table) == {"b"} and again.data_version.counter >= 3
    assert set(json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]) == {"b"}
    assert (tmp_path / "topics.json.log").read_bytes() == b""


def test_a_read_only_load_replays_without_writing(tmp_path):
    TopicConfigManager(tmp_path).update_topic_config(TopicConfig("a", 1, 1))
    journal = (tmp_path / "topics.json.log").read_bytes()
    reader = TopicConfigManager(tmp_path, read_only=True)
    reader.load()
    assert set(reader.topic_config_table) == {"a"}
    assert (tmp_path / "topics.json.log").read_bytes() == journal and not (tmp_path / "topics.json").exists()


def test_a_damaged_line_before_the_last_is_a_clear_error(tmp_path):
    (tmp_path / "topics.json.log").write_text('{"key":"a","value":{}}\n{"key":\n{"key":"b","value":null}\n')
    with pytest.raises(CorruptStoreError, match="topics.json.log line 2"):
        loaded(tmp_path)


ops = st.lists(st.tuples(st.sampled_from("abcdef"), st.one_of(st.none(), st.integers(1, 9))), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=ops, min_lines=st.integers(1, 6), cut=st.integers(0, 10_000))
def test_a_journal_cut_anywhere_loads_a_prefix_of_the_changes(tmp_path_factory, changes, min_lines, cut):
    directory = tmp_path_factory.mktemp("journal")
    manager = TopicConfigManager(directory)
    manager.min_compaction_lines = min_lines
    states = [{}]                 # the table after each change
    file_state = 0                # the change the file holds everything up to
    for name, queues in changes:
        if queues is None:
            if name not in manager.topic_config_table:
                continue            # nothing to journal
            manager.delete_topic_config(name)
        else:
            manager.update_topic_config(TopicConfig(name, queues, queues))
        states.append({k: v.read_queue_nums for k, v in manager.topic_config_table.items()})
        if manager.journal_lines == 0:
            file_state = len(states) - 1
    journal = directory / "topics.json.log"
    data = journal.read_bytes() if journal.exists() else b""
    kept = data[:cut % (len(data) + 1)]
    journal.write_bytes(kept)
    table = {k: v.read_queue_nums for k, v in loaded(directory).topic_config_table.items()}
    whole_lines = kept.count(b"\n")
    acceptable = [states[min(file_state + whole_lines + extra, len(states) - 1)] for extra in (0, 1)]
    assert table in acceptable


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=200), st.lists(st.text(max_size=30)).map("\n".join).map(str.encode)))
def test_any_journal_content_loads_or_raises_clearly(tmp_path_factory, content):
    directory = tmp_path_factory.mktemp("journal")
    (directory / "topics.json.log").write_bytes(content)
    try:
        manager = loaded(directory)
    except CorruptStoreError:
        return
    manager.update_topic_config(TopicConfig("after", 1, 1))     # and the journal takes changes after it
    assert "after" in loaded(directory).topic_config_table


def run_child(config_dir: Path, round_number: int, rng: random.Random) -> list[str]:
    """Start the creator, kill it at a random moment, return the changes it had acknowledged."""
    child = subprocess.Popen([sys.executable, str(CHILD), str(config_dir), str(round_number)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            assert selector.select(STARTUP_TIMEOUT), "the child did not start"
        assert child.stdout.readline() == b"ready\n", child.stderr.read1()
        time.sleep(rng.uniform(0.05, 0.25))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(STARTUP_TIMEOUT)
        output = child.stdout.read().decode()
        child.stdout.close()
        child.stderr.close()
    return output.splitlines()


def test_every_acknowledged_topic_change_survives_kill_9(tmp_path):
    rng = random.Random(20261126)
    expected: set[str] = set()
    acknowledged = 0
    for round_number in range(ROUNDS):
        changes = run_child(tmp_path, round_number, rng)
        acknowledged += len(changes)
        for change in changes:
            kind, name = change.split()
            if kind == "put":
                expected.add(name)
            else:
                expected.discard(name)
        table = set(loaded(tmp_path).topic_config_table)
        # Only the change in flight at the kill may differ: one creation, or one deletion, done or not.
        assert len(expected ^ table) <= 1, expected ^ table
        expected = table
    assert acknowledged > ROUNDS * 10       # the child really got changes done
