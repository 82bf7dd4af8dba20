"""The administrative verbs (`fastmq metadata` / `-L`, `fastmq topics ...`, `fastmq groups ...`) against the
embedded broker, run in this process through fastmq.cli.main."""
from __future__ import annotations

import json
import time

import pytest

from fastmq.broker import EmbeddedBroker
from fastmq.cli import main
from fastmq.kafka import Consumer, Producer


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(num_partitions=2) as embedded:
        yield embedded


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys, *args: str):
    code, out, err = run(capsys, *args, "--output", "json")
    assert code == 0, err
    return json.loads(out)


def test_metadata_names_brokers_topics_partitions_and_leaders(broker, capsys):
    address = broker.bootstrap_servers
    assert run(capsys, "topics", "create", "meta-topic", "-b", address, "--partitions", "3")[0] == 0
    data = run_json(capsys, "-L", "-b", address)
    host, port = address.rsplit(":", 1)
    assert [(b["id"], b["host"], b["port"]) for b in data["brokers"]] == [(0, host, int(port))]
    topic, = [t for t in data["topics"] if t["topic"] == "meta-topic"]
    assert [(p["partition"], p["leader"]) for p in topic["partitions"]] == [(0, 0), (1, 0), (2, 0)]
    code, out, _ = run(capsys, "metadata", "-b", f"kafka://{address}", "-t", "meta-topic")
    assert code == 0 and "1 broker(s)" in out and "1 topic(s)" in out
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("meta-topic")] == [
        ["meta-topic", str(p), "0"] for p in range(3)]


def test_topic_verbs(broker, capsys):
    address = broker.bootstrap_servers
    code, _, err = run(capsys, "topics", "create", "verbs", "-b", address, "--partitions", "2",
                       "--config", "retention.ms=3600000")
    assert code == 0 and "created topic verbs" in err
    assert "verbs" in run_json(capsys, "topics", "list", "-b", address)
    assert "verbs" in run(capsys, "topics", "list", "-b", address)[1].splitlines()
    described, = run_json(capsys, "topics", "describe", "verbs", "-b", address)
    assert len(described["partitions"]) == 2 and described["configs"]["retention.ms"] == "3600000"

    code, _, err = run(capsys, "topics", "alter", "verbs", "-b", address, "--partitions", "4",
                       "--config", "retention.ms=7200000")
    assert code == 0, err
    described, = run_json(capsys, "topics", "describe", "verbs", "-b", address)
    assert len(described["partitions"]) == 4 and described["configs"]["retention.ms"] == "7200000"
    assert run(capsys, "topics", "alter", "verbs", "-b", address, "--delete-config", "retention.ms")[0] == 0
    described, = run_json(capsys, "topics", "describe", "verbs", "-b", address)
    assert "retention.ms" not in described["configs"]

    code, _, err = run(capsys, "topics", "create", "verbs", "-b", address)
    assert code == 1 and err.startswith("fastmq: ") and "TopicAlreadyExistsError" in err and len(err.splitlines()) == 1
    assert run(capsys, "topics", "delete", "verbs", "-b", address)[0] == 0
    assert "verbs" not in run_json(capsys, "topics", "list", "-b", address)
    code, _, err = run(capsys, "topics", "describe", "verbs", "-b", address)
    assert code == 4 and "no such topic" in err
    code, _, err = run(capsys, "topics", "alter", "verbs", "-b", address)
    assert code == 2 and "nothing to alter" in err


def _consume_and_commit(address: str, topic: str, group: str, count: int) -> None:
    with Consumer(topic, bootstrap_servers=address, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        records = []
        deadline = time.monotonic() + 30
        while len(records) < count and time.monotonic() < deadline:
            records += consumer.consume(count - len(records), 1.0)
        assert len(records) == count
        consumer.commit()


def test_group_verbs_lag_and_offset_resets(broker, capsys):
    address = broker.bootstrap_servers
    assert run(capsys, "topics", "create", "lagging", "-b", address, "--partitions", "2")[0] == 0
    with Producer(address) as producer:
        for i in range(10):
            producer.send("lagging", b"v%d" % i, partition=i % 2)
        producer.flush(30)
    _consume_and_commit(address, "lagging", "lag-group", 10)
    with Producer(address) as producer:
        for i in range(3):
            producer.send("lagging", b"late", partition=0)
        producer.flush(30)

    listed = run_json(capsys, "groups", "list", "-b", address)
    assert {"group": "lag-group", "protocol_type": "consumer", "state": "Empty"} in listed
    described, = run_json(capsys, "groups", "describe", "lag-group", "-b", address)
    rows = {(p["topic"], p["partition"]): (p["committed"], p["end"], p["lag"]) for p in described["partitions"]}
    assert rows == {("lagging", 0): (5, 8, 3), ("lagging", 1): (5, 5, 0)}
    code, out, _ = run(capsys, "groups", "describe", "lag-group", "-b", address)
    assert code == 0 and out.splitlines()[0].split() == ["group", "topic", "partition", "committed", "end", "lag",
                                                         "member"]

    def committed() -> dict:
        offsets = broker_offsets(address, "lag-group")
        return {tp.partition: offset for tp, offset in offsets.items()}

    # A dry run by default: the offsets shown, nothing committed.
    shown = run_json(capsys, "groups", "reset-offsets", "lag-group", "-b", address, "--to-earliest")
    assert [(r["partition"], r["current"], r["new"]) for r in shown] == [(0, 5, 0), (1, 5, 0)]
    assert committed() == {0: 5, 1: 5}
    run_json(capsys, "groups", "reset-offsets", "lag-group", "-b", address, "--to-earliest", "--execute")
    assert committed() == {0: 0, 1: 0}
    run_json(capsys, "groups", "reset-offsets", "lag-group", "-b", address, "--shift-by", "2", "--execute")
    assert committed() == {0: 2, 1: 2}
    run_json(capsys, "groups", "reset-offsets", "lag-group", "-b", address, "--to-latest", "--execute")
    assert committed() == {0: 8, 1: 5}
    run_json(capsys, "groups", "reset-offsets", "lag-group", "-b", address, "--to-datetime",
             "2000-01-01T00:00:00+00:00", "--execute")
    assert committed() == {0: 0, 1: 0}
    run_json(capsys, "groups", "reset-offsets", "lag-group", "-b", address, "--to-datetime",
             "2999-01-01T00:00:00+00:00", "--execute", "-t", "lagging")
    assert committed() == {0: 8, 1: 5}

    # A group that never had a member gets offsets for the topics named.
    run_json(capsys, "groups", "reset-offsets", "new-group", "-b", address, "--to-latest", "-t", "lagging",
             "--execute")
    assert {tp.partition: offset for tp, offset in broker_offsets(address, "new-group").items()} == {0: 8, 1: 5}
    code, _, err = run(capsys, "groups", "reset-offsets", "other-group", "-b", address, "--to-latest")
    assert code == 4 and "no such group: 'other-group'" in err

    assert run(capsys, "groups", "delete", "lag-group", "-b", address)[0] == 0
    code, _, err = run(capsys, "groups", "describe", "lag-group", "-b", address)
    assert code == 4 and "no such group" in err


def broker_offsets(address: str, group: str) -> dict:
    from fastmq.kafka import Admin

    with Admin(address) as admin:
        return {tp: meta.offset for tp, meta in admin.list_group_offsets(group, timeout=10).items()}


def test_reset_refuses_a_group_with_members(broker, capsys):
    address = broker.bootstrap_servers
    with Producer(address) as producer:
        producer.send("busy", b"v", partition=0).get(30)
    with Consumer("busy", bootstrap_servers=address, group_id="busy-group", auto_offset_reset="earliest") as consumer:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        code, _, err = run(capsys, "groups", "reset-offsets", "busy-group", "-b", address, "--to-earliest",
                           "-t", "busy", "--execute")
        assert code == 1 and "stop its consumers first" in err
        described, = run_json(capsys, "groups", "describe", "busy-group", "-b", address)
        assert described["members"] == 1 and described["partitions"][0]["member"] is not None


def test_verbs_reject_bad_options_at_once(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["topics", "list", "-b", "127.0.0.1:1", "--output", "bogus"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["topics", "list", "-b", "nsq://127.0.0.1:1"])
    assert "unknown protocol 'nsq'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["groups", "reset-offsets", "g", "-b", "127.0.0.1:1", "--to-datetime", "yesterday"])
    assert "ISO 8601" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["groups", "reset-offsets", "g", "-b", "127.0.0.1:1", "--to-earliest", "--to-latest"])
